import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import { scopedPath } from '../../../../src/engine/containers/volumes.js';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import { filterVolumes } from '../../../../src/engine/volumes/filters.js';
import type { VolumeOps } from '../../../../src/engine/volumes/mount.adapter.js';
import { ANONYMOUS_LABEL, anonymousName, checkVolumeName } from '../../../../src/engine/volumes/names.js';
import { checkLocalOptions, needsMount } from '../../../../src/engine/volumes/options.js';
import { VolumeRefs } from '../../../../src/engine/volumes/refs.js';
import { createVolumeService } from '../../../../src/engine/volumes/volumes.service.js';
import type { VolumeInfo } from '../../../../src/engine/volumes/volumes.types.js';
import { parseFilters } from '../../../../src/http/query.js';

/** Host operations recorded instead of performed (no root needed). */
class FakeOps implements VolumeOps {
  calls: string[] = [];
  mounted = new Set<string>();
  async mount(o: { type: string; device: string; options: string; target: string }): Promise<void> {
    this.calls.push(`mount ${o.type} ${o.device} ${o.options} ${o.target}`);
    this.mounted.add(o.target);
  }
  async unmount(target: string): Promise<void> {
    this.calls.push(`umount ${target}`);
    this.mounted.delete(target);
  }
  async mountsUnder(dir: string): Promise<string[]> {
    return [...this.mounted].filter((m) => m === dir || m.startsWith(`${dir}/`));
  }
  async copyTree(src: string, dst: string): Promise<void> {
    this.calls.push(`copy ${src} ${dst}`);
    await writeFile(join(dst, 'copied'), 'x');
  }
}

const log = new Logger('error');
const invalid = (fn: () => unknown, re: RegExp) =>
  assert.throws(
    fn,
    (err: Error & { kind?: string }) => err.kind === 'InvalidParameter' && re.test(err.message),
  );

function vol(name: string, labels: Record<string, string> = {}): VolumeInfo {
  return {
    Name: name,
    Driver: 'local',
    Labels: labels,
    Options: {},
    CreatedAt: '2026-01-01T00:00:00Z',
    Mountpoint: `/x/${name}/_data`,
    Scope: 'local',
  };
}

describe('volume names, options, filters, refs', () => {
  it('accepts local names and refuses others with dockerd message', () => {
    checkVolumeName('ab');
    checkVolumeName('a.b_c-9');
    invalid(() => checkVolumeName('a'), /"a" includes invalid characters for a local volume name/);
    invalid(() => checkVolumeName('-ab'), /invalid characters/);
    invalid(() => checkVolumeName('a/b'), /invalid characters/);
    assert.match(anonymousName(), /^[0-9a-f]{64}$/);
    assert.notEqual(anonymousName(), anonymousName());
  });

  it('validates local driver options', () => {
    checkLocalOptions({});
    checkLocalOptions({ type: 'tmpfs', device: 'tmpfs', o: 'size=1m' });
    invalid(() => checkLocalOptions({ foo: 'x' }), /invalid option key: "foo"/);
    invalid(() => checkLocalOptions({ type: 'tmpfs' }), /missing required option: "device"/);
    invalid(() => checkLocalOptions({ o: 'bind' }), /missing required option: "device"/);
    invalid(() => checkLocalOptions({ size: '1g' }), /quota/);
    assert.equal(needsMount({}), false);
    assert.equal(needsMount({ type: 'none', device: '/x', o: 'bind' }), true);
  });

  it('filters by name (regexp or part), driver, label and dangling', () => {
    const all = [vol('alpha', { a: '1' }), vol('beta', { a: '2', b: '' }), vol('gamma')];
    const used = (n: string) => n === 'beta';
    const names = (f: string) => filterVolumes(all, parseFilters(f), used).map((v) => v.Name);
    assert.deepEqual(names('{"name":["al"]}'), ['alpha']);
    assert.deepEqual(names('{"name":["^.a"]}'), ['gamma']);
    assert.deepEqual(names('{"driver":["local"]}'), ['alpha', 'beta', 'gamma']);
    assert.deepEqual(names('{"label":["a"]}'), ['alpha', 'beta']);
    assert.deepEqual(names('{"label":["a=2","b"]}'), ['beta']);
    assert.deepEqual(names('{"dangling":["true"]}'), ['alpha', 'gamma']);
    assert.deepEqual(names('{"dangling":["0"]}'), ['beta']);
    invalid(() => names('{"dangling":["x"]}'), /invalid filter 'dangling=x'/);
    invalid(() => names('{"size":["1"]}'), /invalid filter 'size'/);
  });

  it('counts references per volume', () => {
    const r = new VolumeRefs();
    r.add('v', 'c1');
    r.add('v', 'c1');
    r.add('v', 'c2');
    assert.equal(r.count('v'), 2);
    assert.equal(r.delete('v', 'c1'), 1);
    assert.deepEqual(r.ids('v'), ['c2']);
    assert.equal(r.delete('v', 'c2'), 0);
    assert.equal(r.count('v'), 0);
    assert.equal(r.delete('none', 'c'), 0);
  });
});

