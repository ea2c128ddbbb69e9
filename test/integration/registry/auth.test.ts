import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Logger } from '../../../src/common/log.js';
import { Acl } from '../../../src/registry/auth/acl.js';
import { Htpasswd } from '../../../src/registry/auth/htpasswd.js';
import { signJwt } from '../../../src/registry/auth/jwt.js';
import { ensureSigningKeyPair, libtrustKeyId } from '../../../src/registry/auth/keys.js';
import { TokenServer } from '../../../src/registry/auth/token-server.js';
import { startRegistry } from '../../../src/registry/index.js';
import {
  buildOciLayout,
  errorCodes,
  http,
  OCI_MANIFEST,
  requireTool,
  skopeo,
} from '../../helpers/registry.js';

requireTool('skopeo', 'apt-get install skopeo');
requireTool('htpasswd', 'apt-get install apache2-utils');

const quiet = new Logger('error');
let dir: string;
let layout: string;
let users: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-auth-it-'));
  users = join(dir, 'htpasswd');
  execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
  execFileSync('htpasswd', ['-bB', '-C', '4', users, 'bob', 'bob-pw'], { stdio: 'ignore' });
  layout = join(dir, 'layout');
  await buildOciLayout(layout, { refName: 'v1', marker: 'auth' });
});
after(() => rmSync(dir, { recursive: true, force: true }));

type Running = Awaited<ReturnType<typeof startRegistry>>;

async function start(extra: Record<string, unknown>): Promise<Running> {
  const root = mkdtempSync(join(dir, 'root-'));
  return startRegistry({
    version: '0.1',
    log: { level: 'error', accesslog: { disabled: true } },
    storage: { filesystem: { rootdirectory: root }, delete: { enabled: true } },
    http: { addr: '127.0.0.1:0' },
    ...extra,
  });
}

const hostOf = (url: string) => new URL(url).host;
const basic = (u: string, p: string) => ({
  Authorization: `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`,
});

async function copyIn(reg: Running, repoTag: string, creds?: string): Promise<string> {
  const args = [
    'copy',
    '--dest-tls-verify=false',
    `oci:${layout}:v1`,
    `docker://${hostOf(reg.url)}/${repoTag}`,
  ];
  if (creds) args.splice(1, 0, '--dest-creds', creds);
  return skopeo(args);
}

async function inspect(reg: Running, repoTag: string, creds?: string): Promise<Record<string, unknown>> {
  const args = ['inspect', '--tls-verify=false', '--raw', `docker://${hostOf(reg.url)}/${repoTag}`];
  if (creds) args.splice(1, 0, '--creds', creds);
  return JSON.parse(await skopeo(args)) as Record<string, unknown>;
}

describe('htpasswd basic auth', () => {
  let reg: Running;
  before(async () => {
    reg = await start({ auth: { htpasswd: { realm: 'berth-basic', path: users } } });
  });
  after(async () => reg.close());

  it('answers 401 UNAUTHORIZED with a Basic challenge without or with wrong credentials', async () => {
    for (const headers of [{}, basic('alice', 'nope'), basic('mallory', 'alice-pw')]) {
      const res = await http('GET', `${reg.url}/v2/`, { headers });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('www-authenticate'), 'Basic realm="berth-basic"');
      assert.equal(res.headers.get('docker-distribution-api-version'), 'registry/2.0');
      assert.deepEqual(errorCodes(res), ['UNAUTHORIZED']);
    }
    const repo = await http('GET', `${reg.url}/v2/alice/app/tags/list`);
    assert.equal(repo.status, 401);
    assert.equal((await http('GET', `${reg.url}/v2/`, { headers: basic('alice', 'alice-pw') })).status, 200);
  });

  it('skopeo pushes and inspects with --creds, and fails without', async () => {
    await copyIn(reg, 'alice/app:v1', 'alice:alice-pw');
    const manifest = await inspect(reg, 'alice/app:v1', 'bob:bob-pw');
    assert.equal(manifest.mediaType, OCI_MANIFEST);
    await assert.rejects(inspect(reg, 'alice/app:v1'), /unauthorized|authentication required/i);
    await assert.rejects(copyIn(reg, 'alice/app:v2', 'alice:wrong'), /unauthorized|authentication required/i);
  });
});

