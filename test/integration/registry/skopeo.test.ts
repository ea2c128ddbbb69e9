import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  buildOciLayout,
  http,
  OCI_INDEX,
  OCI_MANIFEST,
  requireTool,
  skopeo,
  startTestRegistry,
  type TestRegistry,
  tempDir,
} from '../../helpers/registry.js';
import { startReferenceRegistry } from '../../helpers/registry-reference.js';

let reg: TestRegistry;
let host: string;
let work: string;

before(async () => {
  requireTool('skopeo', 'skopeo is needed for the registry client tests (scripts/install-deps.sh)');
  reg = await startTestRegistry();
  host = new URL(reg.url).host;
  work = await tempDir('berth-skopeo-');
});
after(async () => {
  await reg.stop();
  await rm(work, { recursive: true, force: true });
});

async function indexOf(layout: string): Promise<{ manifests: Array<{ digest: string }> }> {
  return JSON.parse(await readFile(join(layout, 'index.json'), 'utf8'));
}

describe('skopeo against berth', () => {
  it('copy an OCI image in, inspect, list-tags, copy it back out unchanged', async () => {
    const src = join(work, 'src');
    const built = await buildOciLayout(src, { refName: 'v1' });
    await skopeo(['copy', '--dest-tls-verify=false', `oci:${src}:v1`, `docker://${host}/skopeo/busybox:v1`]);
    await skopeo([
      'copy',
      '--dest-tls-verify=false',
      `oci:${src}:v1`,
      `docker://${host}/skopeo/busybox:latest`,
    ]);
    const inspect = JSON.parse(
      await skopeo(['inspect', '--tls-verify=false', `docker://${host}/skopeo/busybox:v1`]),
    );
    assert.equal(inspect.Digest, built.top);
    assert.equal(inspect.Architecture, 'amd64');
    assert.equal(inspect.Layers.length, 2);
    const tags = JSON.parse(
      await skopeo(['list-tags', '--tls-verify=false', `docker://${host}/skopeo/busybox`]),
    );
    assert.deepEqual(tags.Tags, ['latest', 'v1']);
    const out = join(work, 'out');
    await skopeo(['copy', '--src-tls-verify=false', `docker://${host}/skopeo/busybox:v1`, `oci:${out}:v1`]);
    assert.equal((await indexOf(out)).manifests[0]?.digest, built.top);
  });

  it('copy converting to Docker schema 2 (v2s2) and pulling it back', async () => {
    const src = join(work, 'src-s2');
    await buildOciLayout(src, { refName: 'v1', marker: 's2' });
    await skopeo([
      'copy',
      '--dest-tls-verify=false',
      '--format',
      'v2s2',
      `oci:${src}:v1`,
      `docker://${host}/skopeo/s2:v1`,
    ]);
    const raw = JSON.parse(
      await skopeo(['inspect', '--raw', '--tls-verify=false', `docker://${host}/skopeo/s2:v1`]),
    );
    assert.equal(raw.mediaType, 'application/vnd.docker.distribution.manifest.v2+json');
    const out = join(work, 'out-s2');
    await skopeo(['copy', '--src-tls-verify=false', `docker://${host}/skopeo/s2:v1`, `oci:${out}:x`]);
  });

  it('copy as signed schema 1 (v2s1): skopeo signs with libtrust, berth verifies and serves it', async () => {
    const src = join(work, 'src-s1');
    await buildOciLayout(src, { refName: 'v1', marker: 's1' });
    await skopeo([
      'copy',
      '--dest-tls-verify=false',
      '--format',
      'v2s1',
      `oci:${src}:v1`,
      `docker://${host}/skopeo/s1:v1`,
    ]);
    const raw = JSON.parse(
      await skopeo(['inspect', '--raw', '--tls-verify=false', `docker://${host}/skopeo/s1:v1`]),
    );
    assert.equal(raw.schemaVersion, 1);
    assert.equal(raw.name, 'skopeo/s1');
    assert.equal(raw.signatures.length, 1);
    const out = join(work, 'out-s1');
    await skopeo(['copy', '--src-tls-verify=false', `docker://${host}/skopeo/s1:v1`, `dir:${out}`]);
  });

  it('copy --all of a multi-platform index, and back', async () => {
    const src = join(work, 'src-multi');
    const built = await buildOciLayout(src, {
      refName: 'multi',
      platforms: [
        { os: 'linux', architecture: 'amd64' },
        { os: 'linux', architecture: 'arm64' },
      ],
    });
    await skopeo([
      'copy',
      '--all',
      '--dest-tls-verify=false',
      `oci:${src}:multi`,
      `docker://${host}/skopeo/multi:v1`,
    ]);
    const raw = JSON.parse(
      await skopeo(['inspect', '--raw', '--tls-verify=false', `docker://${host}/skopeo/multi:v1`]),
    );
    assert.equal(raw.mediaType, OCI_INDEX);
    assert.equal(raw.manifests.length, 2);
    const head = await http('HEAD', `${reg.url}/v2/skopeo/multi/manifests/v1`, {
      headers: { Accept: OCI_INDEX },
    });
    assert.equal(head.headers.get('docker-content-digest'), built.top);
    for (const image of built.images) {
      const child = await http('GET', `${reg.url}/v2/skopeo/multi/manifests/${image.manifestDigest}`, {
        headers: { Accept: OCI_MANIFEST },
      });
      assert.equal(child.status, 200);
    }
    const out = join(work, 'out-multi');
    await skopeo([
      'copy',
      '--all',
      '--src-tls-verify=false',
      `docker://${host}/skopeo/multi:v1`,
      `oci:${out}:multi`,
    ]);
    assert.equal((await indexOf(out)).manifests[0]?.digest, built.top);
  });

  it('copy between two repositories of berth mounts the blobs', async () => {
    await skopeo([
      'copy',
      '--src-tls-verify=false',
      '--dest-tls-verify=false',
      `docker://${host}/skopeo/busybox:v1`,
      `docker://${host}/skopeo/copied:v1`,
    ]);
    const inspect = JSON.parse(
      await skopeo(['inspect', '--tls-verify=false', `docker://${host}/skopeo/copied:v1`]),
    );
    assert.equal(inspect.Layers.length, 2);
  });

  it('delete by tag resolves the digest and deletes the manifest', async () => {
    const src = join(work, 'src-del');
    await buildOciLayout(src, { refName: 'v1', marker: 'delete me' });
    await skopeo(['copy', '--dest-tls-verify=false', `oci:${src}:v1`, `docker://${host}/skopeo/del:v1`]);
    await skopeo(['delete', '--tls-verify=false', `docker://${host}/skopeo/del:v1`]);
    await assert.rejects(skopeo(['inspect', '--tls-verify=false', `docker://${host}/skopeo/del:v1`]));
  });
});

