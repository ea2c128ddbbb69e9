// The pull-through cache (`proxy`): proxying Debian's docker-registry and a berth registry with
// token auth, one upstream fetch for many clients, cached content served with the upstream gone,
// tags re-checked after the ttl, pushes refused.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureSigningKeyPair } from '../../../src/registry/auth/keys.js';
import { eventually } from '../../helpers/eventually.js';
import {
  buildOciLayout,
  errorCodes,
  http,
  OCI_MANIFEST,
  ociManifestJson,
  pushBlob,
  pushImage,
  requireTool,
  sha256,
  skopeo,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';
import { startReferenceRegistry } from '../../helpers/registry-reference.js';

requireTool('skopeo', 'apt-get install skopeo');

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-proxy-it-'));
});
after(async () => rm(dir, { recursive: true, force: true }));

const hostOf = (url: string) => new URL(url).host;

describe('proxying Debian’s docker-registry', () => {
  it('skopeo pulls through the proxy; with the upstream stopped the cached image is still served; pushes are 405', async () => {
    const layout = join(dir, 'layout');
    await buildOciLayout(layout, { refName: 'v1', marker: 'proxied' });
    const refRoot = join(dir, 'ref-root');
    const ref = await startReferenceRegistry(refRoot);
    let refRunning = true;
    let proxy: TestRegistry | undefined;
    try {
      await skopeo([
        'copy',
        '--dest-tls-verify=false',
        `oci:${layout}:v1`,
        `docker://${ref.hostPort}/lib/app:v1`,
      ]);
      proxy = await startTestRegistry({ proxy: { remoteurl: ref.url } });
      const out1 = join(dir, 'out1');
      await skopeo([
        'copy',
        '--src-tls-verify=false',
        `docker://${hostOf(proxy.url)}/lib/app:v1`,
        `oci:${out1}:v1`,
      ]);
      const inspected = JSON.parse(
        await skopeo(['inspect', '--raw', '--tls-verify=false', `docker://${hostOf(proxy.url)}/lib/app:v1`]),
      ) as { layers: Array<{ digest: string }> };
      const upstreamRaw = await skopeo([
        'inspect',
        '--raw',
        '--tls-verify=false',
        `docker://${ref.hostPort}/lib/app:v1`,
      ]);
      assert.deepEqual(inspected, JSON.parse(upstreamRaw));

      // Read-only to clients.
      const push = await http('POST', `${proxy.url}/v2/lib/app/blobs/uploads/`);
      assert.equal(push.status, 405);
      assert.deepEqual(errorCodes(push), ['UNSUPPORTED']);
      const put = await http('PUT', `${proxy.url}/v2/lib/app/manifests/v2`, {
        body: upstreamRaw,
        headers: { 'Content-Type': OCI_MANIFEST },
      });
      assert.equal(put.status, 405);

      await ref.stop();
      refRunning = false;
      const out2 = join(dir, 'out2');
      await skopeo([
        'copy',
        '--src-tls-verify=false',
        `docker://${hostOf(proxy.url)}/lib/app:v1`,
        `oci:${out2}:v1`,
      ]);
      // Nothing that was never fetched appears.
      const missing = await http('GET', `${proxy.url}/v2/lib/other/manifests/v1`, {
        headers: { Accept: OCI_MANIFEST },
      });
      assert.equal(missing.status, 404);
      assert.equal(
        (await http('GET', `${proxy.url}/v2/lib/app/blobs/${inspected.layers[0]?.digest}`)).status,
        200,
      );
    } finally {
      if (refRunning) await ref.stop();
      await proxy?.stop();
    }
  });
});