describe('token auth with the built-in token server', () => {
  let reg: Running;
  before(async () => {
    const keys = await ensureSigningKeyPair(join(dir, 'token-keys'));
    reg = await start({
      auth: { htpasswd: { realm: 'berth-token', path: users } },
      berth: {
        tokenserver: {
          path: '/auth/token',
          key: keys.keyPath,
          certificate: keys.certPath,
          service: 'berth-it',
          issuer: 'berth-it-issuer',
          acl: [
            { account: 'alice', name: 'alice/*', actions: ['pull', 'push', 'delete'] },
            { account: 'bob', name: 'alice/*', actions: ['pull'] },
            { anonymous: true, name: 'public/*', actions: ['pull'] },
            { account: 'alice', name: 'public/*', actions: ['push'] },
          ],
        },
      },
    });
  });
  after(async () => reg.close());

  it('challenges with a Bearer realm, service and scope', async () => {
    const base = await http('GET', `${reg.url}/v2/`);
    assert.equal(base.status, 401);
    assert.equal(
      base.headers.get('www-authenticate'),
      `Bearer realm="${reg.url}/auth/token",service="berth-it"`,
    );
    const res = await http('GET', `${reg.url}/v2/alice/app/manifests/v1`);
    assert.equal(res.status, 401);
    assert.equal(
      res.headers.get('www-authenticate'),
      `Bearer realm="${reg.url}/auth/token",service="berth-it",scope="repository:alice/app:pull"`,
    );
    const push = await http('POST', `${reg.url}/v2/alice/app/blobs/uploads/`);
    assert.match(push.headers.get('www-authenticate') ?? '', /scope="repository:alice\/app:pull,push"$/);
  });

  it('skopeo follows the challenge to the token server: push as alice, pull as bob, anonymous public pull', async () => {
    await copyIn(reg, 'alice/app:v1', 'alice:alice-pw');
    assert.equal((await inspect(reg, 'alice/app:v1', 'bob:bob-pw')).mediaType, OCI_MANIFEST);
    await copyIn(reg, 'public/busybox:v1', 'alice:alice-pw');
    assert.equal((await inspect(reg, 'public/busybox:v1')).mediaType, OCI_MANIFEST);
    // bob may pull but not push; nobody else may pull alice's images.
    await assert.rejects(copyIn(reg, 'alice/app:bob', 'bob:bob-pw'), /denied|unauthorized/i);
    await assert.rejects(inspect(reg, 'alice/app:v1'), /denied|unauthorized|authentication required/i);
    await assert.rejects(inspect(reg, 'alice/app:v1', 'bob:wrong'), /unauthorized|401/i);
  });

  it('a valid token lacking the action is 403 DENIED; a bad token is 401 invalid_token', async () => {
    const tokenRes = await http(
      'GET',
      `${reg.url}/auth/token?service=berth-it&scope=repository:alice/app:pull,push`,
      { headers: basic('bob', 'bob-pw') },
    );
    assert.equal(tokenRes.status, 200);
    const body = tokenRes.json() as {
      token: string;
      access_token: string;
      expires_in: number;
      issued_at: string;
    };
    assert.equal(body.token, body.access_token);
    assert.equal(body.expires_in, 300);
    const auth = { Authorization: `Bearer ${body.token}`, Accept: OCI_MANIFEST };
    assert.equal((await http('GET', `${reg.url}/v2/alice/app/manifests/v1`, { headers: auth })).status, 200);
    const denied = await http('POST', `${reg.url}/v2/alice/app/blobs/uploads/`, { headers: auth });
    assert.equal(denied.status, 403);
    assert.deepEqual(errorCodes(denied), ['DENIED']);
    const forged = await http('GET', `${reg.url}/v2/alice/app/manifests/v1`, {
      headers: { Authorization: `Bearer ${body.token.slice(0, -4)}AAAA` },
    });
    assert.equal(forged.status, 401);
    assert.match(forged.headers.get('www-authenticate') ?? '', /error="invalid_token"$/);
    const wrong = await http(
      'GET',
      `${reg.url}/auth/token?service=berth-it&scope=repository:alice/app:pull`,
      {
        headers: basic('bob', 'nope'),
      },
    );
    assert.equal(wrong.status, 401);
    assert.match(wrong.headers.get('www-authenticate') ?? '', /^Basic realm=/);
  });
});