describe('the reference registry and berth share a storage directory', () => {
  it("berth serves a directory written by Debian's docker-registry", async () => {
    const root = await tempDir('berth-refroot-');
    const ref = await startReferenceRegistry(root);
    const src = join(work, 'src-ref');
    const built = await buildOciLayout(src, { refName: 'v1', marker: 'reference' });
    const multiSrc = join(work, 'src-ref-multi');
    const multi = await buildOciLayout(multiSrc, {
      refName: 'm',
      platforms: [
        { os: 'linux', architecture: 'amd64' },
        { os: 'linux', architecture: 's390x' },
      ],
    });
    try {
      await skopeo([
        'copy',
        '--dest-tls-verify=false',
        `oci:${src}:v1`,
        `docker://${ref.hostPort}/from/ref:v1`,
      ]);
      await skopeo([
        'copy',
        '--dest-tls-verify=false',
        '--format',
        'v2s2',
        `oci:${src}:v1`,
        `docker://${ref.hostPort}/from/ref:s2`,
      ]);
      await skopeo([
        'copy',
        '--all',
        '--dest-tls-verify=false',
        `oci:${multiSrc}:m`,
        `docker://${ref.hostPort}/from/multi:m`,
      ]);
    } finally {
      await ref.stop();
    }
    const berth = await startTestRegistry({}, {}, root);
    try {
      const bhost = new URL(berth.url).host;
      const tags = JSON.parse(
        await skopeo(['list-tags', '--tls-verify=false', `docker://${bhost}/from/ref`]),
      );
      assert.deepEqual(tags.Tags, ['s2', 'v1']);
      const inspect = JSON.parse(
        await skopeo(['inspect', '--tls-verify=false', `docker://${bhost}/from/ref:v1`]),
      );
      assert.equal(inspect.Digest, built.top);
      const out = join(work, 'out-ref');
      await skopeo(['copy', '--src-tls-verify=false', `docker://${bhost}/from/ref:s2`, `oci:${out}:s2`]);
      const outMulti = join(work, 'out-ref-multi');
      await skopeo([
        'copy',
        '--all',
        '--src-tls-verify=false',
        `docker://${bhost}/from/multi:m`,
        `oci:${outMulti}:m`,
      ]);
      assert.equal((await indexOf(outMulti)).manifests[0]?.digest, multi.top);
      const catalog = await http('GET', `${berth.url}/v2/_catalog`);
      assert.deepEqual((catalog.json() as { repositories: string[] }).repositories, [
        'from/multi',
        'from/ref',
      ]);
    } finally {
      await berth.stop();
    }
  });

  it("Debian's docker-registry serves a directory written by berth", async () => {
    const berth = await startTestRegistry();
    const src = join(work, 'src-berth');
    const built = await buildOciLayout(src, { refName: 'v1', marker: 'berth wrote this' });
    const bhost = new URL(berth.url).host;
    await skopeo(['copy', '--dest-tls-verify=false', `oci:${src}:v1`, `docker://${bhost}/from/berth:v1`]);
    // An upload left in progress must not bother the reference registry either.
    await http('POST', `${berth.url}/v2/from/berth/blobs/uploads/`);
    await berth.stop(true);
    const ref = await startReferenceRegistry(berth.root);
    try {
      const inspect = JSON.parse(
        await skopeo(['inspect', '--tls-verify=false', `docker://${ref.hostPort}/from/berth:v1`]),
      );
      assert.equal(inspect.Digest, built.top);
      const out = join(work, 'out-berth');
      await skopeo([
        'copy',
        '--src-tls-verify=false',
        `docker://${ref.hostPort}/from/berth:v1`,
        `oci:${out}:v1`,
      ]);
      assert.equal((await indexOf(out)).manifests[0]?.digest, built.top);
    } finally {
      await ref.stop();
      await rm(berth.root, { recursive: true, force: true });
    }
  });
});