describe('proxying Debian’s docker-registry with htpasswd (Basic) auth', () => {
  it('sends the configured credentials when the upstream challenges with Basic', async () => {
    requireTool('htpasswd', 'apt-get install apache2-utils');
    const users = join(dir, 'basic-htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'puller', 'puller-pw'], { stdio: 'ignore' });
    const ref = await startReferenceRegistry(join(dir, 'basic-root'), { htpasswd: users });
    let proxy: TestRegistry | undefined;
    let wrong: TestRegistry | undefined;
    try {
      const creds = { Authorization: `Basic ${Buffer.from('puller:puller-pw').toString('base64')}` };
      const data = 'behind basic auth';
      const start = await http('POST', `${ref.url}/v2/basic/app/blobs/uploads/`, { headers: creds });
      assert.equal(start.status, 202);
      const location = new URL(start.headers.get('location') ?? '', ref.url);
      location.searchParams.set('digest', sha256(data));
      const put = await http('PUT', location.toString(), {
        headers: { ...creds, 'Content-Type': 'application/octet-stream' },
        body: data,
      });
      assert.equal(put.status, 201, put.text());
      proxy = await startTestRegistry({
        proxy: { remoteurl: ref.url, username: 'puller', password: 'puller-pw' },
      });
      const blob = await http('GET', `${proxy.url}/v2/basic/app/blobs/${sha256(data)}`);
      assert.equal(blob.status, 200);
      assert.equal(blob.text(), data);
      // Wrong credentials: the upstream refuses, the proxy knows no such blob.
      wrong = await startTestRegistry({
        proxy: { remoteurl: ref.url, username: 'puller', password: 'nope' },
      });
      assert.equal((await http('GET', `${wrong.url}/v2/basic/app/blobs/${sha256(data)}`)).status, 404);
    } finally {
      await ref.stop();
      await proxy?.stop();
      await wrong?.stop();
    }
  });
});

describe('proxying a berth registry with token auth', () => {
  let upstream: TestRegistry;
  let proxy: TestRegistry;
  const basic = { Authorization: `Basic ${Buffer.from('mirror:mirror-pw').toString('base64')}` };
  async function tokenFor(scope: string): Promise<Record<string, string>> {
    const res = await http('GET', `${upstream.url}/auth/token?service=up&scope=${scope}`, { headers: basic });
    assert.equal(res.status, 200, res.text());
    return { Authorization: `Bearer ${(res.json() as { token: string }).token}` };
  }

  before(async () => {
    requireTool('htpasswd', 'apt-get install apache2-utils');
    const users = join(dir, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'mirror', 'mirror-pw'], { stdio: 'ignore' });
    const keys = await ensureSigningKeyPair(join(dir, 'keys'));
    upstream = await startTestRegistry({
      auth: { htpasswd: { realm: 'up', path: users } },
      berth: {
        tokenserver: {
          path: '/auth/token',
          key: keys.keyPath,
          certificate: keys.certPath,
          service: 'up',
          issuer: 'up-issuer',
          acl: [{ account: 'mirror', name: '*', actions: ['pull', 'push'] }],
        },
      },
    });
    proxy = await startTestRegistry({
      proxy: { remoteurl: upstream.url, username: 'mirror', password: 'mirror-pw' },
    });
  });
  after(async () => {
    await proxy.stop();
    await upstream.stop();
  });

  it('fetches manifests and blobs with a token from the upstream’s token server', async () => {
    const auth = await tokenFor('repository:team/app:pull,push');
    const layer = randomBytes(300_000);
    const layerDigest = sha256(layer);
    const up = await http('POST', `${upstream.url}/v2/team/app/blobs/uploads/?digest=${layerDigest}`, {
      headers: { ...auth, 'Content-Type': 'application/octet-stream' },
      body: layer,
    });
    assert.equal(up.status, 201);
    const config = '{"architecture":"amd64","os":"linux"}';
    const configDigest = sha256(config);
    await http('POST', `${upstream.url}/v2/team/app/blobs/uploads/?digest=${configDigest}`, {
      headers: { ...auth, 'Content-Type': 'application/octet-stream' },
      body: config,
    });
    const manifest = ociManifestJson(
      { digest: configDigest, size: config.length },
      { digest: layerDigest, size: layer.length },
    );
    const put = await http('PUT', `${upstream.url}/v2/team/app/manifests/v1`, {
      headers: { ...auth, 'Content-Type': OCI_MANIFEST },
      body: manifest,
    });
    assert.equal(put.status, 201, put.text());

    // Without credentials the upstream refuses; through the proxy (no auth of its own) it is served.
    assert.equal((await http('GET', `${upstream.url}/v2/team/app/manifests/v1`)).status, 401);
    const got = await http('GET', `${proxy.url}/v2/team/app/manifests/v1`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(got.status, 200, got.text());
    assert.equal(got.text(), manifest);
    assert.equal(got.headers.get('docker-content-digest'), sha256(manifest));
    const head = await http('HEAD', `${proxy.url}/v2/team/app/blobs/${layerDigest}`);
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(layer.length));
    const blob = await http('GET', `${proxy.url}/v2/team/app/blobs/${layerDigest}`);
    assert.equal(blob.status, 200);
    assert.ok(blob.body.equals(layer));
    // Stored: served again from the cache, with ranges.
    const part = await http('GET', `${proxy.url}/v2/team/app/blobs/${layerDigest}`, {
      headers: { Range: 'bytes=10-19' },
    });
    assert.equal(part.status, 206);
    assert.ok(part.body.equals(layer.subarray(10, 20)));
    assert.equal((proxy.app.state.proxy?.blobDownloads ?? 0) >= 1, true);
    // The tag list is the upstream's (fetched with the token), as distribution's proxy lists it.
    await http('PUT', `${upstream.url}/v2/team/app/manifests/v2`, {
      headers: { ...auth, 'Content-Type': OCI_MANIFEST },
      body: manifest,
    });
    const tags = await http('GET', `${proxy.url}/v2/team/app/tags/list`);
    assert.equal(tags.status, 200);
    assert.deepEqual(tags.json(), { name: 'team/app', tags: ['v1', 'v2'] });
  });
});