describe('token auth with an external token server (rootcertbundle)', () => {
  let tokenHttp: Server;
  let tokenUrl: string;
  let keys: { keyPath: string; certPath: string };
  let tokens: TokenServer;
  before(async () => {
    keys = await ensureSigningKeyPair(join(dir, 'external-keys'), 'RS256');
    tokens = new TokenServer({
      issuer: 'external-issuer',
      service: 'external-registry',
      privateKey: createPrivateKey((await import('node:fs')).readFileSync(keys.keyPath, 'utf8')),
      htpasswd: new Htpasswd(users, { log: quiet }),
      acl: new Acl([]),
      log: quiet,
    });
    tokenHttp = createServer((req, res) => void tokens.handle(req, res));
    await new Promise<void>((r) => tokenHttp.listen(0, '127.0.0.1', r));
    tokenUrl = `http://127.0.0.1:${(tokenHttp.address() as AddressInfo).port}/token`;
  });
  after(async () => {
    await new Promise<void>((r) => tokenHttp.close(() => r()));
  });

  it('berth verifies RS256 tokens by the libtrust kid of a root certificate; expired and foreign tokens are refused', async () => {
    const reg = await start({
      auth: {
        token: {
          realm: tokenUrl,
          service: 'external-registry',
          issuer: 'external-issuer',
          rootcertbundle: keys.certPath,
        },
      },
    });
    try {
      await copyIn(reg, 'team/app:v1', 'alice:alice-pw');
      assert.equal((await inspect(reg, 'team/app:v1', 'bob:bob-pw')).mediaType, OCI_MANIFEST);
      const key = createPrivateKey((await import('node:fs')).readFileSync(keys.keyPath, 'utf8'));
      const now = Math.floor(Date.now() / 1000);
      const claims = {
        iss: 'external-issuer',
        aud: 'external-registry',
        sub: 'alice',
        access: [{ type: 'repository', name: 'team/app', actions: ['pull'] }],
      };
      const url = `${reg.url}/v2/team/app/manifests/v1`;
      const kid = libtrustKeyId(key);
      const ok = signJwt({ ...claims, exp: now + 60 }, key, { kid });
      assert.equal(
        (await http('GET', url, { headers: { Authorization: `Bearer ${ok}`, Accept: OCI_MANIFEST } })).status,
        200,
      );
      for (const bad of [
        signJwt({ ...claims, exp: now - 3600 }, key, { kid }),
        signJwt({ ...claims, exp: now + 60, iss: 'other' }, key, { kid }),
        signJwt({ ...claims, exp: now + 60, aud: 'other' }, key, { kid }),
      ]) {
        const res = await http('GET', url, { headers: { Authorization: `Bearer ${bad}` } });
        assert.equal(res.status, 401);
        assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
      }
    } finally {
      await reg.close();
    }
  });

  it('the reference registry accepts tokens of berth token server (same key ids)', async () => {
    const root = mkdtempSync(join(dir, 'ref-'));
    const port = await new Promise<number>((resolve) => {
      const s = createServer();
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const config = join(root, 'config.yml');
    writeFileSync(
      config,
      `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${root}/data\nhttp:\n  addr: 127.0.0.1:${port}\n` +
        `auth:\n  token:\n    realm: ${tokenUrl}\n    service: external-registry\n    issuer: external-issuer\n    rootcertbundle: ${keys.certPath}\n`,
    );
    const child = spawn('/usr/bin/docker-registry', ['serve', config], { stdio: 'ignore' });
    try {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const res = await fetch(`http://127.0.0.1:${port}/v2/`).catch(() => undefined);
        if (res) {
          await res.arrayBuffer();
          assert.equal(res.status, 401);
          break;
        }
        if (Date.now() > deadline) throw new Error('reference registry did not start');
        await new Promise((r) => setTimeout(r, 100));
      }
      await skopeo([
        'copy',
        '--dest-tls-verify=false',
        '--dest-creds',
        'alice:alice-pw',
        `oci:${layout}:v1`,
        `docker://127.0.0.1:${port}/team/app:v1`,
      ]);
      const raw = await skopeo([
        'inspect',
        '--tls-verify=false',
        '--raw',
        '--creds',
        'bob:bob-pw',
        `docker://127.0.0.1:${port}/team/app:v1`,
      ]);
      assert.equal((JSON.parse(raw) as { mediaType: string }).mediaType, OCI_MANIFEST);
    } finally {
      if (child.pid) process.kill(child.pid, 'SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(root, { recursive: true, force: true });
    }
  });
});
