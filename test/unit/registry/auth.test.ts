import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import { BerthError } from '../../../src/common/errors.js';
import { Logger } from '../../../src/common/log.js';
import { Acl, validateAcl } from '../../../src/registry/auth/acl.js';
import { BasicAuthorizer } from '../../../src/registry/auth/basic.authorizer.js';
import { Htpasswd, parseBasicAuth, parseHtpasswd } from '../../../src/registry/auth/htpasswd.js';
import { base64url, decodeJws, signJwt } from '../../../src/registry/auth/jwt.js';
import {
  generateSigningKeyPair,
  libtrustKeyId,
  loadJwks,
  parseCertBundle,
} from '../../../src/registry/auth/keys.js';
import { covers, parseScope, parseScopes } from '../../../src/registry/auth/scope.js';
import { TokenAuthorizer, TokenVerifier } from '../../../src/registry/auth/token.authorizer.js';

const quiet = new Logger('error');

function fakeReq(headers: Record<string, string> = {}, remoteAddress = '127.0.0.1'): IncomingMessage {
  return { headers, socket: { remoteAddress }, method: 'GET', url: '/' } as unknown as IncomingMessage;
}

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

async function rejectsWith(p: Promise<unknown>, kind: string): Promise<BerthError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof BerthError, `expected a BerthError, got ${err}`);
    assert.equal(err.kind, kind, err.message);
    return err;
  }
  assert.fail(`expected a ${kind} error`);
}

describe('scopes', () => {
  it('parses scopes, names with ports and resource classes', () => {
    assert.deepEqual(parseScope('repository:alice/app:pull,push'), {
      type: 'repository',
      name: 'alice/app',
      actions: ['pull', 'push'],
    });
    assert.deepEqual(parseScope('repository(plugin):localhost:5000/x:pull'), {
      type: 'repository',
      name: 'localhost:5000/x',
      actions: ['pull'],
    });
    assert.deepEqual(parseScope('registry:catalog:*'), { type: 'registry', name: 'catalog', actions: ['*'] });
    assert.throws(() => parseScope('nonsense'), /invalid scope/);
    assert.throws(() => parseScope('blob:x:pull'), /unknown resource type/);
  });

  it('merges repeated and space-separated scopes', () => {
    assert.deepEqual(parseScopes(['repository:a:pull repository:b:push', 'repository:a:push']), [
      { type: 'repository', name: 'a', actions: ['pull', 'push'] },
      { type: 'repository', name: 'b', actions: ['push'] },
    ]);
  });

  it('checks coverage, with * granting every action', () => {
    const granted = [{ type: 'repository' as const, name: 'a', actions: ['pull'] }];
    assert.ok(covers(granted, [{ type: 'repository', name: 'a', actions: ['pull'] }]));
    assert.ok(!covers(granted, [{ type: 'repository', name: 'a', actions: ['pull', 'push'] }]));
    assert.ok(!covers(granted, [{ type: 'repository', name: 'b', actions: ['pull'] }]));
    assert.ok(
      covers(
        [{ type: 'repository', name: 'a', actions: ['*'] }],
        [{ type: 'repository', name: 'a', actions: ['delete'] }],
      ),
    );
  });
});

