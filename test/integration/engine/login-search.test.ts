/**
 * POST /auth (docker login), GET /images/search (from the registries' catalogs) and
 * GET /distribution/{name}/json, against berth's registry (open, htpasswd, token server) and
 * Debian's docker-registry with htpasswd; /distribution answers compared with Debian's dockerd.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import {
  ALL_MANIFEST_TYPES,
  AUTH_NONE,
  http,
  registryHost,
  requireTool,
  sha256,
  TestRegistries,
  type TestRegistry,
} from '../../helpers/registry.js';
import { type ReferenceRegistry, startReferenceRegistry } from '../../helpers/registry-reference.js';

type Running = TestRegistry;

let work: string;
let users: string;
let engine: TestEngine;
let dockerd: ReferenceDockerd;
const berthRegs = new TestRegistries();
let open: Running;
let mirror: Running;
let basic: Running;
let token: Running;
let debianBasic: ReferenceRegistry;
let pushed: string;

const hostOf = registryHost;

/** A raw request to Debian's dockerd. */
function refRequest(
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath: dockerd.socket, method, path, headers }, (res) => {
      let body = '';
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

before(async () => {
  requireTool('dockerd', "Debian's docker.io package is needed (scripts/install-deps.sh)");
  requireTool('htpasswd', 'htpasswd is needed (apache2-utils, scripts/install-deps.sh)');
  work = await mkdtemp(join(tmpdir(), 'berth-login-'));
  users = join(work, 'htpasswd');
  execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
  open = await berthRegs.start();
  mirror = await berthRegs.start();
  basic = await berthRegs.start({ auth: { htpasswd: { realm: 'berth-test', path: users } } });
  token = await berthRegs.start({ berth: { tokenserver: { enabled: true, htpasswd: users } } });
  debianBasic = await startReferenceRegistry(await mkdtemp(join(work, 'debian-basic-')), { htpasswd: users });
  engine = await TestEngine.start({
    bridge: 'none',
    args: ['--insecure-registry', hostOf(open), '--registry-mirror', mirror.url],
  });
  await ensureBusybox(engine);
  dockerd = await ReferenceDockerd.start({
    insecureRegistries: [...berthRegs.all.map(hostOf), debianBasic.hostPort],
  });
  for (const name of ['lib/bb', 'other/bb', 'zz/tools']) {
    await engine.dockerOk(['tag', 'busybox', `${hostOf(open)}/${name}:1`]);
    const out = await engine.dockerOk(['push', `${hostOf(open)}/${name}:1`]);
    pushed = (/digest: (sha256:[0-9a-f]{64})/.exec(out) ?? [])[1] as string;
  }
  await engine.dockerOk(['tag', 'busybox', `${hostOf(mirror)}/library/mirrored:1`]);
  await engine.dockerOk(['push', `${hostOf(mirror)}/library/mirrored:1`]);
});

after(async () => {
  await engine?.destroy();
  await dockerd?.destroy();
  await berthRegs.stopAll();
  await debianBasic?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('docker login (POST /auth)', () => {
  it('logs in with htpasswd (berth, Debian) and answers dockerd words for wrong credentials', async () => {
    for (const host of [hostOf(basic), debianBasic.hostPort]) {
      const ok = await engine.request('POST', '/v1.41/auth', {
        body: { username: 'alice', password: 'alice-pw', serveraddress: host },
      });
      assert.equal(ok.status, 200, ok.text());
      assert.deepEqual(ok.json(), { IdentityToken: '', Status: 'Login Succeeded' });
      const wrong = await engine.request('POST', '/v1.41/auth', {
        body: { username: 'alice', password: 'nope', serveraddress: host },
      });
      assert.equal(wrong.status, 401);
      assert.deepEqual(wrong.json(), {
        message: `login attempt to http://${host}/v2/ failed with status: 401 Unauthorized`,
      });
      const none = await engine.request('POST', '/v1.41/auth', { body: { serveraddress: host } });
      assert.equal(none.status, 401);
      assert.deepEqual(none.json(), { message: `Get "http://${host}/v2/": no basic auth credentials` });
    }
  });

  it('logs in with the token server: an IdentityToken that logs in and pushes again', async () => {
    const host = hostOf(token);
    const ok = await engine.request('POST', '/v1.41/auth', {
      body: { username: 'alice', password: 'alice-pw', serveraddress: `https://${host}/` },
    });
    assert.equal(ok.status, 200, ok.text());
    const body = ok.json() as { IdentityToken: string; Status: string };
    assert.equal(body.Status, 'Login Succeeded');
    assert.ok(body.IdentityToken.length > 20, 'a refresh token');
    const again = await engine.request('POST', '/v1.41/auth', {
      body: { identitytoken: body.IdentityToken, serveraddress: host },
    });
    assert.equal(again.status, 200, again.text());
    await engine.dockerOk(['tag', 'busybox', `${host}/alice/bb:1`]);
    const auth = Buffer.from(
      JSON.stringify({ identitytoken: body.IdentityToken, serveraddress: host }),
    ).toString('base64');
    const push = await engine.request('POST', `/v1.41/images/${host}/alice/bb/push?tag=1`, {
      headers: { 'X-Registry-Auth': auth },
    });
    assert.match(push.text(), /"aux":\{"Tag":"1"/);
    const wrong = await engine.request('POST', '/v1.41/auth', {
      body: { username: 'alice', password: 'nope', serveraddress: host },
    });
    assert.equal(wrong.status, 401);
    assert.match(
      (wrong.json() as { message: string }).message,
      new RegExp(`^Get "http://${host}/v2/": unauthorized: `),
    );
  });

  it('docker login through the CLI; an unreachable registry is an error', async () => {
    const out = await engine.dockerOk(['login', '-u', 'alice', '--password-stdin', hostOf(token)], {
      input: 'alice-pw\n',
    });
    assert.match(out, /Login Succeeded/);
    const open1 = await engine.dockerOk(['login', '-u', 'x', '--password-stdin', hostOf(open)], {
      input: 'y\n',
    });
    assert.match(open1, /Login Succeeded/);
    const down = await engine.request('POST', '/v1.41/auth', {
      body: { username: 'a', password: 'b', serveraddress: '127.0.0.1:1' },
    });
    assert.equal(down.status, 503);
    assert.match((down.json() as { message: string }).message, /^Get "http:\/\/127\.0\.0\.1:1\/v2\/": /);
  });
});

describe('docker search (GET /images/search)', () => {
  it("answers from a registry's catalog for host:port/term, in dockerd's result shape", async () => {
    const host = hostOf(open);
    const res = await engine.request('GET', `/v1.41/images/search?term=${host}/bb`);
    assert.equal(res.status, 200, res.text());
    assert.deepEqual(
      res.json(),
      ['lib/bb', 'other/bb'].map((n) => ({
        star_count: 0,
        is_official: false,
        name: `${host}/${n}`,
        is_trusted: false,
        is_automated: false,
        description: '',
      })),
    );
    const one = await engine.request('GET', `/v1.41/images/search?term=${host}/bb&limit=1`);
    assert.equal((one.json() as unknown[]).length, 1);
    const cli = await engine.dockerOk(['search', '--format', '{{.Name}} {{.StarCount}}', `${host}/tools`]);
    assert.equal(cli, `${host}/zz/tools 0`);
  });

  it('a bare term searches the mirrors (official names) and the insecure registries named by host', async () => {
    const res = await engine.request('GET', '/v1.41/images/search?term=mirrored');
    assert.equal(res.status, 200, res.text());
    assert.deepEqual(
      (res.json() as Array<{ name: string; is_official: boolean }>).map((r) => [r.name, r.is_official]),
      [['mirrored', true]],
    );
    const bb = await engine.request('GET', '/v1.41/images/search?term=bb');
    assert.deepEqual(
      (bb.json() as Array<{ name: string }>).map((r) => r.name),
      [`${hostOf(open)}/lib/bb`, `${hostOf(open)}/other/bb`],
    );
    const official = await engine.request(
      'GET',
      `/v1.41/images/search?term=i&filters=${encodeURIComponent('{"is-official":["true"]}')}`,
    );
    assert.deepEqual(
      (official.json() as Array<{ name: string }>).map((r) => r.name),
      ['mirrored'],
    );
  });

  it('refuses bad limits and filters as dockerd', async () => {
    const host = hostOf(open);
    const zero = await engine.request('GET', `/v1.41/images/search?term=${host}/bb&limit=0`);
    assert.equal(zero.status, 400);
    assert.deepEqual(zero.json(), { message: 'Limit 0 is outside the range of [1, 100]' });
    const foo = await engine.request(
      'GET',
      `/v1.41/images/search?term=${host}/bb&filters=${encodeURIComponent('{"foo":["1"]}')}`,
    );
    assert.equal(foo.status, 400);
    assert.deepEqual(foo.json(), { message: "invalid filter 'foo'" });
    const stars = await engine.request(
      'GET',
      `/v1.41/images/search?term=${host}/bb&filters=${encodeURIComponent('{"stars":["x"]}')}`,
    );
    assert.equal(stars.status, 400);
    assert.deepEqual(stars.json(), { message: "Invalid filter 'stars=x'" });
  });
});

describe('GET /distribution/{name}/json', () => {
  it("answers what dockerd answers: an image's descriptor and platform, 404s", async () => {
    const host = hostOf(open);
    for (const path of [
      `/v1.41/distribution/${host}/lib/bb:1/json`,
      `/v1.41/distribution/${host}/lib/bb@${pushed}/json`,
      `/v1.41/distribution/${host}/lib/bb:nope/json`,
      `/v1.41/distribution/${host}/nothere:1/json`,
    ]) {
      const ours = await engine.request('GET', path, { headers: { 'X-Registry-Auth': AUTH_NONE } });
      const theirs = await refRequest('GET', path, { 'X-Registry-Auth': AUTH_NONE });
      assert.equal(ours.status, theirs.status, path);
      assert.deepEqual(ours.json(), JSON.parse(theirs.body), path);
    }
    const ok = await engine.request('GET', `/v1.41/distribution/${host}/lib/bb:1/json`);
    assert.deepEqual(ok.json(), {
      Descriptor: {
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
        digest: pushed,
        size: 527,
      },
      Platforms: [{ architecture: 'amd64', os: 'linux' }],
    });
    const id = await engine.request('GET', `/v1.41/distribution/${'a'.repeat(64)}/json`);
    assert.equal(id.status, 400);
  });

  it("lists an index's platforms; credentials from X-Registry-Auth", async () => {
    const host = hostOf(open);
    const index = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json',
      manifests: [
        {
          mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
          size: 527,
          digest: pushed,
          platform: { architecture: 'amd64', os: 'linux' },
        },
        {
          mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
          size: 527,
          digest: pushed,
          platform: { architecture: 'arm64', os: 'linux', variant: 'v8' },
        },
      ],
    });
    const put = await http('PUT', `${open.url}/v2/lib/bb/manifests/multi`, {
      body: index,
      headers: { 'Content-Type': 'application/vnd.docker.distribution.manifest.list.v2+json' },
    });
    assert.equal(put.status, 201, put.text());
    const path = `/v1.41/distribution/${host}/lib/bb:multi/json`;
    const ours = await engine.request('GET', path, { headers: { 'X-Registry-Auth': AUTH_NONE } });
    const theirs = await refRequest('GET', path, { 'X-Registry-Auth': AUTH_NONE });
    assert.equal(ours.status, 200);
    assert.deepEqual(ours.json(), JSON.parse(theirs.body));
    assert.equal((ours.json() as { Descriptor: { digest: string } }).Descriptor.digest, sha256(index));

    // htpasswd: anonymous is refused, alice's credentials from X-Registry-Auth are taken
    const b = hostOf(basic);
    await engine.dockerOk(['tag', 'busybox', `${b}/alice/bb:1`]);
    const alice = Buffer.from(
      JSON.stringify({ username: 'alice', password: 'alice-pw', serveraddress: b }),
    ).toString('base64');
    const push = await engine.request('POST', `/v1.41/images/${b}/alice/bb/push?tag=1`, {
      headers: { 'X-Registry-Auth': alice },
    });
    assert.match(push.text(), /"aux"/);
    const anon = await engine.request('GET', `/v1.41/distribution/${b}/alice/bb:1/json`);
    assert.equal(anon.status, 401);
    const withAuth = await engine.request('GET', `/v1.41/distribution/${b}/alice/bb:1/json`, {
      headers: { 'X-Registry-Auth': alice },
    });
    assert.equal(withAuth.status, 200, withAuth.text());
    const m = await http('GET', `${open.url}/v2/lib/bb/manifests/1`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(m.status, 200);
  });
});