describe('volume service (fake host ops)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-vol-unit-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('persists metadata atomically and reloads it; recovers partial directories', async () => {
    const root = join(dir, 'persist');
    const events = new EventsService();
    const vs = await createVolumeService({ dataRoot: root, events, log, ops: new FakeOps() });
    const v = await vs.create({
      Name: 'keep',
      Labels: { a: 'b' },
      DriverOpts: { type: 'tmpfs', device: 'tmpfs' },
    });
    assert.equal(v.Mountpoint, join(root, 'volumes', 'keep', '_data'));
    assert.equal((await stat(v.Mountpoint)).mode & 0o777, 0o755);
    const meta = JSON.parse(await readFile(join(root, 'volumes', 'keep', 'volume.json'), 'utf8'));
    assert.deepEqual(meta.Labels, { a: 'b' });
    const anon = await vs.create({});
    assert.ok(vs.isAnonymous(anon.Name));
    assert.deepEqual(anon.Labels, { [ANONYMOUS_LABEL]: '' });
    // A volume directory without metadata (crash, or made elsewhere) and a metadata-only one.
    await mkdir(join(root, 'volumes', 'bare', '_data'), { recursive: true });
    await mkdir(join(root, 'volumes', 'metaonly'), { recursive: true });
    await writeFile(
      join(root, 'volumes', 'metaonly', 'volume.json'),
      JSON.stringify({ Name: 'metaonly', Labels: {}, Options: {}, CreatedAt: '2026-01-01T00:00:00Z' }),
    );
    // An interrupted removal is finished at load.
    await mkdir(join(root, 'volumes', '.removing-gone-1', '_data'), { recursive: true });
    const again = await createVolumeService({ dataRoot: root, events, log, ops: new FakeOps() });
    const names = (await again.list(new Map())).Volumes.map((x) => x.Name).sort();
    assert.deepEqual(names, [anon.Name, 'bare', 'keep', 'metaonly'].sort());
    const keep = await again.inspect('keep');
    assert.deepEqual(keep.Labels, { a: 'b' });
    assert.deepEqual(keep.Options, { type: 'tmpfs', device: 'tmpfs' });
    assert.equal(keep.CreatedAt, v.CreatedAt);
    assert.ok((await stat(join(root, 'volumes', 'metaonly', '_data'))).isDirectory());
    await assert.rejects(stat(join(root, 'volumes', '.removing-gone-1')));
  });

  it('refuses to remove a referenced volume (409), removes it once released, force hides 404', async () => {
    const events = new EventsService();
    const seen: string[] = [];
    events.subscribe((e) => seen.push(`${e.Action} ${e.Actor.ID}`));
    const vs = await createVolumeService({ dataRoot: join(dir, 'refs'), events, log, ops: new FakeOps() });
    await vs.create({ Name: 'used' }, { reference: 'c1' });
    await vs.create({ Name: 'used' }, { reference: 'c2' });
    assert.deepEqual(vs.users('used').sort(), ['c1', 'c2']);
    await assert.rejects(vs.remove('used'), (e: Error & { kind?: string }) => {
      assert.equal(e.kind, 'Conflict');
      assert.match(e.message, /^remove used: volume is in use - \[c1, c2\]$/);
      return true;
    });
    await assert.rejects(vs.remove('used', { force: true }), /in use/);
    vs.release('used', 'c1');
    vs.release('used', 'c2');
    assert.deepEqual(
      (await vs.list(parseFilters('{"dangling":["true"]}'))).Volumes.map((v) => v.Name),
      ['used'],
    );
    await vs.remove('used');
    await assert.rejects(vs.inspect('used'), /get used: no such volume/);
    await assert.rejects(vs.remove('used'), (e: Error & { kind?: string }) => e.kind === 'NotFound');
    await vs.remove('used', { force: true });
    assert.throws(() => vs.reference('used', 'c3'), /no such volume/);
    assert.deepEqual(seen, ['create used', 'destroy used']);
  });

  it('mounts a device on first use only and unmounts after the last user, with events', async () => {
    const events = new EventsService();
    const seen: Array<{ action: string; attrs: Record<string, string> }> = [];
    events.subscribe((e) => seen.push({ action: e.Action, attrs: e.Actor.Attributes }));
    const ops = new FakeOps();
    const vs = await createVolumeService({ dataRoot: join(dir, 'mounts'), events, log, ops });
    const v = await vs.create({ Name: 'tv', DriverOpts: { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' } });
    const use = (c: string) => ({ container: c, destination: '/t', readWrite: true, propagation: '' });
    assert.equal(await vs.mount('tv', use('c1')), v.Mountpoint);
    await vs.mount('tv', use('c2'));
    assert.deepEqual(ops.calls, [`mount tmpfs tmpfs size=1m ${v.Mountpoint}`]);
    await vs.unmount('tv', 'c1');
    assert.equal(ops.calls.length, 1);
    await vs.unmount('tv', 'c2');
    assert.deepEqual(ops.calls.slice(1), [`umount ${v.Mountpoint}`]);
    const mount = seen.find((e) => e.action === 'mount');
    assert.deepEqual(mount?.attrs, {
      container: 'c1',
      destination: '/t',
      driver: 'local',
      propagation: '',
      'read/write': 'true',
    });
    assert.deepEqual(seen.find((e) => e.action === 'unmount')?.attrs, { container: 'c1', driver: 'local' });
    // A plain volume is never mounted; quiet mounts publish nothing.
    await vs.create({ Name: 'plain' });
    const before = seen.length;
    await vs.mount('plain', use('c3'), { quiet: true });
    assert.equal(seen.length, before);
    assert.equal(ops.calls.length, 2);
    // A leftover device mount nobody uses (daemon restart) goes at settle.
    ops.mounted.add(v.Mountpoint);
    await vs.settle();
    assert.equal(ops.calls.at(-1), `umount ${v.Mountpoint}`);
  });

  it('copies image content only into an empty volume', async () => {
    const ops = new FakeOps();
    const vs = await createVolumeService({
      dataRoot: join(dir, 'copy'),
      events: new EventsService(),
      log,
      ops,
    });
    const src = join(dir, 'copy-src');
    await mkdir(src, { recursive: true });
    await vs.create({ Name: 'cu' });
    await vs.populate('cu', join(dir, 'missing'));
    assert.deepEqual(ops.calls, []);
    await vs.populate('cu', src);
    await vs.populate('cu', src);
    assert.equal(ops.calls.filter((c: string) => c.startsWith('copy')).length, 1);
  });

  it('prunes unused anonymous volumes, named ones with all, by label; reports the space', async () => {
    const events = new EventsService();
    const seen: string[] = [];
    events.subscribe((e) => seen.push(`${e.Action}:${JSON.stringify(e.Actor.Attributes)}`));
    const vs = await createVolumeService({ dataRoot: join(dir, 'prune'), events, log, ops: new FakeOps() });
    const a = await vs.create({});
    await writeFile(join(a.Mountpoint, 'f'), '12345');
    const b = await vs.create({}, { reference: 'c1' });
    await vs.create({ Name: 'named', Labels: { keep: 'yes' } });
    await vs.create({ Name: 'named2' });
    const r = await vs.prune(new Map(), { allNamed: false });
    assert.deepEqual(r, { VolumesDeleted: [a.Name], SpaceReclaimed: 5 });
    assert.ok(seen.includes('prune:{"reclaimed":"5"}'));
    const r2 = await vs.prune(parseFilters('{"all":["1"],"label!":["keep=yes"]}'), { allNamed: false });
    assert.deepEqual(r2.VolumesDeleted, ['named2']);
    const r3 = await vs.prune(new Map(), { allNamed: true });
    assert.deepEqual(r3.VolumesDeleted, ['named']);
    assert.equal((await vs.inspect(b.Name)).Name, b.Name);
    const none = await vs.prune(new Map(), { allNamed: true });
    assert.deepEqual(none, { VolumesDeleted: null, SpaceReclaimed: 0 });
    assert.throws(
      () => vs.prune(parseFilters('{"dangling":["1"]}'), { allNamed: true }),
      /invalid filter 'dangling'/,
    );
  });

  it('refuses bad create requests with 400/404/409', async () => {
    const vs = await createVolumeService({
      dataRoot: join(dir, 'bad'),
      events: new EventsService(),
      log,
      ops: new FakeOps(),
    });
    await assert.rejects(vs.create({ Name: 'x' }), /invalid characters/);
    await assert.rejects(
      vs.create({ Name: 'ok', Labels: { a: 1 as unknown as string } }),
      /must be a string/,
    );
    await assert.rejects(
      vs.create({ Name: 'ok', Driver: 'nfs' }),
      (e: Error & { kind?: string }) => e.kind === 'NotFound',
    );
    await vs.create({ Name: 'ok' });
    await assert.rejects(
      vs.create({ Name: 'ok', Driver: 'nfs' }),
      (e: Error & { kind?: string }) => e.kind === 'Conflict',
    );
  });
});

describe('scopedPath', () => {
  it('resolves symlinks inside the root and never escapes it', async () => {
    const root = await mkdtemp(join(tmpdir(), 'berth-scoped-'));
    try {
      await mkdir(join(root, 'real', 'dir'), { recursive: true });
      await symlink('/real', join(root, 'abs'));
      await symlink('../../..', join(root, 'real', 'up'));
      assert.equal(await scopedPath(root, '/abs/dir'), join(root, 'real', 'dir'));
      assert.equal(await scopedPath(root, '/real/up/etc'), join(root, 'etc'));
      assert.equal(await scopedPath(root, '/../../x'), join(root, 'x'));
      assert.equal(await scopedPath(root, '/new/path'), join(root, 'new', 'path'));
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
