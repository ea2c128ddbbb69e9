import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { referenceJson } from '../../helpers/reference.js';

const reference = referenceJson<{ Volumes: Array<Record<string, unknown>>; Warnings: unknown }>(
  'volumes.v1.41.json',
);

type Json = Record<string, unknown>;

/** /volumes over raw HTTP: shapes as dockerd 20.10 answers them, statuses, version gates. */
describe('volumes: raw API', () => {
  let engine: TestEngine;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });

  after(async () => {
    await engine?.destroy();
  });

  it('answers list, create and inspect in the reference shape', async () => {
    const created = await engine.request('POST', '/v1.41/volumes/create', { body: { Name: 'shape-vol' } });
    assert.equal(created.status, 201);
    const list = await engine.request('GET', '/v1.41/volumes');
    assert.equal(list.status, 200);
    const body = list.json<{ Volumes: Json[]; Warnings: unknown }>();
    assert.deepEqual(Object.keys(body), Object.keys(reference));
    assert.equal(body.Warnings, null);
    const v = body.Volumes.find((x) => x.Name === 'shape-vol');
    const ref = reference.Volumes[0] ?? {};
    assert.deepEqual(Object.keys(v ?? {}), Object.keys(ref));
    assert.equal(v?.Labels, null);
    assert.equal(v?.Options, null);
    assert.equal(v?.Scope, 'local');
    assert.equal(v?.Mountpoint, join(engine.dataRoot, 'volumes', 'shape-vol', '_data'));
    assert.deepEqual(created.json(), v);
    const inspect = await engine.request('GET', '/v1.41/volumes/shape-vol');
    assert.deepEqual(inspect.json(), v);
    // dockerd 20.10 answers the same shape at every version (CreatedAt and Options too).
    for (const version of ['1.24', '1.25', '1.30']) {
      assert.deepEqual((await engine.request('GET', `/v${version}/volumes/shape-vol`)).json<Json>(), v);
      const listed = (await engine.request('GET', `/v${version}/volumes`)).json<{ Volumes: Json[] }>();
      assert.deepEqual(
        listed.Volumes.find((x) => x.Name === 'shape-vol'),
        v,
      );
    }
    const again = await engine.request('POST', '/v1.41/volumes/create', {
      body: { Name: 'shape-vol', Labels: { ignored: 'x' } },
    });
    assert.equal(again.status, 201);
    assert.equal(again.json<Json>().Labels, null);
    const withOpts = await engine.request('POST', '/v1.41/volumes/create', {
      body: {
        Name: 'opt-vol',
        DriverOpts: { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' },
        Labels: { a: 'b' },
      },
    });
    assert.equal(withOpts.status, 201);
    assert.deepEqual(withOpts.json<Json>().Options, { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' });
    assert.deepEqual(withOpts.json<Json>().Labels, { a: 'b' });
    // Options and Labels come out with sorted keys (Go maps), whatever order they were given in.
    const sorted = await engine.request('POST', '/v1.41/volumes/create', {
      body: {
        Name: 'sorted-vol',
        DriverOpts: { type: 'tmpfs', o: 'size=1m', device: 'tmpfs' },
        Labels: { z: '1', a: '2', m: '3' },
      },
    });
    assert.equal(sorted.status, 201);
    assert.deepEqual(Object.keys(sorted.json<{ Options: Json }>().Options), ['device', 'o', 'type']);
    assert.deepEqual(Object.keys(sorted.json<{ Labels: Json }>().Labels), ['a', 'm', 'z']);
    const sortedList = (await engine.request('GET', '/v1.24/volumes')).json<{ Volumes: Json[] }>();
    const sortedListed = sortedList.Volumes.find((x) => x.Name === 'sorted-vol') ?? {};
    assert.deepEqual(Object.keys(sortedListed.Labels as Json), ['a', 'm', 'z']);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/sorted-vol')).status, 204);
    const anon = await engine.request('POST', '/v1.41/volumes/create', { body: {} });
    assert.equal(anon.status, 201);
    assert.match(String(anon.json<Json>().Name), /^[0-9a-f]{64}$/);
    assert.equal((await engine.request('DELETE', `/v1.41/volumes/${anon.json<Json>().Name}`)).status, 204);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/opt-vol')).status, 204);
  });

  it('answers 400, 404 and 409 with dockerd messages', async () => {
    const bad = await engine.request('POST', '/v1.41/volumes/create', { body: { Name: 'a' } });
    assert.equal(bad.status, 400);
    assert.equal(
      bad.json<{ message: string }>().message,
      'create a: volume name is too short, names should be at least two alphanumeric characters',
    );
    const badBody = await engine.request('POST', '/v1.41/volumes/create', {
      body: { Name: 'ok-name', Labels: [1] },
    });
    assert.equal(badBody.status, 400);
    const badDriver = await engine.request('POST', '/v1.41/volumes/create', {
      body: { Name: 'nd', Driver: 'nfs' },
    });
    assert.equal(badDriver.status, 404);
    const missingOpt = await engine.request('POST', '/v1.41/volumes/create', {
      body: { Name: 'mo', DriverOpts: { type: 'tmpfs' } },
    });
    assert.equal(missingOpt.status, 400);
    assert.equal(
      missingOpt.json<{ message: string }>().message,
      'create mo: missing required option: "device"',
    );
    const missing = await engine.request('GET', '/v1.41/volumes/nosuch');
    assert.equal(missing.status, 404);
    assert.equal(missing.json<{ message: string }>().message, 'get nosuch: no such volume');
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/nosuch')).status, 404);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/nosuch?force=1')).status, 204);
    // dockerd 20.10 reads `force` at every version
    assert.equal((await engine.request('DELETE', '/v1.24/volumes/nosuch?force=1')).status, 204);
    assert.equal((await engine.request('DELETE', '/v1.24/volumes/nosuch')).status, 404);
    const badFilter = await engine.request(
      'GET',
      `/v1.41/volumes?filters=${encodeURIComponent('{"nope":["x"]}')}`,
    );
    assert.equal(badFilter.status, 400);
    const badDangling = await engine.request(
      'GET',
      `/v1.41/volumes?filters=${encodeURIComponent('{"dangling":["maybe"]}')}`,
    );
    assert.equal(badDangling.status, 400);

    const c = await engine.request('POST', '/v1.41/containers/create', {
      body: { Image: 'busybox', HostConfig: { Binds: ['busy-vol:/b'] } },
    });
    assert.equal(c.status, 201);
    const id = c.json<{ Id: string }>().Id;
    const busy = await engine.request('DELETE', '/v1.41/volumes/busy-vol');
    assert.equal(busy.status, 409);
    assert.equal(busy.json<{ message: string }>().message, `remove busy-vol: volume is in use - [${id}]`);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/busy-vol?force=1')).status, 409);
    assert.equal((await engine.request('DELETE', `/v1.41/containers/${id}`)).status, 204);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/busy-vol')).status, 204);
  });

  it('creates volumes for Config.Volumes, anonymous binds and Mounts, and refuses bad specs', async () => {
    const c = await engine.request('POST', '/v1.44/containers/create', {
      body: {
        Image: 'busybox',
        Volumes: { '/cv': {}, '/covered': {} },
        HostConfig: {
          Binds: ['/ab', 'named-b:/nb:ro,nocopy'],
          Mounts: [
            {
              Type: 'volume',
              Target: '/covered',
              Source: 'mnt-vol',
              VolumeOptions: { NoCopy: true, Labels: { l: '1' } },
            },
            { Type: 'volume', Target: '/mv-anon' },
          ],
        },
      },
    });
    assert.equal(c.status, 201, c.text());
    const id = c.json<{ Id: string }>().Id;
    const mounts = (await engine.request('GET', `/v1.44/containers/${id}/json`)).json<{ Mounts: Json[] }>()
      .Mounts;
    const byDest = new Map(mounts.map((m) => [m.Destination, m]));
    assert.deepEqual([...byDest.keys()].sort(), ['/ab', '/covered', '/cv', '/mv-anon', '/nb']);
    for (const m of mounts) {
      assert.deepEqual(Object.keys(m), [
        'Type',
        'Name',
        'Source',
        'Destination',
        'Driver',
        'Mode',
        'RW',
        'Propagation',
      ]);
      assert.equal(m.Type, 'volume');
      assert.equal(m.Driver, 'local');
    }
    assert.equal(byDest.get('/covered')?.Name, 'mnt-vol');
    assert.equal(byDest.get('/nb')?.Mode, 'ro,nocopy');
    assert.equal(byDest.get('/nb')?.RW, false);
    assert.equal(byDest.get('/cv')?.Mode, '');
    const list = (await engine.request('GET', '/v1.41/containers/json?all=1')).json<
      Array<{ Id: string; Mounts: Json[] }>
    >();
    assert.equal(list.find((x) => x.Id === id)?.Mounts.length, 5);
    const mv = (await engine.request('GET', '/v1.41/volumes/mnt-vol')).json<Json>();
    assert.deepEqual(mv.Labels, { l: '1' });
    const anonNames = mounts.filter((m) => /^[0-9a-f]{64}$/.test(String(m.Name))).map((m) => String(m.Name));
    assert.equal(anonNames.length, 3);
    assert.equal((await engine.request('DELETE', `/v1.41/containers/${id}?v=1`)).status, 204);
    for (const n of anonNames) assert.equal((await engine.request('GET', `/v1.41/volumes/${n}`)).status, 404);
    assert.equal((await engine.request('GET', '/v1.41/volumes/mnt-vol')).status, 200);
    assert.equal((await engine.request('GET', '/v1.41/volumes/named-b')).status, 200);

    const cases: Json[] = [
      { Image: 'busybox', HostConfig: { Mounts: [{ Type: 'volume', Target: '/x', ReadOnly: true }] } },
      { Image: 'busybox', HostConfig: { Mounts: [{ Type: 'volume', Target: '/x', Source: 'bad/name' }] } },
      { Image: 'busybox', HostConfig: { Binds: ['v1:/x', 'v2:/x'] } },
      { Image: 'busybox', HostConfig: { VolumesFrom: ['x:bogus'] } },
      { Image: 'busybox', Volumes: { relative: {} } },
    ];
    for (const body of cases) {
      const r = await engine.request('POST', '/v1.41/containers/create', { body });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text()}`);
    }
    assert.equal((await engine.request('GET', '/v1.41/volumes/v1')).status, 404);
  });

  it('prunes anonymous volumes only from 1.42, everything unused before', async () => {
    await engine.request('POST', '/v1.41/volumes/create', {
      body: { Name: 'pr-named', Labels: { keep: 'no' } },
    });
    const anon = (await engine.request('POST', '/v1.41/volumes/create', { body: {} })).json<{
      Name: string;
    }>().Name;
    const r = await engine.request('POST', '/v1.44/volumes/prune');
    assert.equal(r.status, 200);
    const report = r.json<{ VolumesDeleted: string[]; SpaceReclaimed: number }>();
    assert.deepEqual(Object.keys(report), ['VolumesDeleted', 'SpaceReclaimed']);
    assert.ok(report.VolumesDeleted.includes(anon));
    assert.ok(!report.VolumesDeleted.includes('pr-named'));
    const labelled = await engine.request(
      'POST',
      `/v1.44/volumes/prune?filters=${encodeURIComponent('{"all":["true"],"label":["keep=yes"]}')}`,
    );
    assert.deepEqual(labelled.json<{ VolumesDeleted: unknown }>().VolumesDeleted, []);
    const old = await engine.request('POST', '/v1.41/volumes/prune');
    assert.ok(old.json<{ VolumesDeleted: string[] }>().VolumesDeleted.includes('pr-named'));
    const badFilter = await engine.request(
      'POST',
      `/v1.44/volumes/prune?filters=${encodeURIComponent('{"name":["x"]}')}`,
    );
    assert.equal(badFilter.status, 400);
  });

  it('matches dockerd 20.10 on create bodies, names, drivers and options', async () => {
    const msg = (r: { json: <T>() => T }) => r.json<{ message: string }>().message;
    const create = (body: unknown, headers?: Record<string, string>) =>
      engine.request('POST', '/v1.41/volumes/create', { body, ...(headers ? { headers } : {}) });
    // An empty body is not an anonymous volume: Go's decoder meets EOF.
    for (const body of [Buffer.alloc(0), Buffer.from('  \n')]) {
      for (const headers of [undefined, { 'Content-Type': 'application/json' }]) {
        const r = await create(body, headers);
        assert.equal(r.status, 400);
        assert.equal(msg(r), 'got EOF while reading request body');
      }
    }
    const plain = await create(Buffer.alloc(0), { 'Content-Type': 'text/plain' });
    assert.equal(plain.status, 400);
    assert.equal(msg(plain), "Content-Type specified (text/plain) must be 'application/json'");
    const arr = await create([]);
    assert.equal(arr.status, 400);
    assert.equal(msg(arr), 'json: cannot unmarshal array into Go value of type volume.VolumeCreateBody');
    const num = await create({ Name: 'ok-name', Labels: { a: 1 } });
    assert.equal(
      msg(num),
      'json: cannot unmarshal number into Go struct field VolumeCreateBody.Labels of type string',
    );
    const truncated = await create(Buffer.from('{'), { 'Content-Type': 'application/json' });
    assert.equal(truncated.status, 400);
    assert.equal(msg(truncated), 'unexpected EOF');
    // `null` decodes to an empty request: an anonymous volume.
    const anon = await create(Buffer.from('null'), { 'Content-Type': 'application/json' });
    assert.equal(anon.status, 201);
    assert.equal((await engine.request('DELETE', `/v1.41/volumes/${anon.json<Json>().Name}`)).status, 204);
    // Field names match without regard to case, the last one wins.
    const lower = await create({ Name: 'a', name: 'lower-vol', labels: { k: null } });
    assert.equal(lower.status, 201);
    assert.equal(lower.json<Json>().Name, 'lower-vol');
    assert.deepEqual(lower.json<Json>().Labels, { k: '' });

    // An existing name with another driver: the driver is looked up first, a 404.
    const other = await create({ Name: 'lower-vol', Driver: 'foo' });
    assert.equal(other.status, 404);
    assert.equal(msg(other), 'create lower-vol: error looking up volume plugin foo: plugin "foo" not found');
    const same = await create({ Name: 'lower-vol', Driver: 'local', DriverOpts: { foo: '1' } });
    assert.equal(same.status, 201);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/lower-vol')).status, 204);

    const badOpt = await create({ Name: 'vol-x', DriverOpts: { device: 'x', type: 'none', foo: '1' } });
    assert.equal(badOpt.status, 400);
    assert.equal(msg(badOpt), 'create vol-x: invalid option: "foo"');
    const quota = await create({ Name: 'vol-x', DriverOpts: { size: '1g' } });
    assert.equal(quota.status, 400);
    assert.equal(msg(quota), 'create vol-x: quota size requested but no quota support');
    const badSize = await create({ Name: 'vol-x', DriverOpts: { size: 'abc' } });
    assert.equal(badSize.status, 400, 'a malformed size is bad input (dockerd: 500)');
    assert.equal(msg(badSize), "create vol-x: invalid size: 'abc'");
    const noSize = await create({ Name: 'vol-s0', DriverOpts: { size: '0' } });
    assert.equal(noSize.status, 201);
    assert.deepEqual(noSize.json<Json>().Options, { size: '0' });
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/vol-s0')).status, 204);
    const dash = await create({ Name: '-' });
    assert.equal(
      msg(dash),
      'create -: volume name is too short, names should be at least two alphanumeric characters',
    );
    const quote = await create({ Name: 'a"b' });
    assert.equal(
      msg(quote),
      'create a"b: "a\\"b" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path',
    );

    // Names longer than a directory name can be are a clear 400; the longest one works.
    const long = `vol-${'a'.repeat(296)}`;
    const dir = join(engine.dataRoot, 'volumes', long);
    const tooLong = await create({ Name: long });
    assert.equal(tooLong.status, 400);
    assert.equal(
      msg(tooLong),
      `create ${long}: error while creating volume root path '${dir}': mkdir ${dir}: file name too long`,
    );
    const longest = `vol-${'b'.repeat(251)}`;
    assert.equal((await create({ Name: longest })).status, 201);
    assert.equal((await engine.request('DELETE', `/v1.41/volumes/${longest}`)).status, 204);
    assert.equal((await engine.request('GET', `/v1.41/volumes/${longest}`)).status, 404);
  });

  it('filters and prunes as dockerd 20.10', async () => {
    const q = (f: unknown) => encodeURIComponent(JSON.stringify(f));
    const msg = (r: { json: <T>() => T }) => r.json<{ message: string }>().message;
    await engine.request('POST', '/v1.41/volumes/create', { body: { Name: 'flt-a', Labels: { a: '1' } } });
    await engine.request('POST', '/v1.41/volumes/create', {
      body: { Name: 'flt-b', Labels: { a: '1', b: '2' } },
    });
    const names = async (f: unknown) =>
      (await engine.request('GET', `/v1.41/volumes?filters=${q(f)}`))
        .json<{ Volumes: Json[] }>()
        .Volumes.map((v) => String(v.Name))
        .filter((n) => n.startsWith('flt-'))
        .sort();
    assert.deepEqual(await names({ driver: ['loc'] }), []);
    assert.deepEqual(await names({ driver: ['local'] }), ['flt-a', 'flt-b']);
    assert.deepEqual(await names({ name: ['('] }), []);
    assert.deepEqual(await names({ dangling: ['x', 'true'] }), ['flt-a', 'flt-b']);
    const empty = await engine.request('GET', `/v1.41/volumes?filters=${q({ driver: ['loc'] })}`);
    assert.equal(empty.text(), '{"Volumes":[],"Warnings":null}');
    const badName = await engine.request('GET', `/v1.41/volumes?filters=${q({ foo: ['1'] })}`);
    assert.equal(badName.status, 400);
    assert.equal(msg(badName), "Invalid filter 'foo'");
    const badDangling = await engine.request('GET', `/v1.41/volumes?filters=${q({ dangling: ['x'] })}`);
    assert.equal(msg(badDangling), "Invalid filter 'dangling=[x]'");

    // `all` is a prune filter from 1.42 only; before, it is refused as any unknown filter.
    for (const version of ['1.24', '1.41']) {
      const r = await engine.request('POST', `/v${version}/volumes/prune?filters=${q({ all: ['true'] })}`);
      assert.equal(r.status, 400);
      assert.equal(msg(r), "Invalid filter 'all'");
    }
    const badPrune = await engine.request('POST', `/v1.41/volumes/prune?filters=${q({ foo: ['1'] })}`);
    assert.equal(msg(badPrune), "Invalid filter 'foo'");
    // label!: kept only when matching every value (label: only this test's volumes)
    const pruned = await engine.request(
      'POST',
      `/v1.41/volumes/prune?filters=${q({ label: ['a'], 'label!': ['a', 'b'] })}`,
    );
    assert.equal(pruned.status, 200);
    assert.deepEqual(pruned.json<{ VolumesDeleted: string[] }>().VolumesDeleted, ['flt-a']);
    const nothing = await engine.request('POST', `/v1.41/volumes/prune?filters=${q({ label: ['nomatch'] })}`);
    assert.equal(nothing.text(), '{"VolumesDeleted":[],"SpaceReclaimed":0}');
    const at144 = await engine.request(
      'POST',
      `/v1.44/volumes/prune?filters=${q({ all: ['true'], label: ['b=2'] })}`,
    );
    assert.deepEqual(at144.json<{ VolumesDeleted: string[] }>().VolumesDeleted, ['flt-b']);
  });
});
