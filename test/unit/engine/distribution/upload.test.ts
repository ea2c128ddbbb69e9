import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { RegistryClient, type RepositorySession } from '../../../../src/engine/distribution/index.js';
import {
  mountBlob,
  putBlob,
  putManifest,
  statBlob,
  uploadBlob,
} from '../../../../src/engine/distribution/upload.js';
import {
  DOCKER_MANIFEST,
  http,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../../helpers/registry.js';

let reg: TestRegistry;
let client: RegistryClient;

async function session(name: string): Promise<RepositorySession> {
  const host = new URL(reg.url).host;
  return client.open(await client.endpoints(host, host), name, {}, ['pull', 'push']);
}

async function* pieces(data: Buffer, size = 40_000): AsyncGenerator<Buffer> {
  for (let o = 0; o < data.length; o += size) yield data.subarray(o, o + size);
}

before(async () => {
  reg = await startTestRegistry();
  client = new RegistryClient({ insecureRegistries: [], mirrors: [] });
});

after(async () => {
  client.close();
  await reg.stop();
});

describe('blob upload', () => {
  it('sends a small blob in one PUT, a large one in chunks or one streamed PATCH; the registry holds the same bytes', async () => {
    const s = await session('up/a');
    for (const [data, opts] of [
      [randomBytes(1000), {}],
      [Buffer.alloc(0), {}],
      [randomBytes(300_000), { chunkSize: 64 * 1024 }],
      [randomBytes(300_000), { chunkSize: 64 * 1024, stream: true }],
      [randomBytes(64 * 1024), { chunkSize: 64 * 1024 }],
    ] as const) {
      const d = await uploadBlob(s, pieces(data), opts);
      assert.equal(d.digest, sha256(data));
      assert.equal(d.size, data.length);
      assert.equal(await statBlob(s, d.digest), data.length);
      const got = await http('GET', `${reg.url}/v2/up/a/blobs/${d.digest}`);
      assert.ok(Buffer.from(got.body).equals(data));
    }
  });

  it('refuses bytes that are not the expected digest, and cancels the upload', async () => {
    const s = await session('up/b');
    const data = randomBytes(200_000);
    await assert.rejects(
      uploadBlob(s, pieces(data), { chunkSize: 64 * 1024, expected: sha256('other') }),
      /blob upload: expected/,
    );
    assert.equal(await statBlob(s, sha256(data)), undefined);
  });

  it('mounts a blob from another repository; a config goes once; a manifest is put under its tag', async () => {
    const a = await session('up/src');
    const b = await session('up/dst');
    const layer = randomBytes(5000);
    const { digest } = await uploadBlob(a, pieces(layer));
    assert.deepEqual(await mountBlob(b, digest, 'up/src'), { mounted: true });
    assert.equal(await statBlob(b, digest), layer.length);
    const missing = await mountBlob(b, sha256('nothing'), 'up/src');
    assert.equal(missing.mounted, false);
    const config = Buffer.from(
      JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] } }),
    );
    const c = await putBlob(b, config);
    assert.deepEqual(await putBlob(b, config), c);
    const manifest = Buffer.from(
      JSON.stringify(
        {
          schemaVersion: 2,
          mediaType: DOCKER_MANIFEST,
          config: {
            mediaType: 'application/vnd.docker.container.image.v1+json',
            size: c.size,
            digest: c.digest,
          },
          layers: [
            { mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.length, digest },
          ],
        },
        null,
        3,
      ),
    );
    assert.equal(await putManifest(b, 'v1', DOCKER_MANIFEST, manifest), sha256(manifest));
    const got = await http('GET', `${reg.url}/v2/up/dst/manifests/v1`, {
      headers: { Accept: DOCKER_MANIFEST },
    });
    assert.equal(got.headers.get('docker-content-digest'), sha256(manifest));
  });
});
