import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import {
  link,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import tarStream from 'tar-stream';
import { Logger } from '../../../../src/common/log.js';
import { HostStorageOps } from '../../../../src/engine/storage/adapters/host.ops.js';
import { ContentStore } from '../../../../src/engine/storage/content.store.js';
import { chainIdOf, OverlaySnapshotter } from '../../../../src/engine/storage/overlay.snapshotter.js';
import { makeTar } from './tar.helper.js';

const log = new Logger('error');

function getfattr(path: string, name: string): string | undefined {
  try {
    return execFileSync('getfattr', ['--only-values', '-n', name, path], {
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .trim();
  } catch {
    return undefined;
  }
}

async function* chunks(buf: Buffer, size = 1000): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

describe('overlay snapshotter (as root, real tar/mount)', () => {
  let dir: string;
  let snap: OverlaySnapshotter;
  let content: ContentStore;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-snap-'));
    content = new ContentStore(join(dir, 'content'));
    await content.init();
    snap = new OverlaySnapshotter({
      root: join(dir, 'overlay'),
      metaRoot: join(dir, 'snapshots'),
      ops: new HostStorageOps(),
      log,
    });
    await snap.init();
  });

  after(async () => {
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((t) => t.startsWith(dir));
    for (const t of mounts) execFileSync('umount', ['-l', t]);
    await rm(dir, { recursive: true, force: true });
  });

  const mtime = new Date(1_500_000_000_000);
  /**
   * The two layers most tests stand on, applied once by whichever test asks first (so that no
   * test depends on another having run): a base with every kind of member, and a layer of
   * whiteouts on top of it.
   */
  let baseApplied: ReturnType<OverlaySnapshotter['applyLayer']> | undefined;
  let topApplied: ReturnType<OverlaySnapshotter['applyLayer']> | undefined;
  const applyBase = () =>
    (baseApplied ??= (async () => {
      const tar = await makeTar([
        { name: './', type: 'directory', mode: 0o755 },
        { name: 'bin/', type: 'directory' },
        { name: 'bin/tool', content: 'binary!', mode: 0o4755, uid: 0, gid: 0, mtime },
        { name: 'bin/alias', type: 'symlink', linkname: 'tool' },
        { name: 'bin/hard', type: 'link', linkname: 'bin/tool' },
        { name: 'dev/', type: 'directory' },
        { name: 'dev/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 },
        { name: 'dev/loop9', type: 'block-device', devmajor: 7, devminor: 9, mode: 0o660 },
        { name: 'dev/pipe', type: 'fifo' },
        { name: 'home/', type: 'directory' },
        { name: 'home/user/', type: 'directory', uid: 1000, gid: 1000, mode: 0o700 },
        { name: 'home/user/notes', content: 'x'.repeat(100), uid: 1000, gid: 1001, mode: 0o600 },
        { name: 'tmp/', type: 'directory', mode: 0o1777 },
        { name: 'etc/', type: 'directory' },
        { name: 'etc/a', content: 'a' },
        { name: 'etc/b', content: 'bb' },
        { name: 'etc/sub/', type: 'directory' },
        { name: 'etc/sub/c', content: 'c' },
        { name: 'etc/cap', content: 'cap', pax: { 'SCHILY.xattr.user.berth': 'hello' } },
      ]);
      return snap.applyLayer(null, chunks(tar), { blob: content.writer() });
    })());
  const applyTop = () =>
    (topApplied ??= (async () => {
      const tar = await makeTar([
        { name: 'etc/', type: 'directory' },
        { name: 'etc/.wh.a', content: '' },
        { name: 'etc/sub/', type: 'directory' },
        { name: 'etc/sub/.wh..wh..opq', content: '' },
        { name: 'etc/sub/new', content: 'new' },
        { name: 'gone/.wh.x', content: '' },
        { name: 'etc/.wh..wh.plnk', type: 'directory' },
      ]);
      return snap.applyLayer((await applyBase()).layer.chainId, chunks(gzipSync(tar)));
    })());
  const baseLayer = async () => (await applyBase()).layer.chainId;
  const topLayer = async () => (await applyTop()).layer.chainId;

  it('applies a base layer with every kind of member', async () => {
    const { layer, created } = await applyBase();
    assert.ok(created);
    assert.equal(layer.parent, null);
    assert.equal(layer.chainId, layer.diffId);
    assert.equal(
      layer.size,
      7 + 100 + 1 + 2 + 1 + 3 + 'tool'.length,
      'files and symlink targets, as dockerd counts',
    );
    assert.equal(layer.blob?.compression, 'none');
    assert.ok(await content.verify(layer.blob?.digest ?? ''));
    const diff = join(snap.root, layer.chainId.slice(7), 'diff');
    const tool = await stat(join(diff, 'bin/tool'));
    assert.equal(tool.mode & 0o7777, 0o4755);
    assert.equal(tool.mtimeMs, mtime.getTime());
    assert.equal(tool.nlink, 2);
    assert.equal(await readlink(join(diff, 'bin/alias')), 'tool');
    const nul = await lstat(join(diff, 'dev/null'));
    assert.ok(nul.isCharacterDevice());
    assert.equal(nul.rdev, (1 << 8) | 3);
    assert.ok((await lstat(join(diff, 'dev/loop9'))).isBlockDevice());
    assert.ok((await lstat(join(diff, 'dev/pipe'))).isFIFO());
    const notes = await stat(join(diff, 'home/user/notes'));
    assert.equal(notes.uid, 1000);
    assert.equal(notes.gid, 1001);
    assert.equal(notes.mode & 0o777, 0o600);
    assert.equal((await stat(join(diff, 'tmp'))).mode & 0o7777, 0o1777);
    assert.equal(getfattr(join(diff, 'etc/cap'), 'user.berth'), 'hello');
    // link file and l/ symlink as overlay2 lays them out
    const link = (await readFile(join(snap.root, layer.chainId.slice(7), 'link'), 'utf8')).trim();
    assert.match(link, /^[A-Z2-7]{26}$/);
    assert.equal(await readlink(join(snap.root, 'l', link)), `../${layer.chainId.slice(7)}/diff`);
  });

  it('turns AUFS whiteouts into overlay whiteouts (gzip input)', async () => {
    const { layer } = await applyTop();
    assert.equal(layer.chainId, chainIdOf(await baseLayer(), layer.diffId));
    const diff = join(snap.root, layer.chainId.slice(7), 'diff');
    const wh = await lstat(join(diff, 'etc/a'));
    assert.ok(wh.isCharacterDevice());
    assert.equal(wh.rdev, 0);
    assert.ok(!existsSync(join(diff, 'etc/.wh.a')));
    assert.ok(!existsSync(join(diff, 'etc/.wh..wh.plnk')));
    assert.equal(getfattr(join(diff, 'etc/sub'), 'trusted.overlay.opaque'), 'y');
    assert.ok(!existsSync(join(diff, 'etc/sub/.wh..wh..opq')));
    assert.ok((await lstat(join(diff, 'gone/x'))).isCharacterDevice());
    assert.equal(
      (await readFile(join(snap.root, layer.chainId.slice(7), 'lower'), 'utf8')).split(':').length,
      1,
    );
  });

  it('answers the existing layer when the same content comes again', async () => {
    const tar = await makeTar([{ name: 'only', content: 'same' }]);
    const a = await snap.applyLayer(null, chunks(tar));
    const b = await snap.applyLayer(null, chunks(gzipSync(tar)));
    assert.ok(a.created);
    assert.ok(!b.created);
    assert.equal(a.layer.chainId, b.layer.chainId);
    await snap.removeLayer(a.layer.chainId);
    assert.equal(await snap.getLayer(a.layer.chainId), undefined);
  });

  it('decompresses bzip2, xz and zstd layers to the same diff ID', async () => {
    const tar = await makeTar([{ name: 'z/file', content: 'compressed '.repeat(1000) }]);
    const plain = await snap.applyLayer(null, chunks(tar));
    for (const tool of ['bzip2', 'xz', 'zstd']) {
      const packed = execFileSync(tool, ['-c'], { input: tar });
      const r = await snap.applyLayer(null, chunks(packed, 100));
      assert.equal(r.layer.chainId, plain.layer.chainId, tool);
    }
    const bad = Buffer.concat([
      execFileSync('xz', ['-c'], { input: tar }).subarray(0, 40),
      Buffer.alloc(100),
    ]);
    await assert.rejects(snap.applyLayer(null, chunks(bad)), { kind: 'InvalidParameter' });
    await snap.removeLayer(plain.layer.chainId);
  });

  it('refuses garbage and path escapes with a 4xx kind', async () => {
    await assert.rejects(snap.applyLayer(null, chunks(Buffer.alloc(2048, 7))), { kind: 'InvalidParameter' });
    const evil = await makeTar([{ name: '../../escape', content: 'x' }]);
    await assert.rejects(snap.applyLayer(null, chunks(evil)), { kind: 'InvalidParameter' });
    const names = await readdir(snap.root);
    assert.ok(!names.some((n) => n.startsWith('tmp-')));
  });

  it('keeps the lowerdirs of a writable layer in its record; one of the older layout (link, lower file) still works', async () => {
    const top = await topLayer();
    const linksBefore = (await readdir(join(snap.root, 'l'))).length;
    await snap.prepare('w1', top);
    assert.deepEqual((await readdir(join(snap.root, 'w1'))).sort(), ['diff', 'work']);
    assert.equal(
      (await readdir(join(snap.root, 'l'))).length,
      linksBefore,
      'no l/ entry for a writable layer',
    );
    const target = join(dir, 'mnt-w1');
    await snap.mount('w1', target);
    try {
      assert.equal(await readFile(join(target, 'etc/b'), 'utf8'), 'bb');
    } finally {
      await snap.unmount(target);
    }
    // the layout snapshots had before: `link` and `lower` files, an l/ entry, no lower in the record
    const recPath = join(dir, 'snapshots', 'active', 'w1.json');
    const rec = JSON.parse(await readFile(recPath, 'utf8')) as { lower?: string; link?: string };
    const lower = rec.lower ?? '';
    assert.match(lower, /^l\/[A-Z2-7]{26}/);
    delete rec.lower;
    rec.link = 'OLDLAYOUTLINKAAAAAAAAAAAAA';
    await writeFile(recPath, JSON.stringify(rec));
    await writeFile(join(snap.root, 'w1', 'link'), rec.link);
    await writeFile(join(snap.root, 'w1', 'lower'), lower);
    const again = new OverlaySnapshotter({
      root: join(dir, 'overlay'),
      metaRoot: join(dir, 'snapshots'),
      ops: new HostStorageOps(),
      log,
    });
    await again.init();
    assert.equal(
      await readlink(join(snap.root, 'l', rec.link)),
      '../w1/diff',
      'init made its l/ entry again',
    );
    await again.mount('w1', target);
    try {
      assert.equal(await readFile(join(target, 'etc/b'), 'utf8'), 'bb', 'mounted from its lower file');
    } finally {
      await again.unmount(target);
    }
    await again.remove('w1');
    assert.ok(!existsSync(join(snap.root, 'w1')));
    assert.ok(!existsSync(join(snap.root, 'l', rec.link)), 'its l/ entry went with it');
  });

  it('puts an init layer between the writable layer and the chain: there, but never a change', async () => {
    const top = await topLayer();
    await snap.prepare('i1', top, {
      init: [
        { path: '/etc/hosts', type: 'file', mode: 0o755 },
        { path: '/dev/pts', type: 'dir', mode: 0o755 },
        { path: '/etc/mtab', type: 'symlink', target: '/proc/mounts' },
      ],
    });
    const lowers = (await snap.paths('i1')).LowerDir?.split(':') ?? [];
    assert.equal(lowers.length, 3);
    assert.match(lowers[0] ?? '', /\/init\/[0-9a-f]{32}$/);
    const target = join(dir, 'mnt-init');
    await snap.mount('i1', target);
    try {
      assert.equal((await stat(join(target, 'etc/hosts'))).mode & 0o777, 0o755);
      assert.equal(await readFile(join(target, 'etc/b'), 'utf8'), 'bb', 'the chain is still below');
      assert.ok((await stat(join(target, 'dev/pts'))).isDirectory());
      assert.equal(await readlink(join(target, 'etc/mtab')), '/proc/mounts');
      assert.equal(await snap.usage('i1'), 0);
      assert.deepEqual(await readdir(snap.upperDir('i1')), []);
    } finally {
      await snap.unmount(target);
    }
    await snap.prepare('i3', top, { init: [{ path: '/etc/hosts', type: 'file', mode: 0o755 }] });
    await snap.prepare('i4', top, { init: [{ path: '/etc/hosts', type: 'file', mode: 0o755 }] });
    const [l3, l4] = [(await snap.paths('i3')).LowerDir, (await snap.paths('i4')).LowerDir];
    assert.equal(l3, l4, 'the same entries, the same (shared, read-only) init layer');
    assert.notEqual(l3?.split(':')[0], lowers[0]);
    await snap.remove('i3');
    assert.ok(existsSync(l4?.split(':')[0] ?? ''), 'a removal leaves the shared init layer');
    await snap.remove('i4');
    await assert.rejects(snap.prepare('i2', top, { init: [{ path: '/../../x', type: 'file' }] }), {
      kind: 'InvalidParameter',
    });
    assert.ok(!existsSync(join(snap.root, 'i2')), 'a refused init layer makes nothing');
    await snap.remove('i1');
    assert.ok(!existsSync(join(snap.root, 'i1')));
  });

  it('prepares, mounts, measures, unmounts and removes a writable snapshot', async () => {
    const top = await topLayer();
    await snap.prepare('c1', top);
    const target = join(dir, 'mnt');
    assert.equal(await snap.diffIsEmpty('c1'), true, 'a snapshot that changed nothing');
    await snap.mount('c1', target);
    try {
      assert.equal(await snap.diffIsEmpty('c1'), true, 'mounted, still unchanged');
      assert.equal(await readFile(join(target, 'etc/b'), 'utf8'), 'bb');
      assert.ok(!existsSync(join(target, 'etc/a')), 'whiteout hides etc/a');
      assert.deepEqual(await readdir(join(target, 'etc/sub')), ['new'], 'opaque dir hides etc/sub/c');
      await writeFile(join(target, 'written'), '12345');
      assert.equal(await readFile(join(snap.upperDir('c1'), 'written'), 'utf8'), '12345');
      assert.equal(await snap.usage('c1'), 5);
      assert.equal(await snap.diffIsEmpty('c1'), false);
      const paths = await snap.paths('c1');
      assert.equal(paths.LowerDir?.split(':').length, 2);
    } finally {
      await snap.unmount(target);
    }
    await snap.unmount(target); // idempotent
    const ro = join(dir, 'ro');
    await snap.mount('c1', ro, { readonly: true });
    try {
      assert.equal(await readFile(join(ro, 'written'), 'utf8'), '12345');
      await assert.rejects(writeFile(join(ro, 'nope'), 'x'));
    } finally {
      await snap.unmount(ro);
    }
    await assert.rejects(snap.removeLayer(top), { kind: 'Conflict' });
    await snap.remove('c1');
    assert.ok(!existsSync(join(snap.root, 'c1')));
    // a snapshot on nothing still mounts
    await snap.prepare('c2', null);
    await snap.mount('c2', target);
    await writeFile(join(target, 'f'), 'x');
    await snap.unmount(target);
    await snap.remove('c2');
    // a removal that lost the record but not the directory (its rm failed) is finished by the next
    await snap.prepare('c5', null);
    await (snap as unknown as { active: { delete(k: string): Promise<void> } }).active.delete('c5');
    assert.ok(existsSync(join(snap.root, 'c5')));
    await snap.remove('c5');
    assert.ok(!existsSync(join(snap.root, 'c5')));
    await snap.remove('c5'); // nothing left: nothing to do
    // a container's snapshot: prepared, mounted at its own merged directory, the image seen there
    const mountedAtMerged = async (key: string) => {
      await snap.prepare(key, top);
      const merged = (await snap.paths(key)).MergedDir;
      await snap.mount(key, merged);
      assert.equal(await readFile(join(merged, 'etc/b'), 'utf8'), 'bb');
      return merged;
    };
    // removed after its unmount, having written nothing
    await snap.unmount(await mountedAtMerged('c6'));
    await snap.remove('c6');
    assert.ok(!existsSync(join(snap.root, 'c6')));
    // removed while still mounted there: unmounted first, nothing deleted through the mount
    const merged7 = await mountedAtMerged('c7');
    await snap.remove('c7');
    assert.ok(!existsSync(join(snap.root, 'c7')));
    assert.ok(!(await readFile('/proc/self/mountinfo', 'utf8')).includes(merged7));
    // the layer below is whole
    await snap.unmount(await mountedAtMerged('c9'));
    await snap.remove('c9');
  });

  it('exports a writable layer in AUFS form and commits it back as a layer', async () => {
    const top = await topLayer();
    await snap.prepare('c3', top);
    const target = join(dir, 'mnt3');
    await snap.mount('c3', target);
    try {
      await writeFile(join(target, 'etc/new'), 'n');
      await link(join(target, 'etc/new'), join(target, 'etc/new2'));
      execFileSync('setfattr', ['-n', 'user.k', '-v', 'v', join(target, 'etc/new')]);
      await rm(join(target, 'etc/b'));
      await rm(join(target, 'home'), { recursive: true });
      await mkdir(join(target, 'home'));
      await writeFile(join(target, 'home/x'), 'x');
    } finally {
      await snap.unmount(target);
    }
    const members: Array<{ name: string; type: string; pax?: Record<string, string> }> = [];
    const extract = tarStream.extract();
    extract.on('entry', (h, stream, next) => {
      members.push({ name: h.name, type: h.type ?? '', pax: h.pax as Record<string, string> | undefined });
      stream.on('end', next);
      stream.resume();
    });
    const parsed = new Promise<void>((r) => extract.on('finish', () => r()));
    snap.diff('c3').pipe(extract as unknown as NodeJS.WritableStream);
    await parsed;
    const names = members.map((m) => m.name);
    for (const n of ['etc/', 'etc/.wh.b', 'etc/new', 'home/', 'home/.wh..wh..opq', 'home/x']) {
      assert.ok(names.includes(n), `${n} in ${names.join(' ')}`);
    }
    assert.ok(
      members.some((m) => m.type === 'link'),
      'hard link kept',
    );
    assert.ok(!members.some((m) => Object.keys(m.pax ?? {}).some((k) => k.includes('trusted.overlay'))));
    assert.ok(members.some((m) => m.pax?.['SCHILY.xattr.user.k'] === 'v'));

    const { layer } = await snap.applyLayer(top, snap.diff('c3'));
    const diff = join(snap.root, layer.chainId.slice(7), 'diff');
    assert.ok((await lstat(join(diff, 'etc/b'))).isCharacterDevice());
    assert.equal(getfattr(join(diff, 'home'), 'trusted.overlay.opaque'), 'y');
    assert.equal(getfattr(join(diff, 'etc/new'), 'user.k'), 'v');
    await snap.prepare('c4', layer.chainId);
    await snap.mount('c4', target, { readonly: true });
    try {
      assert.ok(!existsSync(join(target, 'etc/b')));
      assert.deepEqual(await readdir(join(target, 'home')), ['x']);
      assert.equal(await readFile(join(target, 'etc/new2'), 'utf8'), 'n');
      assert.equal((await stat(join(target, 'etc/new'))).nlink, 2);
    } finally {
      await snap.unmount(target);
    }
    await snap.remove('c4');
    await snap.remove('c3');
    await snap.removeLayer(layer.chainId);
  });

  it('reconciles after a crash: half-written layers, orphans and stale links go', async () => {
    const top = await topLayer();
    await mkdir(join(snap.root, 'tmp-deadbeef', 'diff'), { recursive: true });
    await mkdir(join(snap.root, 'orphan', 'diff'), { recursive: true });
    await writeFile(join(snap.root, 'l', 'STALELINK'), '');
    const again = new OverlaySnapshotter({
      root: join(dir, 'overlay'),
      metaRoot: join(dir, 'snapshots'),
      ops: new HostStorageOps(),
      log,
    });
    await again.init();
    const names = await readdir(snap.root);
    assert.ok(!names.includes('tmp-deadbeef'));
    assert.ok(!names.includes('orphan'));
    assert.ok(!(await readdir(join(snap.root, 'l'))).includes('STALELINK'));
    assert.ok(await again.hasLayer(top));
    assert.equal((await again.chain(top)).length, 2);
  });
});
