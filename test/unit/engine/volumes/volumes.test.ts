import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { systemError } from '../../../../src/common/errors.js';
import { Logger } from '../../../../src/common/log.js';
import { decodeCreateBody, shapeVolume } from '../../../../src/engine/api/volumes.routes.js';
import { scopedPath } from '../../../../src/engine/containers/mounts/volumes.js';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import { filterVolumes } from '../../../../src/engine/volumes/filters.js';
import { mountErrorReason, type VolumeOps } from '../../../../src/engine/volumes/mount.adapter.js';
import { ANONYMOUS_LABEL, anonymousName, checkVolumeName } from '../../../../src/engine/volumes/names.js';
import {
  checkLocalOptions,
  mountFailure,
  mountFlags,
  needsMount,
  ramInBytes,
} from '../../../../src/engine/volumes/options.js';
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
    const short = /^volume name is too short, names should be at least two alphanumeric characters$/;
    invalid(() => checkVolumeName('a'), short);
    invalid(() => checkVolumeName('-'), short);
    invalid(() => checkVolumeName('é'), /^"é" includes invalid characters for a local volume name, only/);
    invalid(() => checkVolumeName('-ab'), /^"-ab" includes invalid characters/);
    invalid(() => checkVolumeName('a"b'), /^"a\\"b" includes invalid characters/);
    invalid(() => checkVolumeName('a/b'), /invalid characters/);
    assert.match(anonymousName(), /^[0-9a-f]{64}$/);
    assert.notEqual(anonymousName(), anonymousName());
  });

  it('validates local driver options', () => {
    checkLocalOptions({});
    checkLocalOptions({ type: 'tmpfs', device: 'tmpfs', o: 'size=1m' });
    invalid(() => checkLocalOptions({ foo: 'x' }), /^invalid option: "foo"$/);
    invalid(() => checkLocalOptions({ type: 'none', device: '/x', foo: 'x' }), /^invalid option: "foo"$/);
    invalid(() => checkLocalOptions({ type: 'tmpfs' }), /^missing required option: "device"$/);
    invalid(() => checkLocalOptions({ o: 'bind' }), /^missing required option: "device"$/);
    invalid(() => checkLocalOptions({ size: '1g' }), /^quota size requested but no quota support$/);
    invalid(() => checkLocalOptions({ size: '0.5k' }), /quota/);
    checkLocalOptions({ size: '0' });
    checkLocalOptions({ size: '0b' });
    // a malformed size is the client's error (dockerd answers 500 for it; berth does not)
    const bad = (fn: () => unknown, message: string) =>
      assert.throws(
        fn,
        (err: Error & { kind?: string }) => err.kind === 'InvalidParameter' && err.message === message,
      );
    bad(() => checkLocalOptions({ size: '' }), "invalid size: ''");
    bad(() => checkLocalOptions({ size: 'abc' }), "invalid size: 'abc'");
    bad(() => checkLocalOptions({ size: '-1' }), "invalid size: '-1'");
    bad(() => checkLocalOptions({ size: '1.2.3' }), 'strconv.ParseFloat: parsing "1.2.3": invalid syntax');
    assert.equal(ramInBytes('2 MiB'), 2 * 1024 * 1024);
    assert.equal(ramInBytes('1g'), 1024 ** 3);
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
    // the driver matches exactly, as dockerd's (no parts, no case folding)
    assert.deepEqual(names('{"driver":["loc"]}'), []);
    assert.deepEqual(names('{"driver":["LOCAL"]}'), []);
    assert.deepEqual(names('{"driver":["zz","local"]}'), ['alpha', 'beta', 'gamma']);
    // a name that is no valid expression matches only exactly
    assert.deepEqual(names('{"name":["("]}'), []);
    assert.deepEqual(names('{"name":["beta","gam"]}'), ['beta', 'gamma']);
    assert.deepEqual(names('{"label":["a"]}'), ['alpha', 'beta']);
    assert.deepEqual(names('{"label":["a=2","b"]}'), ['beta']);
    assert.deepEqual(names('{"dangling":["true"]}'), ['alpha', 'gamma']);
    assert.deepEqual(names('{"dangling":["0"]}'), ['beta']);
    // dockerd: true/1 among the values wins, then false/0; only nothing usable is an error
    assert.deepEqual(names('{"dangling":["x","true"]}'), ['alpha', 'gamma']);
    assert.deepEqual(names('{"dangling":["false","true"]}'), ['alpha', 'gamma']);
    assert.deepEqual(names('{"dangling":["false","x"]}'), ['beta']);
    invalid(() => names('{"dangling":["x"]}'), /^Invalid filter 'dangling=\[x\]'$/);
    invalid(() => names('{"dangling":["x","y"]}'), /^Invalid filter 'dangling=\[x y\]'$/);
    invalid(() => names('{"size":["1"]}'), /^Invalid filter 'size'$/);
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
    // every create announces itself, of an existing volume too (dockerd)
    assert.deepEqual(seen, ['create used', 'create used', 'destroy used']);
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
    const r2 = await vs.prune(parseFilters('{"all":["1"],"label!":["keep=yes"]}'), {
      allNamed: false,
      allFilter: true,
    });
    assert.deepEqual(r2.VolumesDeleted, ['named2']);
    // label!: a volume is kept only when it matches every label! value (dockerd's MatchKVList)
    const r3 = await vs.prune(parseFilters('{"label!":["keep=yes","other"]}'), { allNamed: true });
    assert.deepEqual(r3.VolumesDeleted, ['named']);
    assert.equal((await vs.inspect(b.Name)).Name, b.Name);
    const none = await vs.prune(new Map(), { allNamed: true });
    assert.deepEqual(none, { VolumesDeleted: [], SpaceReclaimed: 0 });
    assert.throws(() => vs.prune(parseFilters('{"dangling":["1"]}'), { allNamed: true }), {
      message: "Invalid filter 'dangling'",
    });
    // `all` is a filter from API 1.42 only
    assert.throws(() => vs.prune(parseFilters('{"all":["true"]}'), { allNamed: true }), {
      message: "Invalid filter 'all'",
    });
    assert.throws(() => vs.prune(parseFilters('{"all":["x"]}'), { allNamed: false, allFilter: true }), {
      message: "invalid filter 'all=x'",
    });
    // prune announces itself only: no destroy per volume
    assert.deepEqual(
      seen.filter((e) => !e.startsWith('create')),
      [
        'prune:{"reclaimed":"5"}',
        'prune:{"reclaimed":"0"}',
        'prune:{"reclaimed":"0"}',
        'prune:{"reclaimed":"0"}',
      ],
    );
  });

  it('refuses bad create requests with 400/404/409', async () => {
    const vs = await createVolumeService({
      dataRoot: join(dir, 'bad'),
      events: new EventsService(),
      log,
      ops: new FakeOps(),
    });
    const rejects = (p: Promise<unknown>, kind: string, message: string) =>
      assert.rejects(p, (e: Error & { kind?: string }) => {
        assert.equal(e.kind, kind);
        assert.equal(e.message, message);
        return true;
      });
    await rejects(
      vs.create({ Name: 'x' }),
      'InvalidParameter',
      'create x: volume name is too short, names should be at least two alphanumeric characters',
    );
    await rejects(
      vs.create({ Name: 'x/y' }),
      'InvalidParameter',
      'create x/y: "x/y" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path',
    );
    await rejects(
      vs.create({ Name: 'x', Driver: 'foo' }),
      'NotFound',
      'create x: error looking up volume plugin foo: plugin "foo" not found',
    );
    await rejects(
      vs.create({ Name: 'oo', DriverOpts: { foo: '1' } }),
      'InvalidParameter',
      'create oo: invalid option: "foo"',
    );
    await rejects(
      vs.create({ Name: 'oo', DriverOpts: { type: 'tmpfs' } }),
      'InvalidParameter',
      'create oo: missing required option: "device"',
    );
    await rejects(
      vs.create({ Name: 'oo', DriverOpts: { size: 'abc' } }),
      'InvalidParameter',
      "create oo: invalid size: 'abc'",
    );
    await assert.rejects(vs.inspect('oo'), /no such volume/);
    // A name longer than a directory name can be: a 400 in dockerd's words, nothing made.
    const long = `v${'a'.repeat(299)}`;
    const longDir = join(dir, 'bad', 'volumes', long);
    await rejects(
      vs.create({ Name: long }),
      'InvalidParameter',
      `create ${long}: error while creating volume root path '${longDir}': mkdir ${longDir}: file name too long`,
    );
    // The longest name works, and can be removed (its removal's temporary name is shorter).
    const longest = `v${'b'.repeat(254)}`;
    await vs.create({ Name: longest });
    await vs.remove(longest);
    await assert.rejects(vs.inspect(longest), /no such volume/);
    await assert.rejects(
      vs.create({ Name: 'ok', Labels: { a: 1 as unknown as string } }),
      /must be a string/,
    );
    await assert.rejects(
      vs.create({ Name: 'ok', Driver: 'nfs' }),
      (e: Error & { kind?: string }) => e.kind === 'NotFound',
    );
    await vs.create({ Name: 'ok' });
    // an existing name with another driver: the driver is looked up first (dockerd: 404)
    await rejects(
      vs.create({ Name: 'ok', Driver: 'nfs' }),
      'NotFound',
      'create ok: error looking up volume plugin nfs: plugin "nfs" not found',
    );
    // an existing name answers as it is, whatever the options (not checked again)
    assert.deepEqual(
      (await vs.create({ Name: 'ok', Driver: 'local', DriverOpts: { foo: '1' } })).Options,
      {},
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

describe('volume mounts: dockerd wording of failures', () => {
  it('derives mount(2) flags and data from `o` as moby/sys/mount does', () => {
    assert.deepEqual(mountFlags(''), { flags: 0, data: '' });
    assert.deepEqual(mountFlags('bind'), { flags: 0x1000, data: '' });
    assert.deepEqual(mountFlags('rbind,rprivate'), { flags: 0x5000, data: '' });
    assert.deepEqual(mountFlags('ro,bind,bogus=1'), { flags: 0x1001, data: 'bogus=1' });
    assert.deepEqual(mountFlags('size=1m,mode=700'), { flags: 0, data: 'size=1m,mode=700' });
    assert.deepEqual(mountFlags('ro,rw,noexec'), { flags: 0x8, data: '' });
    assert.deepEqual(mountFlags('defaults'), { flags: 0, data: 'defaults' });
  });

  it('words a failed mount as dockerd 20.10', () => {
    const target = '/var/lib/berth/volumes/v/_data';
    assert.equal(
      mountFailure({ device: '/nonexistent', options: 'bind', target }, 'no such file or directory'),
      `failed to mount local volume: mount /nonexistent:${target}, flags: 0x1000: no such file or directory`,
    );
    assert.equal(
      mountFailure({ device: 'tmpfs', options: 'bogus=1', target }, 'invalid argument'),
      `failed to mount local volume: mount tmpfs:${target}, data: bogus=1: invalid argument`,
    );
    assert.equal(
      mountFailure({ device: 'x', options: '', target }, 'no such device'),
      `failed to mount local volume: mount x:${target}: no such device`,
    );
  });

  it("reads the errno from libmount's debug lines, mount(8)'s text otherwise", () => {
    const debug = [
      '1: libmount:      CXT: [0x1]: mount(2) [source=/nonexistent, target=/t, type=none,  mountflags=0x00001000, mountdata=<none>]',
      '1: libmount:      CXT: [0x1]: mount(2) failed [errno=2 No such file or directory]',
      '1: libmount:      CXT: [0x1]: excode: rc=32 message="special device /nonexistent does not exist"',
      'mount: /t: special device /nonexistent does not exist.',
      '       dmesg(1) may have more information after failed mount system call.',
      '1: libmount:      CXT: [0x1]: <---- free',
    ].join('\n');
    assert.equal(mountErrorReason(debug), 'no such file or directory');
    assert.equal(
      mountErrorReason('x: libmount: CXT: mount(2) failed [errno=20 Not a directory]\n'),
      'not a directory',
    );
    assert.equal(
      mountErrorReason(
        'mount: /t: bad option; for several filesystems (e.g. nfs, cifs) you might need a /sbin/mount.<type> helper program.\n       dmesg(1) may have more information after failed mount system call.',
      ),
      'bad option; for several filesystems (e.g. nfs, cifs) you might need a /sbin/mount.<type> helper program',
    );
    assert.equal(mountErrorReason(''), 'mount failed');
  });

  it("wraps a failed device mount in dockerd's words and keeps nothing mounted", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-vol-fail-'));
    try {
      class FailingOps extends FakeOps {
        override async mount(o: { type: string; device: string; options: string; target: string }) {
          throw systemError(mountFailure(o, 'no such file or directory'));
        }
      }
      const events = new EventsService();
      const seen: string[] = [];
      events.subscribe((e) => seen.push(e.Action));
      const vs = await createVolumeService({ dataRoot: dir, events, log, ops: new FailingOps() });
      const v = await vs.create({
        Name: 'bv',
        DriverOpts: { type: 'none', device: '/nonexistent', o: 'bind' },
      });
      const use = { container: 'c1', destination: '/x', readWrite: true, propagation: '' };
      await assert.rejects(vs.mount('bv', use), (e: Error & { kind?: string }) => {
        assert.equal(e.kind, 'System');
        assert.equal(
          e.message,
          `error while mounting volume '${v.Mountpoint}': failed to mount local volume: mount /nonexistent:${v.Mountpoint}, flags: 0x1000: no such file or directory`,
        );
        return true;
      });
      assert.deepEqual(seen, ['create']);
      // the events alone, for a caller that mounts quietly and announces in dockerd's order
      vs.announceMount('bv', use);
      vs.announceUnmount('bv', 'c1');
      assert.deepEqual(seen, ['create', 'mount', 'unmount']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('volume routes: shapes and create bodies', () => {
  it('answers CreatedAt and Options always, maps with sorted keys', () => {
    const v = {
      ...vol('s', { z: '1', a: '2', m: '3' }),
      Options: { type: 'tmpfs', o: 'x', device: 'tmpfs' },
    };
    const shaped = shapeVolume(v);
    assert.deepEqual(Object.keys(shaped), [
      'CreatedAt',
      'Driver',
      'Labels',
      'Mountpoint',
      'Name',
      'Options',
      'Scope',
    ]);
    assert.deepEqual(Object.keys(shaped.Labels as object), ['a', 'm', 'z']);
    assert.deepEqual(Object.keys(shaped.Options as object), ['device', 'o', 'type']);
    const empty = shapeVolume(vol('e'));
    assert.equal(empty.Labels, null);
    assert.equal(empty.Options, null);
    assert.equal(empty.CreatedAt, '2026-01-01T00:00:00Z');
  });

  it("decodes a create body as Go's encoding/json fills VolumeCreateBody", () => {
    assert.deepEqual(decodeCreateBody(null), {});
    assert.deepEqual(decodeCreateBody({ name: 'a', Name: 'b', Foo: 1 }), { Name: 'b' });
    assert.deepEqual(decodeCreateBody({ Name: 'a', name: 'vol-q' }), { Name: 'vol-q' });
    assert.deepEqual(decodeCreateBody({ Name: null, Labels: { a: null }, driveropts: { o: 'x' } }), {
      Labels: { a: '' },
      DriverOpts: { o: 'x' },
    });
    invalid(
      () => decodeCreateBody([]),
      /^json: cannot unmarshal array into Go value of type volume\.VolumeCreateBody$/,
    );
    invalid(
      () => decodeCreateBody('x'),
      /^json: cannot unmarshal string into Go value of type volume\.VolumeCreateBody$/,
    );
    invalid(
      () => decodeCreateBody({ Name: 1 }),
      /^json: cannot unmarshal number into Go struct field VolumeCreateBody\.Name of type string$/,
    );
    invalid(
      () => decodeCreateBody({ Labels: [] }),
      /^json: cannot unmarshal array into Go struct field VolumeCreateBody\.Labels of type map\[string\]string$/,
    );
    invalid(
      () => decodeCreateBody({ Labels: { a: 1 } }),
      /^json: cannot unmarshal number into Go struct field VolumeCreateBody\.Labels of type string$/,
    );
    invalid(
      () => decodeCreateBody({ DriverOpts: { a: true } }),
      /^json: cannot unmarshal bool into Go struct field VolumeCreateBody\.DriverOpts of type string$/,
    );
  });
});
