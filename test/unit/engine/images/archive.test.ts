import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { ImageConfigFile } from '../../../../src/common/docker-types.js';
import { isKind } from '../../../../src/common/errors.js';
import { parseNormalizedNamed } from '../../../../src/common/reference.js';
import { ociTag } from '../../../../src/engine/images/archive/formats.js';
import { legacyLayers } from '../../../../src/engine/images/archive/legacy.js';
import { ArchiveSpool } from '../../../../src/engine/images/archive/reader.js';
import { HostStorageOps } from '../../../../src/engine/storage/adapters/host.ops.js';
import { chainIds } from '../../../../src/engine/storage/overlay.snapshotter.js';
import { type HostileCase, hostileTars } from '../../../helpers/hostile-tars.js';
import { tarOf } from '../../../helpers/tar-builder.js';

const fixtures = join(import.meta.dirname, '../../../fixtures/save-load');

async function* chunks(b: Buffer): AsyncGenerator<Buffer> {
  for (let i = 0; i < b.length; i += 7000) yield b.subarray(i, i + 7000);
}

describe('image archive reader (docker load)', () => {
  let dir: string;
  let spool: ArchiveSpool;
  const ops = new HostStorageOps();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-archive-'));
    spool = new ArchiveSpool(join(dir, 'tmp'), 1024 * 1024);
    await spool.sweep();
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('keeps files, directories and links by name, following links inside the archive only', async () => {
    const archive = await spool.receive(
      chunks(
        gzipSync(
          tarOf([
            { name: 'blobs/', type: 'directory' },
            { name: 'blobs/sha256/', type: 'directory' },
            { name: 'blobs/sha256/abc', data: 'layer bytes' },
            { name: 'v1/', type: 'directory' },
            { name: 'v1/layer.tar', type: 'symlink', linkname: '../blobs/sha256/abc' },
            { name: 'abs', type: 'symlink', linkname: '/blobs/sha256/abc' },
            { name: 'up', type: 'symlink', linkname: '/../../..' },
            { name: 'hard', type: 'link', linkname: 'blobs/sha256/abc' },
            { name: './manifest.json', data: '[1,2]' },
          ]),
        ),
      ),
      ops,
    );
    try {
      assert.deepEqual(archive.topDirs(), ['blobs', 'v1']);
      const f = archive.file('v1/layer.tar');
      assert.equal(f?.size, 11);
      assert.equal(f?.digest, `sha256:${createHash('sha256').update('layer bytes').digest('hex')}`);
      assert.equal(archive.file('abs'), f);
      assert.equal(archive.file('hard'), f);
      // `..` stops at the archive's root (FollowSymlinkInScope)
      assert.equal(archive.resolve('up/blobs/sha256/abc'), 'blobs/sha256/abc');
      assert.equal(archive.resolve('/../../manifest.json'), 'manifest.json');
      assert.deepEqual((await archive.readJson('manifest.json', 'test')).value, [1, 2]);
      assert.equal(archive.file('nothing'), undefined);
      assert.equal(archive.file('blobs'), undefined);
      assert.equal((await readFile(f?.spool ?? '')).toString(), 'layer bytes');
    } finally {
      await archive.remove();
    }
    assert.deepEqual(await readdir(join(dir, 'tmp')), []);
  });

  it('refuses hostile members with a 400 and keeps nothing', async () => {
    const tars = hostileTars('M');
    const refused: Partial<Record<HostileCase, RegExp>> = {
      dotdot: /escapes the root/,
      dotdotMid: /escapes the root/,
      absolute: /absolute name/,
      paxPath: /escapes the root/,
      paxPathAbsolute: /absolute name/,
      paxLinkpath: /escapes the root/,
      gnuLongName: /escapes the root/,
      gnuLongLink: /escapes the root|leads out/,
      symlinkRootThenWrite: /below a link/,
      symlinkUpThenWrite: /leads out of the archive/,
      symlinkThenOverwrite: /leads out of the archive/,
      symlinkThenDirectory: /leads out of the archive/,
      hardlinkAbsolute: /leads out of the archive/,
      hardlinkUp: /escapes the root/,
      hardlinkViaSymlink: /names no earlier file/,
      devices: /character-device/,
      whiteoutDevice: /character-device/,
      whiteoutBelowSymlink: /below a link/,
      hugePaxRecord: /Header exceeds max size/,
      hugeFileSize: /larger than the engine accepts|cut short/,
      truncated: /cut short/,
      badChecksum: /Invalid tar header/,
      garbage: /Invalid tar header/,
    };
    for (const [name, pattern] of Object.entries(refused)) {
      await assert.rejects(
        spool.receive(chunks(tars[name as HostileCase]), ops),
        (err: Error) =>
          (isKind(err, 'InvalidParameter') || isKind(err, 'TooLarge')) && pattern.test(err.message),
        name,
      );
    }
    // a directory over a file, a file below a file
    await assert.rejects(
      spool.receive(
        chunks(
          tarOf([
            { name: 'a', data: 'x' },
            { name: 'a/b', data: 'y' },
          ]),
        ),
        ops,
      ),
      /below a file/,
    );
    assert.deepEqual(await readdir(join(dir, 'tmp')), []);
  });

  it('answers 413 past its limit, declared or received', async () => {
    assert.throws(
      () => spool.checkDeclared(2 * 1024 * 1024),
      (err: Error) => isKind(err, 'TooLarge'),
    );
    spool.checkDeclared(1000);
    await assert.rejects(
      spool.receive(chunks(tarOf([{ name: 'big', data: Buffer.alloc(2 * 1024 * 1024) }])), ops),
      (err: Error) => isKind(err, 'TooLarge'),
    );
    assert.deepEqual(await readdir(join(dir, 'tmp')), []);
  });

  it('refuses a JSON document too large to read', async () => {
    const big = new ArchiveSpool(join(dir, 'tmp'), 64 * 1024 * 1024);
    const archive = await big.receive(
      chunks(tarOf([{ name: 'manifest.json', data: Buffer.alloc(17 * 1024 * 1024, 0x20) }])),
      ops,
    );
    try {
      await assert.rejects(archive.readJson('manifest.json', 'test'), /too large/);
    } finally {
      await archive.remove();
    }
  });
});

