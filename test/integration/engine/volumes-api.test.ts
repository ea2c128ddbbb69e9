import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

const reference = JSON.parse(
  await readFile(resolve(import.meta.dirname, '../../../../shared/reference/volumes.v1.41.json'), 'utf8'),
) as { Volumes: Array<Record<string, unknown>>; Warnings: unknown };

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
    // Older versions: no CreatedAt before 1.31, no Options before 1.25.
    const old = (await engine.request('GET', '/v1.24/volumes/shape-vol')).json<Json>();
    assert.deepEqual(Object.keys(old), ['Driver', 'Labels', 'Mountpoint', 'Name', 'Scope']);
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
    const anon = await engine.request('POST', '/v1.41/volumes/create', { body: {} });
    assert.equal(anon.status, 201);
    assert.match(String(anon.json<Json>().Name), /^[0-9a-f]{64}$/);
    assert.equal((await engine.request('DELETE', `/v1.41/volumes/${anon.json<Json>().Name}`)).status, 204);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/opt-vol')).status, 204);
  });

  it('answers 400, 404 and 409 with dockerd messages', async () => {
    const bad = await engine.request('POST', '/v1.41/volumes/create', { body: { Name: 'a' } });
    assert.equal(bad.status, 400);
    assert.match(bad.json<{ message: string }>().message, /^create a: "a" includes invalid characters/);
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
    assert.equal(missingOpt.json<{ message: string }>().message, 'missing required option: "device"');
    const missing = await engine.request('GET', '/v1.41/volumes/nosuch');
    assert.equal(missing.status, 404);
    assert.equal(missing.json<{ message: string }>().message, 'get nosuch: no such volume');
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/nosuch')).status, 404);
    assert.equal((await engine.request('DELETE', '/v1.41/volumes/nosuch?force=1')).status, 204);
    assert.equal((await engine.request('DELETE', '/v1.24/volumes/nosuch?force=1')).status, 404);
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
    assert.equal(labelled.json<{ VolumesDeleted: unknown }>().VolumesDeleted, null);
    const old = await engine.request('POST', '/v1.41/volumes/prune');
    assert.ok(old.json<{ VolumesDeleted: string[] }>().VolumesDeleted.includes('pr-named'));
    const badFilter = await engine.request(
      'POST',
      `/v1.44/volumes/prune?filters=${encodeURIComponent('{"name":["x"]}')}`,
    );
    assert.equal(badFilter.status, 400);
  });
});
