// The pull-through cache as a registry mirror, of the berth engine and of the reference dockerd
// (`--registry-mirror`): `docker.io/library/...` names pulled by the engine come through the
// proxy from its upstream (no Docker Hub involved).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestEngine } from '../../helpers/engine.js';
import { runCommand } from '../../helpers/process.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import {
  buildOciLayout,
  DOCKER_MANIFEST,
  http,
  OCI_MANIFEST,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';

describe('the proxy as the engine’s registry mirror', () => {
  let dir: string;
  let upstream: TestRegistry;
  let proxy: TestRegistry;
  let engine: TestEngine;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-mirror-'));
    upstream = await startTestRegistry();
    proxy = await startTestRegistry({ proxy: { remoteurl: upstream.url } });
    const layout = join(dir, 'layout');
    await buildOciLayout(layout, { refName: 'v1', marker: 'mirrored' });
    const copied = await runCommand('skopeo', [
      'copy',
      '--dest-tls-verify=false',
      `oci:${layout}:v1`,
      `docker://${new URL(upstream.url).host}/library/mirrored:v1`,
    ]);
    assert.equal(copied.code, 0, copied.stderr);
    const config = join(dir, 'daemon.json');
    await writeFile(config, JSON.stringify({ 'registry-mirrors': [proxy.url] }));
    engine = await TestEngine.start({ args: ['--config-file', config], bridge: 'none' });
  });
  after(async () => {
    await engine?.stop();
    await proxy?.stop();
    await upstream?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('pulls docker.io/library/mirrored:v1 through the proxy, which fetched it from its upstream', async () => {
    assert.equal(proxy.app.state.proxy?.blobDownloads, 0, 'nothing fetched before the pull');
    const r = await engine.request(
      'POST',
      '/v1.41/images/create?fromImage=docker.io/library/mirrored&tag=v1',
    );
    assert.equal(r.status, 200, r.text());
    assert.match(r.text(), /Downloaded newer image for mirrored:v1/);
    assert.ok((proxy.app.state.proxy?.blobDownloads ?? 0) >= 2, 'the layers came from the upstream');
    const inspect = await engine.request('GET', '/v1.41/images/mirrored:v1/json');
    assert.equal(inspect.status, 200);
    // Cached in the proxy: served with the upstream gone.
    await upstream.stop(true);
    const cached = await http('GET', `${proxy.url}/v2/library/mirrored/manifests/v1`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(cached.status, 200);
  });
});

describe('the proxy as dockerd’s registry mirror (--registry-mirror)', () => {
  let dir: string;
  let upstream: TestRegistry;
  let proxy: TestRegistry;
  let dockerd: ReferenceDockerd;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-mirror-dockerd-'));
    upstream = await startTestRegistry();
    proxy = await startTestRegistry({ proxy: { remoteurl: upstream.url } });
    const layout = join(dir, 'layout');
    await buildOciLayout(layout, { refName: 'v1', marker: 'through-the-mirror' });
    const copied = await runCommand('skopeo', [
      'copy',
      '--dest-tls-verify=false',
      '--format',
      'v2s2',
      `oci:${layout}:v1`,
      `docker://${new URL(upstream.url).host}/library/dmirrored:v1`,
    ]);
    assert.equal(copied.code, 0, copied.stderr);
    dockerd = await ReferenceDockerd.start({ registryMirrors: [proxy.url] });
  });
  after(async () => {
    await dockerd?.destroy();
    await proxy?.stop();
    await upstream?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('dockerd pulls docker.io/library/dmirrored:v1 through the proxy; a second pull needs no upstream', async () => {
    assert.equal(proxy.app.state.proxy?.blobDownloads, 0, 'nothing fetched before the pull');
    const pulled = await dockerd.docker(['pull', 'dmirrored:v1'], { timeoutMs: 60_000 });
    assert.equal(pulled.code, 0, `${pulled.stderr}\n${dockerd.log().slice(-3000)}`);
    assert.match(pulled.stdout, /Downloaded newer image for dmirrored:v1/);
    const upstreamManifest = await http('GET', `${upstream.url}/v2/library/dmirrored/manifests/v1`, {
      headers: { Accept: DOCKER_MANIFEST },
    });
    const blobs = 1 + (JSON.parse(upstreamManifest.text()) as { layers: unknown[] }).layers.length;
    assert.equal(
      proxy.app.state.proxy?.blobDownloads,
      blobs,
      'config and layers came from the upstream once',
    );
    const digest = await dockerd.dockerOk([
      'image',
      'inspect',
      '--format',
      '{{index .RepoDigests 0}}',
      'dmirrored:v1',
    ]);
    assert.equal(digest.trim(), `dmirrored@${upstreamManifest.headers.get('docker-content-digest')}`);
    // The upstream gone, dockerd pulls the image again (removed first) from the proxy's cache.
    await dockerd.dockerOk(['image', 'rm', 'dmirrored:v1']);
    await upstream.stop(true);
    const again = await dockerd.docker(['pull', 'dmirrored:v1'], { timeoutMs: 60_000 });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /Downloaded newer image for dmirrored:v1/);
    assert.equal(proxy.app.state.proxy?.blobDownloads, blobs, 'nothing more from the upstream');
  });
});