describe('the legacy half of docker save (v1 layer IDs and json)', () => {
  for (const [configFile, layerFiles] of [
    ['dockerd-20.10-config.json', ['dockerd-20.10-layer.json']],
    ['dockerd-20.10-two-config.json', ['dockerd-20.10-two-layer0.json', 'dockerd-20.10-two-layer1.json']],
  ] as const) {
    it(`writes what dockerd 20.10 wrote for ${configFile}`, async () => {
      const config = JSON.parse(await readFile(join(fixtures, configFile), 'utf8')) as ImageConfigFile;
      const layers = legacyLayers(config, chainIds(config.rootfs.diff_ids));
      const expected = await Promise.all(layerFiles.map((f) => readFile(join(fixtures, f), 'utf8')));
      assert.deepEqual(
        layers.map((l) => l.json),
        expected,
      );
      assert.deepEqual(
        layers.map((l) => l.id),
        expected.map((e) => (JSON.parse(e) as { id: string }).id),
      );
    });
  }
});

describe('index.json names (OCI layouts)', () => {
  it('takes containerd’s full name, or a ref.name that is a whole reference, never a bare tag', () => {
    const tag = (a: Record<string, string>) => ociTag(a);
    assert.deepEqual(
      tag({ 'io.containerd.image.name': 'docker.io/library/busybox:1' }),
      parseNormalizedNamed('busybox:1'),
    );
    assert.deepEqual(
      tag({ 'org.opencontainers.image.ref.name': 'foo/bar:2' }),
      parseNormalizedNamed('foo/bar:2'),
    );
    assert.deepEqual(
      tag({ 'org.opencontainers.image.ref.name': 'localhost:5000/a:b' }),
      parseNormalizedNamed('localhost:5000/a:b'),
    );
    assert.equal(tag({ 'org.opencontainers.image.ref.name': 'latest' }), undefined);
    assert.equal(tag({ 'org.opencontainers.image.ref.name': 'busybox' }), undefined);
    assert.equal(tag({ 'org.opencontainers.image.ref.name': 'a@sha256:' }), undefined);
    assert.equal(tag({}), undefined);
  });
});
