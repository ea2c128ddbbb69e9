import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { link, mkdir, mkdtemp, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { Logger } from '../../../../src/common/log.js';
import { HostStorageOps } from '../../../../src/engine/storage/adapters/host.ops.js';
import { OverlaySnapshotter } from '../../../../src/engine/storage/overlay.snapshotter.js';
import { TarSplitRecorder } from '../../../../src/engine/storage/tar-split.js';
import { makeTar } from './tar.helper.js';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

async function* chunks(buf: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of source) out.push(c);
  return Buffer.concat(out);
}

describe('tar-split: a layer tarball rebuilt exactly from its record and files (as root, real tar)', () => {
  let dir: string;
  let snap: OverlaySnapshotter;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-tarsplit-'));
    snap = new OverlaySnapshotter({
      root: join(dir, 'overlay'),
      metaRoot: join(dir, 'snapshots'),
      ops: new HostStorageOps(),
      log: new Logger('error'),
    });
    await snap.init();
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Apply `tar` (fed in `size`-byte chunks, gzip'd when asked), rebuild it, compare the bytes. */
  async function roundTrip(tar: Buffer, opts: { size?: number; gzip?: boolean } = {}): Promise<void> {
    const input = opts.gzip ? gzipSync(tar) : tar;
    const { layer } = await snap.applyLayer(null, chunks(input, opts.size ?? 7000));
    assert.equal(layer.diffId, sha(tar));
    assert.equal(layer.tarSplit, true);
    const rebuilt = snap.rebuiltTar(layer);
    assert.ok(rebuilt);
    const bytes = await collect(rebuilt);
    assert.equal(bytes.length, tar.length);
    assert.ok(bytes.equals(tar), 'the rebuilt tarball is the original, byte for byte');
    await snap.removeLayer(layer.chainId);
  }

  /** A tarball GNU tar makes of a directory built by `make` (`format`: gnu, posix, ustar). */
  async function gnuTar(
    name: string,
    format: string,
    make: (root: string) => Promise<void>,
  ): Promise<Buffer> {
    const root = join(dir, `src-${name}`);
    await mkdir(root);
    await make(root);
    return execFileSync('tar', [`--format=${format}`, '-C', root, '-cf', '-', '.'], {
      maxBuffer: 64 * 1024 * 1024,
    });
  }

  it('PAX headers (long names, xattrs, big uids), symlinks, empty files', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(150)}`;
    const tar = await makeTar([
      { name: 'etc', type: 'directory' },
      { name: 'etc/hosts', content: 'h\n' },
      { name: 'etc/empty', content: '' },
      { name: `${'d'.repeat(120)}`, type: 'directory' },
      { name: long, content: Buffer.alloc(1025, 3) },
      { name: 'etc/link', type: 'symlink', linkname: `../${'t'.repeat(140)}` },
      { name: 'withattr', content: 'x', pax: { 'SCHILY.xattr.user.k': 'v', mtime: '1600000000.5' } },
      { name: 'big-uid', content: 'u', uid: 3_000_000 },
    ]);
    await roundTrip(tar);
    await roundTrip(tar, { size: 1, gzip: false });
  });

  it('GNU long names and links, hard links, a large mostly-empty file (gzip input)', async () => {
    const tar = await gnuTar('gnu', 'gnu', async (root) => {
      const deep = join(root, 'a'.repeat(90), 'b'.repeat(90));
      await mkdir(deep, { recursive: true });
      await writeFile(join(deep, 'c'.repeat(100)), 'long\n');
      await writeFile(join(root, 'orig'), 'same inode\n');
      await link(join(root, 'orig'), join(root, 'hard'));
      await link(join(root, 'orig'), join(deep, 'hard-with-a-long-name'));
      await symlink(join('/nowhere', 'e'.repeat(120)), join(root, 'longlink'));
      await writeFile(join(root, 'sparse'), Buffer.from('start'));
      await truncate(join(root, 'sparse'), 3 * 1024 * 1024 + 17);
      await writeFile(join(root, 'empty'), '');
    });
    await roundTrip(tar, { gzip: true, size: 65536 });
  });

  it('POSIX (pax) tar of GNU tar, whiteouts and opaque directories', async () => {
    const tar = await gnuTar('posix', 'posix', async (root) => {
      await mkdir(join(root, 'var/lib'), { recursive: true });
      await writeFile(join(root, 'var/lib/.wh..wh..opq'), '');
      await writeFile(join(root, 'var/lib/new'), 'new\n');
      await mkdir(join(root, 'etc'));
      await writeFile(join(root, 'etc/.wh.gone'), '');
      await writeFile(join(root, 'etc/kept'), 'k'.repeat(513));
    });
    await roundTrip(tar);
    // the layer directory has overlay whiteouts, the rebuilt tar the original .wh. members
    const { layer } = await snap.applyLayer(null, chunks(tar, 4096));
    const rebuilt = await collect(snap.rebuiltTar(layer) as AsyncIterable<Buffer>);
    assert.ok(rebuilt.includes(Buffer.from('.wh.gone')));
    await snap.removeLayer(layer.chainId);
  });

  it('a file changed on disk makes a different tarball (the caller checks the diff ID)', async () => {
    const tar = await makeTar([{ name: 'f', content: 'abc' }]);
    const { layer } = await snap.applyLayer(null, chunks(tar, 100));
    await writeFile(join(snap.root, layer.chainId.slice(7), 'diff', 'f'), 'abd');
    const rebuilt = await collect(snap.rebuiltTar(layer) as AsyncIterable<Buffer>);
    assert.notEqual(sha(rebuilt), layer.diffId);
    await writeFile(join(snap.root, layer.chainId.slice(7), 'diff', 'f'), 'a');
    await assert.rejects(collect(snap.rebuiltTar(layer) as AsyncIterable<Buffer>), /shorter/);
    await snap.removeLayer(layer.chainId);
    // a symlink where a file's parent directory was: never read through it
    const nested = await makeTar([
      { name: 'd', type: 'directory' },
      { name: 'd/secret', content: 'layer bytes' },
    ]);
    const made = (await snap.applyLayer(null, chunks(nested, 512))).layer;
    const diff = join(snap.root, made.chainId.slice(7), 'diff');
    const outside = join(dir, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'secret'), 'host bytes!');
    await rm(join(diff, 'd'), { recursive: true });
    await symlink(outside, join(diff, 'd'));
    await assert.rejects(collect(snap.rebuiltTar(made) as AsyncIterable<Buffer>), /not below a directory/);
    await snap.removeLayer(made.chainId);
  });

  it('the recorder keeps headers only: its record is small for a large file', async () => {
    const tar = await makeTar([{ name: 'big', content: Buffer.alloc(4 * 1024 * 1024, 1) }]);
    const names: string[] = [];
    const rec = new TarSplitRecorder(
      (m) => names.push(m.name),
      (n) => n,
    );
    for await (const c of chunks(tar, 100_000)) rec.write(c);
    assert.ok(rec.complete);
    const record = await rec.finish();
    assert.deepEqual(names, ['big']);
    assert.ok(record.length < 2048, `record of ${record.length} bytes`);
  });
});
