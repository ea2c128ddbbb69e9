import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { diskUsage } from '../../../../src/common/fs/disk-usage.js';
import { Logger } from '../../../../src/common/log.js';
import type { EngineEvent } from '../../../../src/engine/events/events.service.js';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import { createImageService, type ImageService } from '../../../../src/engine/images/images.service.js';
import { buildBusyboxRootfs, seedBusybox } from '../../../../src/engine/images/seed.js';
import { makeTar } from '../storage/tar.helper.js';

const log = new Logger('error');

async function* once(buf: Buffer): AsyncGenerator<Buffer> {
  yield buf;
}

describe('image service (real overlay in a temp dir)', () => {
  let dir: string;
  let images: ImageService;
  const events = new EventsService();
  const seen: EngineEvent[] = [];
  let users: Array<{ id: string; running: boolean; image: string }> = [];

  const open = async () => {
    images = await createImageService({ dataRoot: dir, events, log });
    images.setUsers({ containersUsing: (id) => users.filter((u) => u.image === id) });
  };
  const importTar = (tar: Buffer, repo?: string, changes: string[] = []) =>
    images.importImage({ src: '-', body: once(tar), repo, changes });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-images-'));
    events.subscribe((e) => seen.push(e));
    await open();
  });

  after(async () => {
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((t) => t.startsWith(dir));
    for (const t of mounts) execFileSync('umount', ['-l', t]);
    await rm(dir, { recursive: true, force: true });
  });

  /** busybox:latest, seeded by whichever test needs it first (no test depends on another's run). */
  let seeded: Promise<string> | undefined;
  const busybox = () => (seeded ??= seedBusybox(images));

  it('seeds busybox once and resolves it every way', async () => {
    const bb = await busybox();
    assert.equal(await seedBusybox(images), bb, 'idempotent');
    const hex = bb.slice(7);
    for (const name of [
      'busybox',
      'busybox:latest',
      'docker.io/library/busybox:latest',
      bb,
      hex,
      hex.slice(0, 12),
      `sha256:${hex.slice(0, 8)}`,
    ]) {
      assert.equal((await images.resolve(name)).id, bb, name);
    }
    await assert.rejects(images.resolve('busybox:1'), {
      kind: 'NotFound',
      message: 'No such image: busybox:1',
    });
    await assert.rejects(images.resolve('BusyBox'), { kind: 'InvalidParameter' });
    const rec = await images.resolve('busybox');
    assert.equal(rec.config.config?.Cmd?.[0], 'sh');
    assert.ok(rec.chainId);
    assert.ok(rec.size > 1_000_000);
    // What dockerd's overlay2 reports: directory.Size of the diff (files and symlink targets).
    assert.equal(rec.size, await diskUsage(join(dir, 'overlay', (rec.chainId as string).slice(7), 'diff')));
    const tar = await buildBusyboxRootfs();
    assert.ok(tar.length > rec.size);
  });

  it('lists with dangling, label, reference, before/since/until filters', async () => {
    const bb = await busybox();
    const a = await importTar(await makeTar([{ name: 'a', content: 'a' }]), 'x:1', ['LABEL kind=a']);
    await sleep(5);
    const b = await importTar(await makeTar([{ name: 'b', content: 'b' }]), 'x:1', ['LABEL kind=b']);
    const ids = (o: Parameters<ImageService['listImages']>[0]) =>
      images.listImages(o).then((l) => l.map((i) => i.record.id));
    const dangling = await images.listImages({ filters: new Map([['dangling', ['true']]]) });
    assert.deepEqual(
      dangling.map((d) => [d.record.id, d.repoTags, d.repoDigests]),
      [[a, [], []]],
    );
    assert.ok(!(await ids({ filters: new Map([['dangling', ['false']]]) })).includes(a));
    assert.deepEqual(await ids({ filters: new Map([['label', ['kind=b']]]) }), [b]);
    assert.deepEqual(await ids({ filters: new Map([['label', ['kind']]]) }), [b, a]);
    assert.deepEqual(await ids({ filters: new Map([['reference', ['x']]]) }), [b]);
    assert.deepEqual(await ids({ filters: new Map([['reference', ['busy*:latest']]]) }), [bb]);
    assert.deepEqual(await ids({ filters: new Map([['since', [a]]]) }), [b]);
    assert.ok((await ids({ filters: new Map([['before', ['x:1']]]) })).includes(bb));
    assert.deepEqual(await ids({ filters: new Map([['until', ['1']]]) }), []);
    const all = await ids({});
    assert.deepEqual(all.slice(0, 3), [b, a, bb], 'newest first');
    await assert.rejects(images.listImages({ filters: new Map([['nope', ['1']]]) }), {
      message: "invalid filter 'nope'",
    });
    await assert.rejects(images.listImages({ filters: new Map([['since', ['missing']]]) }), {
      kind: 'NotFound',
    });
    await images.remove(a);
    await images.remove('x:1');
  });

  it('inspects, shows history and deletes for a platform only when the image is for it', async () => {
    const id = await importTar(await makeTar([{ name: 'plat', content: 'p' }]), 'plat:1');
    const rec = await images.resolve(id);
    const host = { os: 'linux', architecture: rec.config.architecture };
    assert.equal((await images.inspect('plat:1', { platform: host })).record.id, id);
    assert.equal((await images.history('plat:1', { platform: host })).length, 1);
    const other = { os: 'linux', architecture: rec.config.architecture === 's390x' ? 'amd64' : 's390x' };
    const message = `image with reference plat:1 was found but its platform (linux/${rec.config.architecture}) does not match the specified platform (linux/${other.architecture})`;
    await assert.rejects(images.inspect('plat:1', { platform: other }), { kind: 'NotFound', message });
    await assert.rejects(images.history('plat:1', { platform: other }), { kind: 'NotFound', message });
    await assert.rejects(images.remove('plat:1', { platform: other }), { kind: 'NotFound', message });
    // a full reference is named familiar
    await assert.rejects(images.inspect('docker.io/library/plat:1', { platform: other }), { message });
    const removed = await images.remove('plat:1', { platform: host });
    assert.deepEqual(removed.slice(0, 2), [{ Untagged: 'plat:1' }, { Deleted: id }]);
  });

  it('deletes like dockerd: conflicts with containers, force, layers freed with the last user', async () => {
    const tar = await makeTar([{ name: 'del', content: 'x' }]);
    const id = await importTar(tar, 'del:1');
    const rec = await images.resolve(id);
    users = [{ id: 'c'.repeat(64), running: true, image: id }];
    await assert.rejects(images.remove(id, { force: true }), {
      kind: 'Conflict',
      message: `conflict: unable to delete ${id.slice(7, 19)} (cannot be forced) - image is being used by running container cccccccccccc`,
    });
    // By reference, forced: untagged only (the running container keeps the image).
    assert.deepEqual(await images.remove('del:1', { force: true }), [{ Untagged: 'del:1' }]);
    assert.equal((await images.get(id))?.repoTags.length, 0);
    // The container's snapshot keeps the layer after the image goes.
    await images.snapshotter.prepare('ctr1', rec.chainId);
    users = [{ id: 'c'.repeat(64), running: false, image: id }];
    await assert.rejects(images.remove(id), /must be forced\) - image is being used by stopped container/);
    const out = await images.remove(id, { force: true });
    assert.deepEqual(out, [{ Deleted: id }], 'layer kept for the container');
    const layerDir = join(dir, 'overlay', (rec.chainId as string).slice(7));
    assert.ok(existsSync(layerDir));
    users = [];
    await images.snapshotter.remove('ctr1');
    assert.ok(!existsSync(layerDir), 'the last user gone, the layer goes');
  });

  it('prunes dangling images, then unused ones, sparing what containers use', async () => {
    const bb = await busybox();
    const a = await importTar(await makeTar([{ name: 'p', content: 'aaaa' }]), 'prune:1');
    const b = await importTar(await makeTar([{ name: 'p', content: 'bbbbbbbb' }]), 'prune:1', ['LABEL p=1']);
    const c = await importTar(await makeTar([{ name: 'p', content: 'c' }]), 'prune-used:1', ['LABEL p=1']);
    users = [{ id: 'd'.repeat(64), running: false, image: c }];
    const first = await images.prune();
    assert.deepEqual(first.ImagesDeleted?.[0], { Deleted: a }, 'a dangles since b took its tag');
    assert.equal(first.SpaceReclaimed, 4);
    assert.deepEqual(await images.prune(), { ImagesDeleted: null, SpaceReclaimed: 0 });
    const old = await images.prune(
      new Map([
        ['dangling', ['false']],
        ['label', ['p=1']],
        ['until', ['10m']],
      ]),
    );
    assert.equal(old.ImagesDeleted, null, 'nothing older than 10 minutes');
    const now = await images.prune(
      new Map([
        ['dangling', ['false']],
        ['label', ['p=1']],
      ]),
    );
    const gone = (now.ImagesDeleted ?? []).flatMap((d) => ('Deleted' in d ? [d.Deleted] : []));
    assert.ok(gone.includes(b));
    assert.ok(!gone.includes(c), 'a container uses c');
    assert.ok(await images.get(bb), 'busybox has no p label');
    users = [];
    await images.remove(c, { force: true });
    await assert.rejects(images.prune(new Map([['bogus', ['1']]])), { message: "invalid filter 'bogus'" });
  });

  it('imports the same content concurrently into one layer while deletes run', async () => {
    const tar = await makeTar([{ name: 'same', content: 'concurrent' }]);
    const seed = await importTar(tar, 'conc:0');
    const ids = await Promise.all([
      ...[1, 2, 3, 4, 5].map((i) => importTar(tar, `conc:${i}`)),
      images.remove('conc:0').then(() => seed),
    ]);
    const chains = new Set<string>();
    for (const id of ids.slice(0, 5)) chains.add((await images.resolve(id)).chainId as string);
    assert.equal(chains.size, 1, 'one layer for one content');
    assert.ok(existsSync(join(dir, 'overlay', [...chains][0]?.slice(7) ?? '', 'diff', 'same')));
    for (const i of [1, 2, 3, 4, 5]) await images.remove(`conc:${i}`);
    assert.ok(!existsSync(join(dir, 'overlay', [...chains][0]?.slice(7) ?? '')), 'gone with the last image');
  });

  it('publishes image events with name attributes', async () => {
    seen.length = 0;
    const id = await importTar(await makeTar([{ name: 'evt', content: 'e' }]), 'evt:1', ['LABEL l=v']);
    await images.tag('evt:1', 'evt', '2');
    await images.remove(id, { force: true });
    assert.deepEqual(
      seen.map((e) => [e.Action, e.Actor.Attributes.name]),
      [
        ['tag', 'evt:1'],
        ['import', id],
        ['tag', 'evt:2'],
        ['untag', id],
        ['untag', id],
        ['delete', id],
      ],
    );
    assert.equal(seen[1]?.Actor.Attributes.l, 'v', 'labels ride along');
  });

  it('history answers <missing> below the top and layer sizes', async () => {
    const bb = await busybox();
    const h = await images.history('busybox');
    assert.equal(h.length, 1);
    assert.equal(h[0]?.id, bb);
    assert.deepEqual(h[0]?.tags, ['busybox:latest']);
    assert.equal(h[0]?.comment, 'Imported from -');
    assert.ok((h[0]?.size ?? 0) > 1_000_000);
  });

  it('survives a restart and cleans what a crash left behind', async () => {
    const bb = await busybox();
    await images.tag('busybox', 'localhost:5000/keep/me', 'v1');
    // Leftovers of a crash in the middle of an import: a half-extracted layer, an ingest, a
    // config blob without image, a committed layer no image uses.
    await mkdir(join(dir, 'overlay', 'tmp-0123456789abcdef', 'diff'), { recursive: true });
    await writeFile(join(dir, 'content', 'ingest', 'partial'), 'xx');
    const orphanLayerTar = await makeTar([{ name: 'orphan', content: 'o' }]);
    const orphanId = await importTar(orphanLayerTar, 'orphan:1');
    const orphanChain = (await images.resolve(orphanId)).chainId as string;
    await rm(join(dir, 'image', 'images', `${orphanId.slice(7)}.json`)); // as if killed before commit
    await open();
    assert.equal((await images.resolve('localhost:5000/keep/me:v1')).id, bb);
    assert.deepEqual((await images.resolve('busybox')).repoTags, [
      'busybox:latest',
      'localhost:5000/keep/me:v1',
    ]);
    await assert.rejects(images.resolve('orphan:1'), { kind: 'NotFound' });
    assert.ok(!existsSync(join(dir, 'overlay', orphanChain.slice(7))), 'unused layer collected');
    assert.ok(
      !existsSync(join(dir, 'content', 'blobs', 'sha256', orphanId.slice(7))),
      'orphan config collected',
    );
    assert.ok(!(await readdir(join(dir, 'overlay'))).some((n) => n.startsWith('tmp-')));
    assert.deepEqual(await readdir(join(dir, 'content', 'ingest')), []);
    await images.remove('localhost:5000/keep/me:v1');
  });

  it('a tag that names its image already: LastTagTime at once, its record written in order with a removal', async () => {
    const id = await importTar(await makeTar([{ name: 'retag', content: 'r' }]), 'retag:1');
    const record = join(dir, 'image', 'images', `${id.slice(7)}.json`);
    const first = (await images.inspect('retag:1')).lastTagTime;
    await sleep(2);
    await images.tag(id, 'retag', '1');
    const again = (await images.inspect('retag:1')).lastTagTime;
    assert.ok(again && first && again > first, `${again} after ${first}`);
    // the record reaches the disk with the new time (the answer did not wait for it)
    for (let i = 0; i < 100 && JSON.parse(readFileSync(record, 'utf8')).lastTagTime !== again; i++)
      await sleep(20);
    assert.equal(JSON.parse(readFileSync(record, 'utf8')).lastTagTime, again);
    // a removal right after a re-tag: the late LastTagTime write never brings the record back
    await images.tag(id, 'retag', '1');
    await images.remove('retag:1');
    await sleep(100);
    assert.ok(!existsSync(record));
    await open();
    await assert.rejects(images.resolve(id), { kind: 'NotFound' });
  });

  it('commits a container snapshot as a child image', async () => {
    await busybox();
    const base = await images.resolve('busybox');
    const cid = 'e'.repeat(64);
    await images.snapshotter.prepare(cid, base.chainId);
    const mnt = (await images.snapshotter.paths(cid)).MergedDir;
    await images.snapshotter.mount(cid, mnt);
    try {
      await writeFile(join(mnt, 'hello'), 'committed');
      await rm(join(mnt, 'etc', 'hosts'));
    } finally {
      await images.snapshotter.unmount(mnt);
    }
    const id = await images.commit({
      key: cid,
      parentImageId: base.id,
      containerId: cid,
      containerConfig: { Cmd: ['sh', '-c', 'echo hi'], Image: 'busybox' },
      config: { Cmd: ['cat', '/hello'], Env: base.config.config?.Env ?? null },
      author: 'me',
      comment: 'snap',
      repo: 'committed',
      tag: 'v1',
    });
    const rec = await images.resolve('committed:v1');
    assert.equal(rec.id, id);
    assert.equal(rec.parent, base.id);
    assert.equal(rec.config.rootfs.diff_ids.length, 2);
    assert.equal(rec.config.container, cid);
    assert.equal(rec.config.author, 'me');
    assert.deepEqual(rec.config.config?.Cmd, ['cat', '/hello']);
    const h = await images.history('committed:v1');
    assert.deepEqual(
      h.map((i) => [i.id, i.createdBy, i.comment]),
      [
        [id, 'sh -c echo hi', 'snap'],
        [base.id, '', 'Imported from -'],
      ],
    );
    // The committed file is in the image; the deleted one is whited out.
    await images.snapshotter.prepare('ctr-check', rec.chainId);
    const check = (await images.snapshotter.paths('ctr-check')).MergedDir;
    await images.snapshotter.mount('ctr-check', check, { readonly: true });
    try {
      assert.equal(readFileSync(join(check, 'hello'), 'utf8'), 'committed');
      assert.ok(!existsSync(join(check, 'etc', 'hosts')));
      assert.ok(existsSync(join(check, 'etc', 'passwd')));
    } finally {
      await images.snapshotter.unmount(check);
    }
    await images.snapshotter.remove('ctr-check');
    // Nothing changed: an empty layer, recorded in history only (no layer made for it on disk).
    await images.snapshotter.prepare('f'.repeat(64), rec.chainId);
    const dirsBefore = (await readdir(join(dir, 'overlay'))).sort();
    const again = await images.commit({
      key: 'f'.repeat(64),
      parentImageId: id,
      containerId: 'f'.repeat(64),
      containerConfig: { Cmd: ['true'] },
      config: { Cmd: ['true'] },
    });
    const rec2 = await images.resolve(again);
    assert.equal(rec2.config.rootfs.diff_ids.length, 2);
    assert.equal(rec2.config.history?.at(-1)?.empty_layer, true);
    assert.equal(rec2.chainId, rec.chainId);
    assert.deepEqual((await readdir(join(dir, 'overlay'))).sort(), dirsBefore);
    await images.snapshotter.remove('f'.repeat(64));
    await images.snapshotter.remove(cid);
    await images.remove(again);
    await images.remove('committed:v1');
    await assert.rejects(
      images.commit({ key: cid, containerId: cid, containerConfig: {}, config: {}, tag: 'x' }),
      { kind: 'InvalidParameter' },
    );
  });

  it('mounts a container snapshot of busybox', async () => {
    await busybox();
    const rec = await images.resolve('busybox');
    await images.snapshotter.prepare('ctr2', rec.chainId);
    const paths = await images.snapshotter.paths('ctr2');
    await images.snapshotter.mount('ctr2', paths.MergedDir);
    try {
      assert.ok(existsSync(join(paths.MergedDir, 'bin', 'sh')));
      assert.ok(existsSync(join(paths.MergedDir, 'etc', 'passwd')));
    } finally {
      await images.snapshotter.unmount(paths.MergedDir);
    }
    await images.snapshotter.remove('ctr2');
  });
});