describe('htpasswd', () => {
  let dir: string;
  let file: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-htpasswd-'));
    file = join(dir, 'htpasswd');
    // The real htpasswd tool writes $2y$; bcryptjs writes $2b$; both must work.
    const y = execFileSync('htpasswd', ['-nbB', '-C', '4', 'alice', 's3cret'], { encoding: 'utf8' }).trim();
    writeFileSync(
      file,
      `${y}\nbob:${bcrypt.hashSync('hunter2', 4)}\nmd5:$apr1$hRAOlXhg$7i1KBA7ucE.WWF51isKux1\n`,
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('parses bcrypt entries and skips other hash kinds', () => {
    const users = parseHtpasswd(
      'a:$2a$04$abcdefghijklmnopqrstuuQyQBdbMiPgfc1Wv1iE8IJzYV9nAGC9K\n# comment\nb:{SHA}xyz\nbroken\n',
      quiet,
    );
    assert.deepEqual([...users.keys()], ['a']);
  });

  it('verifies $2y$ and $2b$ passwords and refuses wrong ones and unknown users', async () => {
    const h = new Htpasswd(file, { log: quiet });
    assert.deepEqual(h.userNames().sort(), ['alice', 'bob']);
    assert.equal(await h.verify('alice', 's3cret'), true);
    assert.equal(await h.verify('bob', 'hunter2'), true);
    assert.equal(await h.verify('alice', 'wrong'), false);
    assert.equal(await h.verify('nobody', 's3cret'), false);
    assert.equal(await h.verify('md5', 'anything'), false);
  });

  it('caches verified pairs (cheap second verification) and shares concurrent checks', async () => {
    const h = new Htpasswd(file, { log: quiet });
    assert.equal(h.cachedUser('alice', 's3cret'), undefined);
    const results = await Promise.all(Array.from({ length: 16 }, () => h.verify('alice', 's3cret')));
    assert.ok(results.every((r) => r));
    assert.equal(h.cachedUser('alice', 's3cret'), 'alice');
    assert.equal(h.cachedUser('alice', 'other'), undefined);
    const t0 = performance.now();
    for (let i = 0; i < 1000; i++) assert.equal(await h.verify('alice', 's3cret'), true);
    assert.ok(performance.now() - t0 < 500, 'cached verifications must not run bcrypt');
  });

  it('expires cached pairs after the TTL and bounds the cache', async () => {
    const h = new Htpasswd(file, { log: quiet, cacheTtlMs: 1, cacheMax: 1 });
    assert.equal(await h.verify('alice', 's3cret'), true);
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(h.cachedUser('alice', 's3cret'), undefined);
    const h2 = new Htpasswd(file, { log: quiet, cacheMax: 1 });
    await h2.verify('alice', 's3cret');
    await h2.verify('bob', 'hunter2');
    assert.equal(h2.cachedUser('alice', 's3cret'), undefined);
    assert.equal(h2.cachedUser('bob', 'hunter2'), 'bob');
  });

  it('reloads the file when it changes, dropping cached credentials', async () => {
    const path = join(dir, 'reload');
    writeFileSync(path, `carol:${bcrypt.hashSync('one', 4)}\n`);
    const h = new Htpasswd(path, { log: quiet, statIntervalMs: 0 });
    assert.equal(await h.verify('carol', 'one'), true);
    writeFileSync(path, `carol:${bcrypt.hashSync('two', 4)}\ndave:${bcrypt.hashSync('x', 4)}\n`);
    assert.equal(await h.verify('carol', 'one'), false);
    assert.equal(await h.verify('carol', 'two'), true);
    assert.equal(await h.verify('dave', 'x'), true);
    rmSync(path);
    assert.equal(await h.verify('carol', 'two'), false);
  });

  it('refuses a missing file at start', () => {
    assert.throws(() => new Htpasswd(join(dir, 'absent'), { log: quiet }), /htpasswd file/);
  });

  it('parses Basic headers', () => {
    assert.deepEqual(parseBasicAuth(basic('u', 'p:w')), { user: 'u', password: 'p:w' });
    assert.equal(parseBasicAuth('Bearer x'), undefined);
    assert.equal(parseBasicAuth(`Basic ${Buffer.from('nocolon').toString('base64')}`), undefined);
  });

  it('basic authorizer: 401 with a Basic challenge, grant with the user', async () => {
    const auth = new BasicAuthorizer('berth-realm', new Htpasswd(file, { log: quiet }));
    const access = [{ type: 'repository' as const, name: 'x', actions: ['pull'] }];
    const e1 = await rejectsWith(auth.authorize(fakeReq(), access), 'Unauthorized');
    assert.deepEqual(e1.detail, { challenge: 'Basic realm="berth-realm"' });
    await rejectsWith(
      auth.authorize(fakeReq({ authorization: basic('alice', 'nope') }), access),
      'Unauthorized',
    );
    const req = fakeReq({ authorization: basic('alice', 's3cret') });
    assert.equal(auth.identify(req), undefined);
    assert.equal((await auth.authorize(req, access)).user, 'alice');
    assert.equal(auth.identify(req), 'alice');
  });
});

describe('signing keys', () => {
  it('makes self-signed certificates node and openssl accept', () => {
    for (const kind of ['ES256', 'RS256'] as const) {
      const pair = generateSigningKeyPair(kind);
      const [cert] = parseCertBundle(pair.certificatePem);
      assert.ok(cert?.ca);
      assert.ok(cert.verify(cert.publicKey));
      assert.equal(libtrustKeyId(cert.publicKey), libtrustKeyId(createPrivateKey(pair.privateKeyPem)));
    }
  });

  it('computes libtrust key ids in their 12x4 base32 form', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    assert.match(libtrustKeyId(publicKey), /^([A-Z2-7]{4}:){11}[A-Z2-7]{4}$/);
  });
});