describe('one upstream fetch, the ttl, an upstream that moves a tag', () => {
  let upstream: TestRegistry;
  let proxy: TestRegistry;
  /** The same upstream behind a 2 s ttl (what the proxy cached expires while a test runs). */
  let shortTtl: TestRegistry;
  const accessLines: string[] = [];
  before(async () => {
    upstream = await startTestRegistry(
      { log: { level: 'error', accesslog: { disabled: false } } },
      { accessLog: (l) => accessLines.push(l) },
    );
    proxy = await startTestRegistry({ proxy: { remoteurl: upstream.url } });
    shortTtl = await startTestRegistry({ proxy: { remoteurl: upstream.url, ttl: '2s' } });
  });
  after(async () => {
    await shortTtl.stop();
    await proxy.stop();
    await upstream.stop();
  });

  it('ten concurrent pulls of one uncached 64 MiB blob cause one upstream fetch, each client gets all of it', async () => {
    const big = randomBytes(64 * 1024 * 1024);
    const digest = await pushBlob(upstream.url, 'big/blob', big);
    const digestOf = async (): Promise<{ status: number; digest: string; length: number }> => {
      const res = await fetch(`${proxy.url}/v2/big/blob/blobs/${digest}`);
      const hash = createHash('sha256');
      let length = 0;
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        hash.update(chunk);
        length += chunk.length;
      }
      return { status: res.status, digest: `sha256:${hash.digest('hex')}`, length };
    };
    accessLines.length = 0;
    const results = await Promise.all(Array.from({ length: 10 }, digestOf));
    for (const r of results) assert.deepEqual(r, { status: 200, digest, length: big.length });
    // The upstream logs its answer when the response closes, a moment after the last byte.
    const blobGets = () => accessLines.filter((l) => l.includes(`"GET /v2/big/blob/blobs/${digest}`));
    await eventually('the upstream access line', () => blobGets().length > 0, 10_000);
    await new Promise((r) => setTimeout(r, 200));
    const upstreamGets = blobGets();
    assert.equal(upstreamGets.length, 1, accessLines.join('\n'));
    // Served from the store afterwards: no new upstream request.
    assert.deepEqual(await digestOf(), { status: 200, digest, length: big.length });
    assert.equal(
      accessLines.filter((l) => l.includes(`/v2/big/blob/blobs/${digest}`)).length,
      1,
      accessLines.join('\n'),
    );
  });

  it('a tag is served from the cache within the ttl and re-checked after it', async () => {
    const first = await pushImage(upstream.url, 'moving/tag', 'latest');
    const get = () =>
      http('GET', `${shortTtl.url}/v2/moving/tag/manifests/latest`, { headers: { Accept: OCI_MANIFEST } });
    assert.equal((await get()).headers.get('docker-content-digest'), first.digest);
    const second = await pushImage(upstream.url, 'moving/tag', 'latest');
    assert.notEqual(second.digest, first.digest);
    // Within the ttl: the cached tag.
    assert.equal((await get()).headers.get('docker-content-digest'), first.digest);
    await new Promise((r) => setTimeout(r, 2_100));
    const after = await get();
    assert.equal(after.headers.get('docker-content-digest'), second.digest);
    assert.equal(after.text(), second.body);
  });

  it('what was cached expires ttl after it was stored: the next pull asks the upstream again', async () => {
    const img = await pushImage(upstream.url, 'expiring/app', 'v1', { layer: 'expiring layer' });
    const pull = () => http('GET', `${shortTtl.url}/v2/expiring/app/blobs/${img.layer}`);
    const upstreamAsked = (method: string) =>
      accessLines.filter((l) => l.includes(`"${method} /v2/expiring/app/blobs/${img.layer}`)).length;
    accessLines.length = 0;
    const first = await pull();
    assert.equal(first.status, 200);
    assert.equal(first.text(), 'expiring layer');
    const link = join(
      shortTtl.root,
      'docker/registry/v2/repositories/expiring/app/_layers/sha256',
      img.layer.slice('sha256:'.length),
      'link',
    );
    // Linked once stored (the client may have every byte a moment before).
    await eventually('the layer link', () => existsSync(link), 5_000);
    await eventually('the expiry of the layer link', () => !existsSync(link), 10_000);
    await eventually('the upstream access line', () => upstreamAsked('GET') === 1, 5_000);
    const again = await pull();
    assert.equal(again.status, 200);
    assert.equal(again.text(), 'expiring layer');
    // The data is still stored (it goes with garbage collection): the upstream confirms the
    // repository has the blob (HEAD) and it is linked again, not downloaded again.
    await eventually('the upstream asked again', () => upstreamAsked('HEAD') === 1, 5_000);
    assert.equal(upstreamAsked('GET'), 1);
    await eventually('the layer linked again', () => existsSync(link), 5_000);
  });
});
