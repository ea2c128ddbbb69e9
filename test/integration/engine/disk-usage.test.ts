import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

type Row = Record<string, unknown>;
interface Df {
  LayersSize?: number;
  Images: Row[] | null;
  Containers: Row[] | null;
  Volumes: Row[] | null;
  BuildCache: Row[] | null;
}

/** GET /system/df and `docker system df` against a real engine. */
describe('disk usage: docker system df', () => {
  let engine: TestEngine;
  let busyboxId: string;
  let otherId: string;
  let containerId: string;

  before(async () => {
    engine = await TestEngine.start();
    busyboxId = await ensureBusybox(engine);
    // the same rootfs again with another config: a second image on the same layer
    otherId = await engine.dockerOk([
      'import',
      '--change',
      'CMD ["true"]',
      await busyboxTarball(),
      'other:1',
    ]);
    await engine.dockerOk(['volume', 'create', 'df-data']);
    await engine.dockerOk(['volume', 'create', '--opt', 'type=tmpfs', '--opt', 'device=tmpfs', 'df-tmpfs']);
    containerId = await engine.dockerOk([
      'run',
      '-d',
      '-v',
      'df-data:/data',
      'busybox',
      'sh',
      '-c',
      'head -c 100000 /dev/zero > /data/f; ln /data/f /data/hardlink; head -c 50000 /dev/zero > /big',
    ]);
    await engine.dockerOk(['wait', containerId]);
  });

  after(async () => {
    await engine?.destroy();
  });

  it('reports images with shared sizes and users, containers with their sizes, local volumes with theirs', async () => {
    const r = await engine.request('GET', '/v1.44/system/df');
    assert.equal(r.status, 200, r.text());
    const df = r.json<Df>();
    assert.deepEqual(Object.keys(df), ['LayersSize', 'Images', 'Containers', 'Volumes', 'BuildCache']);

    const images = df.Images ?? [];
    const busybox = images.find((i) => i.Id === busyboxId);
    const other = images.find((i) => i.Id === otherId);
    assert.ok(busybox && other, JSON.stringify(images));
    assert.equal(busybox.Containers, 1);
    assert.equal(other.Containers, 0);
    const size = busybox.Size as number;
    assert.ok(size > 500_000, `busybox is ${size} bytes`);
    // one layer under both: all of it shared, counted once in LayersSize
    assert.equal(busybox.SharedSize, size);
    assert.equal(other.SharedSize, size);
    assert.equal(df.LayersSize, size);
    assert.equal('VirtualSize' in busybox, false);
    assert.deepEqual(busybox.RepoTags, ['busybox:latest']);

    const [c] = df.Containers ?? [];
    assert.equal(df.Containers?.length, 1);
    assert.equal(c?.Id, containerId);
    const sizeRw = c?.SizeRw as number;
    assert.ok(sizeRw >= 50_000 && sizeRw < 60_000, `SizeRw ${sizeRw}`);
    assert.equal(c?.SizeRootFs, size + sizeRw);
    assert.equal(c?.State, 'exited');

    // a volume with driver options is a device's: dockerd does not size it
    assert.deepEqual(
      (df.Volumes ?? []).map((v) => [v.Name, v.UsageData]),
      [['df-data', { RefCount: 1, Size: 100_000 }]],
    );
    assert.deepEqual(Object.keys(df.Volumes?.[0]?.UsageData as object), ['RefCount', 'Size']);
    // no build cache: null, as dockerd 20.10 answers an empty one
    assert.equal(df.BuildCache, null);
  });

  it('API 1.42+: `type` picks the kinds reported; an unknown one is a 400; older versions report all', async () => {
    const vols = (await engine.request('GET', '/v1.44/system/df?type=volume')).json<Df>();
    assert.deepEqual(
      { ...vols, Volumes: vols.Volumes?.length },
      { Images: null, Containers: null, Volumes: 1, BuildCache: null },
    );
    const two = (await engine.request('GET', '/v1.44/system/df?type=image&type=container')).json<Df>();
    assert.equal(two.Images?.length, 2);
    assert.equal(two.Containers?.length, 1);
    assert.equal(two.Volumes, null);
    const bad = await engine.request('GET', '/v1.44/system/df?type=nonsense');
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json(), { message: 'unknown object type: nonsense' });
    const old = (await engine.request('GET', '/v1.41/system/df?type=volume')).json<
      Df & { BuilderSize: number }
    >();
    assert.equal(old.Images?.length, 2);
    assert.equal(old.BuilderSize, 0);
    // 1.41 still has VirtualSize
    assert.equal(old.Images?.[0]?.VirtualSize, old.Images?.[0]?.Size);
  });

  it('answers requests made at the same time (dockerd refuses all but one)', async () => {
    const all = await Promise.all([1, 2, 3, 4].map(() => engine.request('GET', '/v1.44/system/df')));
    for (const r of all) assert.equal(r.status, 200, r.text());
    assert.deepEqual(
      new Set(all.map((r) => JSON.stringify(r.json<Df>().Volumes))).size,
      1,
      'the same report for all',
    );
  });

  it('docker system df and df -v', async () => {
    const rows = (await engine.dockerOk(['system', 'df', '--format', '{{json .}}']))
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    const byType = new Map(rows.map((row) => [row.Type, row]));
    assert.deepEqual(
      ['Images', 'Containers', 'Local Volumes', 'Build Cache'].map((t) => [
        t,
        byType.get(t)?.TotalCount,
        byType.get(t)?.Active,
      ]),
      [
        ['Images', '2', '1'],
        ['Containers', '1', '0'],
        ['Local Volumes', '1', '1'],
        ['Build Cache', '0', '0'],
      ],
    );
    assert.equal(byType.get('Local Volumes')?.Size, '100kB');
    const verbose = await engine.dockerOk(['system', 'df', '-v']);
    assert.match(verbose, /df-data\s+1\s+100kB/);
    assert.match(verbose, /other\s+1\s/);

    await engine.dockerOk(['rm', containerId]);
    const after = (await engine.request('GET', '/v1.44/system/df')).json<Df>();
    assert.deepEqual(after.Containers, []);
    assert.equal(after.Images?.find((i) => i.Id === busyboxId)?.Containers, 0);
    assert.deepEqual(after.Volumes?.[0]?.UsageData, { RefCount: 0, Size: 100_000 });
  });

  it('docker builder prune and docker system prune: no build cache to delete, parameters checked as dockerd', async () => {
    assert.match(await engine.dockerOk(['builder', 'prune', '-f']), /Total reclaimed space: 0B/);
    const stopped = await engine.dockerOk(['create', 'busybox', 'true']);
    const pruned = await engine.dockerOk(['system', 'prune', '-f']);
    assert.ok(pruned.includes(stopped), pruned);
    const bad = await engine.request(
      'POST',
      `/v1.44/build/prune?filters=${encodeURIComponent('{"bogus":["x"]}')}`,
    );
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json(), { message: "failed to prune build cache: Invalid filter 'bogus'" });
    const until = await engine.request(
      'POST',
      `/v1.44/build/prune?filters=${encodeURIComponent('{"until":["x"]}')}`,
    );
    assert.equal(until.status, 400);
    assert.equal(
      until.json<{ message: string }>().message,
      `failed to prune build cache: "until" filter expects a duration (e.g., '24h'): time: invalid duration "x"`,
    );
    const keep = await engine.request('POST', '/v1.44/build/prune?keep-storage=abc');
    assert.equal(keep.status, 400);
    assert.equal(
      keep.json<{ message: string }>().message,
      'keep-storage is in bytes and expects an integer, got abc: strconv.Atoi: parsing "abc": invalid syntax',
    );
    const ok = await engine.request(
      'POST',
      `/v1.44/build/prune?all=1&filters=${encodeURIComponent('{"until":["24h"]}')}`,
    );
    assert.deepEqual(ok.json(), { CachesDeleted: null, SpaceReclaimed: 0 });
  });
});
