import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import { Logger } from '../../../src/common/log.js';
import { Acl, validateAcl } from '../../../src/registry/auth/acl.js';
import { Htpasswd } from '../../../src/registry/auth/htpasswd.js';
import { decodeJws } from '../../../src/registry/auth/jwt.js';
import { generateSigningKeyPair } from '../../../src/registry/auth/keys.js';
import { TokenAuthorizer, TokenVerifier } from '../../../src/registry/auth/token.authorizer.js';
import { TokenServer } from '../../../src/registry/auth/token-server.js';

const quiet = new Logger('error');
const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

describe('built-in token server', () => {
  let dir: string;
  let server: Server;
  let base: string;
  let tokens: TokenServer;
  let verifier: TokenVerifier;
  const pair = generateSigningKeyPair('ES256');

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-token-'));
    const file = join(dir, 'htpasswd');
    writeFileSync(file, `alice:${bcrypt.hashSync('pw-a', 4)}\nbob:${bcrypt.hashSync('pw-b', 4)}\n`);
    tokens = new TokenServer({
      issuer: 'berth-test',
      service: 'registry.test',
      privateKey: createPrivateKey(pair.privateKeyPem),
      htpasswd: new Htpasswd(file, { log: quiet }),
      acl: new Acl(
        validateAcl([
          { account: '*', name: '${account}/*', actions: ['pull', 'push', 'delete'] },
          { account: 'bob', name: 'alice/shared', actions: ['pull'] },
          { anonymous: true, name: 'public/*', actions: ['pull'] },
        ]),
      ),
      log: quiet,
    });
    verifier = new TokenVerifier({
      issuer: 'berth-test',
      service: 'registry.test',
      rootCerts: [new X509Certificate(pair.certificatePem)],
    });
    server = createServer((req, res) => void tokens.handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  });
  after(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  async function get(query: string, auth?: string) {
    const res = await fetch(`${base}?${query}`, { headers: auth ? { authorization: auth } : {} });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  }

  it('grants what the ACL allows out of the requested scopes (GET)', async () => {
    const r = await get(
      'service=registry.test&scope=repository:alice/app:pull,push&scope=repository:bob/app:pull&account=alice',
      basic('alice', 'pw-a'),
    );
    assert.equal(r.status, 200);
    assert.equal(r.body.token, r.body.access_token);
    assert.equal(r.body.expires_in, 300);
    assert.equal(typeof r.body.issued_at, 'string');
    const { claims, header } = decodeJws(String(r.body.token));
    assert.equal(header.alg, 'ES256');
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.aud, 'registry.test');
    assert.deepEqual(claims.access, [
      { type: 'repository', name: 'alice/app', actions: ['pull', 'push'] },
      { type: 'repository', name: 'bob/app', actions: [] },
    ]);
    const v = verifier.verify(String(r.body.token));
    assert.equal(v.subject, 'alice');
  });

  it('gives anonymous tokens for public pulls only', async () => {
    const r = await get('service=registry.test&scope=repository:public/busybox:pull,push');
    assert.equal(r.status, 200);
    assert.deepEqual(decodeJws(String(r.body.token)).claims.access, [
      { type: 'repository', name: 'public/busybox', actions: ['pull'] },
    ]);
    assert.equal(decodeJws(String(r.body.token)).claims.sub, '');
  });

  it('answers 401 with a Basic challenge for wrong credentials', async () => {
    const r = await get('service=registry.test&scope=repository:alice/app:pull', basic('alice', 'wrong'));
    assert.equal(r.status, 401);
    assert.match(String(r.headers.get('www-authenticate')), /^Basic realm=/);
    assert.equal((r.body.errors as Array<{ code: string }>)[0]?.code, 'UNAUTHORIZED');
  });

  it('answers 400 for a bad scope, a foreign service, or a mismatched account', async () => {
    assert.equal((await get('service=registry.test&scope=garbage')).status, 400);
    assert.equal((await get('service=elsewhere&scope=repository:a:pull')).status, 400);
    assert.equal((await get('service=registry.test&account=bob', basic('alice', 'pw-a'))).status, 400);
  });

  it('tokens it signs pass the registry verifier; denied actions end as 403', async () => {
    const r = await get(
      'service=registry.test&scope=repository:alice/shared:pull,push',
      basic('bob', 'pw-b'),
    );
    const authz = new TokenAuthorizer({ realm: base, service: 'registry.test', verifier });
    const req = { headers: { authorization: `Bearer ${r.body.token}` } } as never;
    assert.equal(
      (await authz.authorize(req, [{ type: 'repository', name: 'alice/shared', actions: ['pull'] }])).user,
      'bob',
    );
    await assert.rejects(
      authz.authorize(req, [{ type: 'repository', name: 'alice/shared', actions: ['push'] }]),
      (e: Error & { kind?: string }) => e.kind === 'Forbidden',
    );
  });

  it('supports the OAuth2 POST form with password and refresh_token grants', async () => {
    const post = async (form: Record<string, string>) => {
      const res = await fetch(base, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
      });
      return { status: res.status, body: (await res.json()) as Record<string, string> };
    };
    const first = await post({
      grant_type: 'password',
      username: 'alice',
      password: 'pw-a',
      service: 'registry.test',
      scope: 'repository:alice/app:pull repository:alice/app:push',
      client_id: 'test',
      access_type: 'offline',
    });
    assert.equal(first.status, 200);
    assert.equal(first.body.scope, 'repository:alice/app:pull,push');
    assert.ok(first.body.refresh_token);
    const refreshed = await post({
      grant_type: 'refresh_token',
      refresh_token: first.body.refresh_token!,
      service: 'registry.test',
      scope: 'repository:alice/other:pull',
    });
    assert.equal(refreshed.status, 200);
    assert.equal(decodeJws(refreshed.body.access_token!).claims.sub, 'alice');
    // A refresh token is not an access token.
    assert.throws(() => verifier.verify(first.body.refresh_token!), /audience/);
    assert.equal((await post({ grant_type: 'password', username: 'alice', password: 'no' })).status, 401);
    assert.equal((await post({ grant_type: 'refresh_token', refresh_token: 'x.y.z' })).status, 401);
    assert.equal((await post({ grant_type: 'client_credentials' })).status, 400);
  });
});