describe('bearer tokens', () => {
  const pair = generateSigningKeyPair('ES256');
  const key = createPrivateKey(pair.privateKeyPem);
  const cert = new X509Certificate(pair.certificatePem);
  const kid = libtrustKeyId(cert.publicKey);
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const issuer = 'berth-issuer';
  const service = 'berth-registry';
  const now = () => Math.floor(Date.now() / 1000);
  const claims = (extra: Record<string, unknown> = {}) => ({
    iss: issuer,
    aud: service,
    sub: 'alice',
    exp: now() + 300,
    nbf: now() - 5,
    iat: now(),
    access: [{ type: 'repository', name: 'alice/app', actions: ['pull', 'push'] }],
    ...extra,
  });
  const verifier = new TokenVerifier({
    issuer,
    service,
    rootCerts: [cert],
    keys: new Map([['rsa-key', rsa.publicKey]]),
  });
  const authz = new TokenAuthorizer({ realm: 'http://127.0.0.1:1/token', service, verifier });
  const pull = [{ type: 'repository' as const, name: 'alice/app', actions: ['pull'] }];
  const bearer = (t: string) => fakeReq({ authorization: `Bearer ${t}` });

  it('accepts a good token by kid (ES256), by x5c chain and by a JWKS key (RS256)', async () => {
    const grant = await authz.authorize(bearer(signJwt(claims(), key, { kid })), pull);
    assert.equal(grant.user, 'alice');
    // What a mount without `from` may search: the repositories the token grants pull on.
    assert.equal(grant.mayPull?.('alice/app'), true);
    assert.equal(grant.mayPull?.('bob/app'), false);
    const x5c = signJwt(claims(), key, { x5c: [cert.raw.toString('base64')] });
    assert.equal((await authz.authorize(bearer(x5c), pull)).user, 'alice');
    const rs = signJwt(claims(), rsa.privateKey, { kid: 'rsa-key' });
    assert.equal(decodeJws(rs).header.alg, 'RS256');
    assert.equal((await authz.authorize(bearer(rs), pull)).user, 'alice');
  });

  it('answers 401 with a Bearer challenge naming the scope when there is no token', async () => {
    const err = await rejectsWith(authz.authorize(fakeReq(), pull), 'Unauthorized');
    assert.equal(
      (err.detail as { challenge: string }).challenge,
      'Bearer realm="http://127.0.0.1:1/token",service="berth-registry",scope="repository:alice/app:pull"',
    );
  });

  const invalid: Array<[string, () => string]> = [
    ['expired', () => signJwt(claims({ exp: now() - 120 }), key, { kid })],
    ['not yet valid', () => signJwt(claims({ nbf: now() + 120 }), key, { kid })],
    ['wrong issuer', () => signJwt(claims({ iss: 'someone-else' }), key, { kid })],
    ['wrong audience', () => signJwt(claims({ aud: ['other-service'] }), key, { kid })],
    ['no expiry', () => signJwt(claims({ exp: undefined }), key, { kid })],
    ['unknown kid', () => signJwt(claims(), key, { kid: 'AAAA:BBBB' })],
    [
      'bad signature',
      () => {
        const [h, , s] = signJwt(claims(), key, { kid }).split('.');
        return `${h}.${base64url(JSON.stringify(claims({ sub: 'mallory' })))}.${s}`;
      },
    ],
    [
      'signed by an untrusted key',
      () => signJwt(claims(), generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey, { kid }),
    ],
    [
      'untrusted x5c',
      () => {
        const other = generateSigningKeyPair('ES256');
        return signJwt(claims(), createPrivateKey(other.privateKeyPem), {
          x5c: [new X509Certificate(other.certificatePem).raw.toString('base64')],
        });
      },
    ],
    [
      'alg none',
      () => `${base64url(JSON.stringify({ alg: 'none', kid }))}.${base64url(JSON.stringify(claims()))}.`,
    ],
    ['garbage', () => 'not-a-jwt'],
  ];
  for (const [what, make] of invalid) {
    it(`rejects a token: ${what}`, async () => {
      const err = await rejectsWith(authz.authorize(bearer(make()), pull), 'Unauthorized');
      assert.match((err.detail as { challenge: string }).challenge, /error="invalid_token"$/);
    });
  }

  it('rejects an RS256 header on an EC key (algorithm confusion)', async () => {
    const good = signJwt(claims(), key, { kid });
    const [, body, sig] = good.split('.');
    const forged = `${base64url(JSON.stringify({ alg: 'RS256', kid }))}.${body}.${sig}`;
    await rejectsWith(authz.authorize(bearer(forged), pull), 'Unauthorized');
  });

  it('answers 403 when the token names the resource without the action, 401 insufficient_scope for another resource', async () => {
    const t = signJwt(
      claims({ access: [{ type: 'repository', name: 'alice/app', actions: ['pull'] }] }),
      key,
      { kid },
    );
    const push = [{ type: 'repository' as const, name: 'alice/app', actions: ['pull', 'push'] }];
    const denied = await rejectsWith(authz.authorize(bearer(t), push), 'Forbidden');
    assert.deepEqual((denied.detail as { access: unknown }).access, [
      { type: 'repository', name: 'alice/app', actions: ['push'] },
    ]);
    const other = [{ type: 'repository' as const, name: 'bob/app', actions: ['pull'] }];
    const again = await rejectsWith(authz.authorize(bearer(t), other), 'Unauthorized');
    assert.match(
      (again.detail as { challenge: string }).challenge,
      /scope="repository:bob\/app:pull",error="insufficient_scope"$/,
    );
  });

  it('trusts the keys of a JWKS file, by their kid', async () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    const dir = mkdtempSync(join(tmpdir(), 'berth-jwks-'));
    try {
      const file = join(dir, 'jwks.json');
      writeFileSync(
        file,
        JSON.stringify({
          keys: [{ ...ec.publicKey.export({ format: 'jwk' }), kid: 'ops-2026', use: 'sig' }],
        }),
      );
      const v = new TokenVerifier({ issuer, service, keys: loadJwks(file) });
      const t = signJwt(claims(), ec.privateKey, { kid: 'ops-2026' });
      assert.equal(decodeJws(t).header.alg, 'ES384');
      assert.equal(v.verify(t).subject, 'alice');
      assert.throws(() => v.verify(signJwt(claims(), ec.privateKey, { kid: 'other' })), /not trusted/);
      writeFileSync(file, '{"nokeys":true}');
      assert.throws(() => loadJwks(file), /keys/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('caches verified tokens and identifies their subject', async () => {
    const t = signJwt(claims({ sub: 'carol' }), key, { kid });
    const req = bearer(t);
    assert.equal(authz.identify(req), undefined);
    await authz.authorize(req, pull);
    assert.equal(authz.identify(req), 'carol');
  });
});

describe('ACLs', () => {
  const acl = new Acl(
    validateAcl([
      { account: 'alice', name: 'alice/*', actions: ['pull', 'push'] },
      { account: '*', name: '${account}/*', actions: ['*'] },
      { group: 'readers', name: 'shared/*', actions: ['pull'] },
      { anonymous: true, name: 'public/*', actions: ['pull'] },
      { account: 'admin', type: 'registry', name: 'catalog', actions: ['*'] },
    ]),
    { readers: ['bob'] },
  );
  const want = (name: string, ...actions: string[]) => ({ type: 'repository' as const, name, actions });

  it('grants the intersection of asked and allowed actions', () => {
    assert.deepEqual(acl.grant({ account: 'alice' }, [want('alice/app', 'pull', 'push', 'delete')]), [
      want('alice/app', 'pull', 'push', 'delete'), // the ${account}/* rule allows everything
    ]);
    assert.deepEqual(acl.grant({ account: 'bob' }, [want('alice/app', 'pull', 'push')]), [want('alice/app')]);
    assert.deepEqual(acl.grant({ account: 'bob' }, [want('shared/x/y', 'pull', 'push')]), [
      want('shared/x/y', 'pull'),
    ]);
    assert.deepEqual(acl.grant({ account: 'carol' }, [want('shared/x', 'pull')]), [want('shared/x')]);
  });

  it('gives anonymous requests only anonymous rules, and those to everybody', () => {
    assert.deepEqual(acl.grant({}, [want('public/busybox', 'pull', 'push'), want('alice/app', 'pull')]), [
      want('public/busybox', 'pull'),
      want('alice/app'),
    ]);
    assert.deepEqual(acl.grant({ account: 'bob' }, [want('public/busybox', 'pull')]), [
      want('public/busybox', 'pull'),
    ]);
  });

  it('treats ${account} literally and keeps registry scopes apart', () => {
    assert.deepEqual(acl.grant({ account: 'a*' }, [want('abc/x', 'pull')]), [want('abc/x')]);
    const catalog = { type: 'registry' as const, name: 'catalog', actions: ['*'] };
    assert.deepEqual(acl.grant({ account: 'admin' }, [catalog]), [catalog]);
    assert.deepEqual(acl.grant({ account: 'alice' }, [catalog]), [{ ...catalog, actions: [] }]);
  });

  it('without rules: users get what they ask, anonymous nothing', () => {
    const open = new Acl([]);
    assert.deepEqual(open.grant({ account: 'x' }, [want('a', 'pull', 'push')]), [want('a', 'pull', 'push')]);
    assert.deepEqual(open.grant({}, [want('a', 'pull')]), [want('a')]);
  });

  it('refuses malformed rules', () => {
    assert.throws(() => validateAcl([{ name: 'x', actions: ['pull'] }]), /say whom/);
    assert.throws(() => validateAcl([{ account: 'a', actions: ['pull'] }]), /name/);
    assert.throws(() => validateAcl([{ account: 'a', name: 'x', actions: 'pull' }]), /actions/);
    assert.throws(() => validateAcl([{ account: 'a', name: 'x', actions: [], color: 1 }]), /unknown field/);
  });
});