describe('image service: parents and history', () => {
  let dir: string;
  let images: ImageService;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-images-h-'));
    images = await createImageService({ dataRoot: dir, events: new EventsService(), log });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('walks parents for history, refuses to delete a parent, hides intermediates', async () => {
    const l1 = await images.addLayer(null, once(await makeTar([{ name: 'one', content: '1' }])));
    const base = await images.createImage({
      architecture: 'amd64',
      os: 'linux',
      created: '2024-01-01T00:00:00Z',
      rootfs: { type: 'layers', diff_ids: [l1.diffId] },
      history: [{ created: '2024-01-01T00:00:00Z', created_by: 'ADD one' }],
    });
    const l2 = await images.addLayer(l1.chainId, once(await makeTar([{ name: 'two', content: '22' }])));
    const child = await images.createImage(
      {
        architecture: 'amd64',
        os: 'linux',
        created: '2024-01-02T00:00:00Z',
        config: { Cmd: ['x'] },
        rootfs: { type: 'layers', diff_ids: [l1.diffId, l2.diffId] },
        history: [
          { created: '2024-01-01T00:00:00Z', created_by: 'ADD one' },
          { created: '2024-01-02T00:00:00Z', created_by: 'CMD x', empty_layer: true },
          { created: '2024-01-02T00:00:00Z', created_by: 'ADD two' },
        ],
      },
      { parent: base },
    );
    l1.release();
    l2.release();
    assert.equal((await images.collectGarbage()).length, 0);
    await images.tag(child, 'child');
    const h = await images.history('child');
    assert.deepEqual(
      h.map((i) => [i.id, i.createdBy, i.size, i.tags]),
      [
        [child, 'ADD two', 2, ['child:latest']],
        [base, 'CMD x', 0, null],
        ['<missing>', 'ADD one', 1, null],
      ],
    );
    assert.equal((await images.resolve('child')).size, 3);
    const listed = (await images.listImages()).map((i) => i.record.id);
    assert.deepEqual(listed, [child], 'untagged parent with children is hidden without all');
    assert.deepEqual(
      (await images.listImages({ all: true })).map((i) => i.record.id),
      [child, base],
    );
    await assert.rejects(
      images.remove(base, { force: true }),
      /\(cannot be forced\) - image has dependent child images/,
    );
    const out = await images.remove('child');
    assert.deepEqual(out, [
      { Untagged: 'child:latest' },
      { Deleted: child },
      { Deleted: l2.chainId },
      { Deleted: base },
      { Deleted: l1.chainId },
    ]);
  });
});
