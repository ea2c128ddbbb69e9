import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseDigest, sha256Digest } from '../../../src/common/digest.js';
import { Logger } from '../../../src/common/log.js';
import { parseManifest } from '../../../src/registry/manifests/validate.js';
import { ProxyExpiry } from '../../../src/registry/proxy/expiry.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import { paths } from '../../../src/registry/storage/paths.js';
import { RegistryStore } from '../../../src/registry/storage/store.js';

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const HOUR = 3_600_000;

describe('proxy cache expiry (ttl)', () => {
  let root: string;
  let driver: FilesystemDriver;
  let store: RegistryStore;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-proxy-expiry-'));
    driver = new FilesystemDriver(root);
    store = new RegistryStore(driver, { manifestCacheEntries: 0, manifestCacheBytes: 0 });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  /** A cached image: config and layer linked, the manifest stored and tagged. */
  async function cached(repo: string, tag: string) {
    const blobs = [`{"config":"${repo}"}`, `layer of ${repo}`].map((content) => {
      const digest = sha256Digest(content);
      return { content, digest, size: Buffer.byteLength(content) };
    });
    for (const b of blobs) {
      await driver.putContent(paths.blobData(parseDigest(b.digest)), b.content);
      await store.linkLayer(repo, parseDigest(b.digest));
    }
    const doc = {
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: blobs[0]?.digest,
        size: blobs[0]?.size,
      },
      layers: [
        {
          mediaType: 'application/vnd.oci.image.layer.v1.tar',
          digest: blobs[1]?.digest,
          size: blobs[1]?.size,
        },
      ],
    };
    const content = Buffer.from(JSON.stringify(doc));
    const info = parseManifest(OCI_MANIFEST, content);
    await store.putManifest(repo, info, content);
    await store.tag(repo, tag, parseDigest(info.digest));
    return { manifest: parseDigest(info.digest), layer: parseDigest(blobs[1]?.digest ?? '') };
  }

  it('removes tags, manifests and layer links stored more than ttl ago, keeps younger ones and the data', async () => {
    const old = await cached('cache/old', 'v1');
    const young = await cached('cache/young', 'v1');
    // cache/old was stored two hours ago.
    const then = new Date(Date.now() - 2 * HOUR);
    for (const p of [
      paths.tagCurrentLink('cache/old', 'v1'),
      paths.revisionLink('cache/old', old.manifest),
      ...[old.layer].map((d) => paths.layerLink('cache/old', d)),
    ])
      await utimes(driver.fullPath(p), then, then);
    let reachable = false;
    const expiry = new ProxyExpiry(store, HOUR, async () => reachable, new Logger('error'));
    // The upstream cannot be reached: nothing expires (the mirror goes on serving).
    assert.deepEqual(await expiry.sweep(), { deferred: true, tags: 0, manifests: 0, layers: 0 });
    assert.ok(await store.tagTarget('cache/old', 'v1'));
    reachable = true;
    const report = await expiry.sweep();
    assert.equal(report.deferred, false);
    assert.equal(report.tags, 1);
    assert.equal(report.manifests, 1);
    assert.equal(report.layers, 1);
    assert.equal(await store.tagTarget('cache/old', 'v1'), undefined);
    assert.equal(await store.getManifest('cache/old', old.manifest), undefined);
    assert.equal(await store.repoHasBlob('cache/old', old.layer), false);
    // The data stays for garbage collection; the young image is whole.
    assert.ok(await store.blobStat(old.layer));
    assert.deepEqual(await store.tagTarget('cache/young', 'v1'), young.manifest);
    assert.equal(await store.repoHasBlob('cache/young', young.layer), true);
    // Everything expires once the ttl has passed for it too (cache/old's config link, written
    // with the others but not aged above, and cache/young's two links).
    const later = await expiry.sweep(Date.now() + 2 * HOUR);
    assert.deepEqual(later, { deferred: false, tags: 1, manifests: 1, layers: 3 });
  });

  it('sweeps a quarter of the ttl apart, between 1 s and 1 h', () => {
    const log = new Logger('error');
    const reach = async () => true;
    assert.equal(new ProxyExpiry(store, 168 * HOUR, reach, log).intervalMs, HOUR);
    assert.equal(new ProxyExpiry(store, HOUR, reach, log).intervalMs, HOUR / 4);
    assert.equal(new ProxyExpiry(store, 2_000, reach, log).intervalMs, 1_000);
  });
});
