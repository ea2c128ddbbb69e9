import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { type HttpResult, TestEngine } from '../../helpers/engine.js';

type Json = Record<string, unknown>;

/**
 * What each API version from 1.42 to 1.56 changes in /_ping, /version, /info, /events,
 * /system/df, the image, network and build prune endpoints, over raw HTTP at versions on both
 * sides of each gate, and through the docker CLI 28 (which speaks 1.50).
 */
describe('engine API versions 1.42 to 1.56', () => {
  let engine: TestEngine;
  let busyboxId: string;
  /** An image imported as linux/s390x: a platform this host is not. */
  let foreignId: string;
  const host = JSON.stringify({ os: 'linux', architecture: process.arch === 'arm64' ? 'arm64' : 'amd64' });
  const foreign = JSON.stringify({ os: 'linux', architecture: 's390x' });

  const get = (version: string, path: string, headers?: Record<string, string>): Promise<HttpResult> =>
    engine.request('GET', `/v${version}${path}`, { headers });
  const json = async <T = Json>(version: string, path: string): Promise<T> => {
    const r = await get(version, path);
    assert.equal(r.status, 200, `${version} ${path}: ${r.text()}`);
    return r.json<T>();
  };
  const q = (s: string) => encodeURIComponent(s);

  before(async () => {
    engine = await TestEngine.start();
    busyboxId = await ensureBusybox(engine);
    foreignId = await engine.dockerOk([
      'import',
      '--platform',
      'linux/s390x',
      await busyboxTarball(),
      'foreign:1',
    ]);
  });

  after(async () => {
    await engine?.destroy();
  });

  it('/_ping and /version advertise 1.56 at every version', async () => {
    for (const v of ['1.41', '1.50', '1.56']) {
      const ping = await get(v, '/_ping');
      assert.equal(ping.headers['api-version'], '1.56');
      assert.equal(ping.text(), 'OK');
    }
    const old = await json('1.41', '/version');
    const now = await json('1.56', '/version');
    assert.deepEqual(Object.keys(old), Object.keys(now));
    assert.equal(now.ApiVersion, '1.56');
    assert.equal(old.ApiVersion, '1.56');
  });

  it('/info by version: KernelMemory, CDISpecDirs, registry, bridge-nf, firewall, commits', async () => {
    const at = (v: string) => json(v, '/info');
    const v41 = await at('1.41');
    assert.equal(typeof v41.KernelMemory, 'boolean');
    assert.equal(typeof v41.BridgeNfIptables, 'boolean');
    assert.ok(!('CDISpecDirs' in v41) && !('FirewallBackend' in v41));
    const v42 = await at('1.42');
    assert.ok(!('KernelMemory' in v42), 'false under omitempty from 1.42');
    assert.ok(!('KernelMemoryTCP' in v42) || v42.KernelMemoryTCP === true);
    assert.ok(!('CDISpecDirs' in (await at('1.43'))));
    assert.deepEqual((await at('1.44')).CDISpecDirs, []);
    const registry = (v: Json) => v.RegistryConfig as Json;
    assert.deepEqual(registry(await at('1.46')).AllowNondistributableArtifactsCIDRs, []);
    assert.deepEqual(registry(await at('1.46')).AllowNondistributableArtifactsHostnames, []);
    const v47 = await at('1.47');
    assert.ok(!('AllowNondistributableArtifactsCIDRs' in registry(v47)));
    assert.ok(!('AllowNondistributableArtifactsHostnames' in registry(v47)));
    assert.ok(Array.isArray(registry(v47).InsecureRegistryCIDRs));
    const v48 = await at('1.48');
    assert.equal(v48.BridgeNfIptables, false);
    assert.equal(v48.BridgeNfIp6tables, false);
    assert.ok(!('FirewallBackend' in v48));
    const runc = v48.RuncCommit as Json;
    assert.equal(runc.Expected, runc.ID);
    const v49 = await at('1.49');
    assert.deepEqual(v49.FirewallBackend, { Driver: 'iptables' });
    for (const c of ['ContainerdCommit', 'RuncCommit', 'InitCommit'])
      assert.ok(!('Expected' in (v49[c] as Json)), c);
    assert.ok('ID' in (v49.RuncCommit as Json));
    assert.ok('BridgeNfIptables' in v49);
    const v50 = await at('1.50');
    assert.ok(!('BridgeNfIptables' in v50) && !('BridgeNfIp6tables' in v50));
    const v56 = await at('1.56');
    assert.ok(!('KernelMemoryTCP' in v56));
    for (const absent of ['Containerd', 'DiscoveredDevices', 'NRI', 'KernelMemory'])
      assert.ok(!(absent in v56), absent);
    assert.deepEqual(Object.keys(v56).slice(-3), ['FirewallBackend', 'CDISpecDirs', 'Warnings']);
  });

  it('/events: legacy keys below 1.52, the stream type by version and Accept, json-seq framing', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['tag', 'busybox', 'ev-probe:1']);
    await engine.dockerOk(['rmi', 'ev-probe:1']);
    const created = await engine.dockerOk(['create', 'busybox', 'true']);
    await engine.dockerOk(['rm', created]);
    const until = Math.floor(Date.now() / 1000) + 1;
    const path = `/events?since=${since}&until=${until}`;
    const records = (r: HttpResult) =>
      r
        .text()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l.replace(/^\x1e/, '')) as Json);
    const tagOf = (list: Json[]) =>
      list.find((e) => e.Action === 'tag' && (e.Actor as Json).ID === busyboxId);
    const createOf = (list: Json[]) =>
      list.find((e) => e.Action === 'create' && (e.Actor as Json).ID === created);

    const [v41, v51, v52, v56] = await Promise.all(['1.41', '1.51', '1.52', '1.56'].map((v) => get(v, path)));
    for (const r of [v41, v51]) {
      assert.equal(r.headers['content-type'], 'application/json');
      const list = records(r);
      assert.deepEqual(Object.keys(tagOf(list) ?? {}).slice(0, 3), ['status', 'id', 'Type']);
      const c = createOf(list);
      assert.equal(c?.status, 'create');
      assert.equal(c?.id, created);
      assert.equal(c?.from, 'busybox');
    }
    for (const r of [v52, v56]) {
      assert.equal(r.headers['content-type'], 'application/jsonl');
      const list = records(r);
      assert.deepEqual(Object.keys(tagOf(list) ?? {}), [
        'Type',
        'Action',
        'Actor',
        'scope',
        'time',
        'timeNano',
      ]);
      const c = createOf(list);
      assert.ok(c && !('status' in c) && !('id' in c) && !('from' in c));
    }
    // an exact Accept of a JSON stream type wins at any version; wildcards do not count
    const seq = await get('1.41', path, { Accept: 'application/json-seq' });
    assert.equal(seq.headers['content-type'], 'application/json-seq');
    const frames = seq.text().split('\n').filter(Boolean);
    assert.ok(frames.length > 2 && frames.every((f) => f.startsWith('\x1e{')), seq.text());
    assert.equal(tagOf(records(seq))?.status, 'tag', 'still the legacy keys of 1.41');
    const nd = await get('1.56', path, { Accept: 'application/x-ndjson' });
    assert.equal(nd.headers['content-type'], 'application/x-ndjson');
    assert.ok(!nd.text().includes('\x1e'));
    assert.equal(
      (await get('1.50', path, { Accept: 'application/jsonl' })).headers['content-type'],
      'application/jsonl',
    );
    assert.equal((await get('1.50', path, { Accept: '*/*' })).headers['content-type'], 'application/json');
    assert.equal(
      (await get('1.52', path, { Accept: 'application/*' })).headers['content-type'],
      'application/jsonl',
    );
  });

  it('/system/df: the 1.52 summaries and verbose, the legacy lists below', async () => {
    await engine.dockerOk(['volume', 'create', 'dfv-used']);
    await engine.dockerOk(['volume', 'create', 'dfv-idle']);
    const ctr = await engine.dockerOk([
      'run',
      '-d',
      '-v',
      'dfv-used:/data',
      'busybox',
      'sh',
      '-c',
      'head -c 20000 /dev/zero > /data/f; head -c 30000 /dev/zero > /rw',
    ]);
    await engine.dockerOk(['wait', ctr]);
    try {
      const legacyKeys = ['LayersSize', 'Images', 'Containers', 'Volumes', 'BuildCache'];
      const v51 = await json('1.51', '/system/df');
      assert.deepEqual(Object.keys(v51), legacyKeys);
      assert.equal(v51.BuildCache, null);

      const v52 = await json('1.52', '/system/df');
      assert.deepEqual(Object.keys(v52), [
        ...legacyKeys,
        'ImageUsage',
        'ContainerUsage',
        'VolumeUsage',
        'BuildCacheUsage',
      ]);
      assert.deepEqual(v52.BuildCache, [], 'an empty list from 1.52');
      assert.deepEqual(v52.BuildCacheUsage, {});
      const images = v52.Images as Json[];
      const nonZero = (o: Json) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== 0));
      const unused = images.filter((i) => i.Containers === 0);
      assert.deepEqual(
        v52.ImageUsage,
        nonZero({
          ActiveCount: images.filter((i) => (i.Containers as number) > 0).length,
          Items: images,
          Reclaimable: unused.reduce((s, i) => s + (i.Size as number) - (i.SharedSize as number), 0),
          TotalCount: images.length,
          TotalSize: v52.LayersSize,
        }),
      );
      assert.ok(images.some((i) => i.Id === busyboxId && (i.Containers as number) >= 1));
      const containers = v52.Containers as Json[];
      const mine = containers.find((c) => c.Id === ctr);
      assert.ok(mine && (mine.SizeRw as number) >= 30_000);
      const active = (c: Json) => ['running', 'paused', 'restarting'].includes(c.State as string);
      const sizeRw = (list: Json[]) => list.reduce((s, c) => s + ((c.SizeRw as number) ?? 0), 0);
      assert.deepEqual(
        v52.ContainerUsage,
        nonZero({
          ActiveCount: containers.filter(active).length,
          Items: containers,
          Reclaimable: sizeRw(containers.filter((c) => !active(c))),
          TotalCount: containers.length,
          TotalSize: sizeRw(containers),
        }),
      );
      const volumes = v52.Volumes as Json[];
      const usage = (name: string) => (volumes.find((v) => v.Name === name)?.UsageData ?? {}) as Json;
      assert.deepEqual(usage('dfv-used'), { RefCount: 1, Size: 20_000 });
      assert.deepEqual(usage('dfv-idle'), { RefCount: 0, Size: 0 });
      const volumeUsage = v52.VolumeUsage as Json;
      assert.equal(volumeUsage.TotalCount, volumes.length);
      assert.equal(
        volumeUsage.ActiveCount,
        volumes.filter((v) => (v.UsageData as Json).RefCount !== 0).length || undefined,
      );
      assert.equal(volumeUsage.TotalSize, 20_000);
      assert.equal(volumeUsage.Reclaimable, undefined, 'the unused volume is empty: nothing to reclaim');

      // verbose: the summaries only (with their Items)
      const verbose = await json('1.52', '/system/df?verbose=1');
      assert.deepEqual(Object.keys(verbose), [
        'ImageUsage',
        'ContainerUsage',
        'VolumeUsage',
        'BuildCacheUsage',
      ]);
      assert.deepEqual((verbose.ImageUsage as Json).Items, images);
      // verbose means nothing below 1.52
      assert.deepEqual(Object.keys(await json('1.51', '/system/df?verbose=1')), legacyKeys);
      // type: only what was asked for, the rest left out (null below 1.52)
      assert.deepEqual(Object.keys(await json('1.56', '/system/df?type=volume')), ['Volumes', 'VolumeUsage']);
      assert.deepEqual(Object.keys(await json('1.56', '/system/df?type=build-cache&verbose=1')), [
        'BuildCacheUsage',
      ]);
      const typed51 = await json('1.51', '/system/df?type=volume');
      assert.equal(typed51.Images, null);
    } finally {
      await engine.dockerOk(['rm', ctr]);
      await engine.dockerOk(['volume', 'rm', 'dfv-used', 'dfv-idle']);
    }
  });

  it('GET /images/json: fake names below 1.43, Containers from 1.51, manifests and identity', async () => {
    const untagged = await engine.dockerOk(['import', await busyboxTarball()]);
    const ctr = await engine.dockerOk(['create', 'busybox', 'true']);
    try {
      const row = async (v: string, query = '') =>
        (await json<Json[]>(v, `/images/json${query}`)).find((i) => i.Id === untagged) as Json;
      assert.deepEqual((await row('1.42')).RepoTags, ['<none>:<none>']);
      assert.deepEqual((await row('1.42')).RepoDigests, ['<none>@<none>']);
      assert.deepEqual((await row('1.43')).RepoTags, []);
      assert.deepEqual((await row('1.43')).RepoDigests, []);
      assert.deepEqual((await row('1.56')).RepoTags, []);
      const busybox = async (v: string) =>
        (await json<Json[]>(v, '/images/json')).find((i) => i.Id === busyboxId) as Json;
      assert.equal((await busybox('1.50')).Containers, -1);
      assert.equal((await busybox('1.51')).Containers, 1);
      assert.equal((await row('1.51')).Containers, 0);
      // manifests: accepted from 1.47, nothing to list (no containerd store)
      const manifests = await row('1.47', '?manifests=1');
      assert.ok(!('Manifests' in manifests) && !('Descriptor' in manifests));
      // identity needs manifests from 1.54; ignored before
      const refused = await get('1.54', '/images/json?identity=1');
      assert.equal(refused.status, 400);
      assert.deepEqual(refused.json(), { message: 'conflicting options: identity requires manifests=1' });
      assert.equal((await get('1.54', '/images/json?identity=1&manifests=1')).status, 200);
      assert.equal((await get('1.53', '/images/json?identity=1')).status, 200);
      assert.equal((await get('1.46', '/images/json?identity=1&manifests=1')).status, 200);
    } finally {
      await engine.dockerOk(['rm', ctr]);
      await engine.dockerOk(['rmi', untagged]);
    }
  });

  it('GET /images/{name}/json: manifests (1.48), platform (1.49), Config and empty fields by version', async () => {
    const inspect = (v: string, query = '') => get(v, `/images/busybox/json${query}`);
    // before their versions the parameters are not read at all
    assert.equal((await inspect('1.47', `?manifests=1&platform=${q(foreign)}`)).status, 200);
    assert.equal((await inspect('1.48', `?platform=${q(foreign)}`)).status, 200);
    assert.equal((await inspect('1.48', '?platform=garbage')).status, 200);
    const m = await inspect('1.48', '?manifests=1');
    assert.equal(m.status, 200);
    assert.ok(!('Manifests' in m.json<Json>()));
    // from 1.49: the platform is checked against the image
    assert.equal((await inspect('1.49', `?platform=${q(host)}`)).status, 200);
    const wrong = await inspect('1.49', `?platform=${q(foreign)}`);
    assert.equal(wrong.status, 404);
    assert.match(
      wrong.json<{ message: string }>().message,
      /^image with reference busybox was found but its platform \(linux\/(amd64|arm64)\) does not match the specified platform \(linux\/s390x\)$/,
    );
    assert.equal((await get('1.49', `/images/foreign:1/json?platform=${q(foreign)}`)).status, 200);
    const both = await inspect('1.49', `?manifests=1&platform=${q(host)}`);
    assert.equal(both.status, 400);
    assert.deepEqual(both.json(), {
      message: 'conflicting options: manifests and platform options cannot both be set',
    });
    const bad = await inspect('1.49', `?platform=${q('{"os":"linux"}')}`);
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json(), { message: 'both OS and Architecture must be provided' });
    assert.equal((await inspect('1.49', '?platform=linux%2Famd64')).status, 400);

    const keysOf = async (v: string) => (await json(v, '/images/busybox/json')) as Json;
    const v44 = await keysOf('1.44');
    assert.ok('ContainerConfig' in v44 && 'Container' in v44);
    const v45 = await keysOf('1.45');
    assert.ok(!('ContainerConfig' in v45) && !('Container' in v45));
    assert.ok('Hostname' in (v45.Config as Json), 'legacy Config keys until 1.49');
    const v50 = await keysOf('1.50');
    const config50 = v50.Config as Json;
    assert.ok(!('Hostname' in config50) && !('AttachStdin' in config50) && !('Image' in config50));
    assert.deepEqual(config50.Cmd, ['sh']);
    assert.equal(config50.Entrypoint, null, 'empty fields still written at 1.50 and 1.51');
    assert.equal(config50.WorkingDir, '');
    for (const key of ['Parent', 'Comment', 'DockerVersion', 'Author'])
      assert.ok(key in (await keysOf('1.51')), key);
    const v52 = await keysOf('1.52');
    const config52 = v52.Config as Json;
    assert.deepEqual(Object.keys(config52).sort(), ['Cmd', 'Env']);
    assert.ok(!('Parent' in v52) && !('Author' in v52));
    assert.equal(v52.DockerVersion, v50.DockerVersion, 'set: still there');
    assert.equal(v52.Comment, v50.Comment);
    assert.ok(!('Identity' in (await keysOf('1.56'))));
  });

  it('GET /images/{name}/history: platform from 1.48', async () => {
    assert.equal((await get('1.47', `/images/busybox/history?platform=${q(foreign)}`)).status, 200);
    const wrong = await get('1.48', `/images/busybox/history?platform=${q(foreign)}`);
    assert.equal(wrong.status, 404);
    assert.match(
      wrong.json<{ message: string }>().message,
      /does not match the specified platform \(linux\/s390x\)/,
    );
    const right = await get('1.48', `/images/foreign:1/history?platform=${q(foreign)}`);
    assert.equal(right.status, 200);
    assert.equal(right.json<Json[]>()[0]?.Id, foreignId);
    assert.equal((await get('1.48', '/images/busybox/history?platform=%7B%7D')).status, 400);
  });

  it('DELETE /images/{name}: platforms from 1.50', async () => {
    await engine.dockerOk(['tag', 'foreign:1', 'foreign:del']);
    const del = (v: string, query: string) => engine.request('DELETE', `/v${v}/images/foreign:del${query}`);
    const wrong = await del('1.50', `?platforms=${q(host)}`);
    assert.equal(wrong.status, 404);
    assert.match(
      wrong.json<{ message: string }>().message,
      /^image with reference foreign:del was found but its platform \(linux\/s390x\)/,
    );
    const two = await del('1.50', `?platforms=${q(foreign)}&platforms=${q(host)}`);
    assert.equal(two.status, 400);
    assert.deepEqual(two.json(), { message: 'multiple platforms are not supported' });
    assert.equal((await del('1.50', '?platforms=nope')).status, 400);
    const right = await del('1.50', `?platforms=${q(foreign)}`);
    assert.equal(right.status, 200, right.text());
    assert.deepEqual(right.json(), [{ Untagged: 'foreign:del' }]);
    // below 1.50 the parameter is not read
    await engine.dockerOk(['tag', 'foreign:1', 'foreign:del']);
    const old = await del('1.49', `?platforms=${q(host)}`);
    assert.equal(old.status, 200, old.text());
  });

  it('networks: EnableIPv4 from 1.48, no Containers in the list and inspect Status from 1.52', async () => {
    const list = async (v: string) =>
      (await json<Json[]>(v, '/networks')).find((n) => n.Name === 'bridge') as Json;
    const v47 = await list('1.47');
    assert.ok(!('EnableIPv4' in v47));
    assert.deepEqual(v47.Containers, {});
    assert.equal((await list('1.48')).EnableIPv4, true);
    assert.deepEqual((await list('1.51')).Containers, {});
    const v52 = await list('1.52');
    assert.ok(!('Containers' in v52) && !('Status' in v52));
    assert.equal(v52.EnableIPv4, true);

    const inspect = (v: string) => json(v, '/networks/bridge');
    assert.ok(!('EnableIPv4' in (await inspect('1.47'))));
    const v51 = await inspect('1.51');
    assert.equal(v51.EnableIPv4, true);
    assert.ok(!('Status' in v51));
    const subnet = ((v51.IPAM as Json).Config as Json[])[0]?.Subnet as string;
    const prefix = Number(subnet.split('/')[1]);
    const idle = (await inspect('1.52')).Status as Json;
    const inUse = (s: Json) => (((s.IPAM as Json).Subnets as Json)[subnet] as Json).IPsInUse as number;
    const running = Object.keys(v51.Containers as Json).length;
    assert.deepEqual(idle, {
      IPAM: {
        Subnets: {
          [subnet]: { IPsInUse: 3 + running, DynamicIPsAvailable: 2 ** (32 - prefix) - 3 - running },
        },
      },
    });
    const ctr = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60']);
    try {
      assert.equal(inUse((await inspect('1.52')).Status as Json), 4 + running);
      assert.ok('Containers' in (await inspect('1.56')), 'inspect keeps Containers');
    } finally {
      await engine.dockerOk(['rm', '-f', ctr]);
    }
    assert.deepEqual((await inspect('1.52')).Status, idle);
    assert.deepEqual((await json('1.56', `/networks/${v51.Id}`)).Status, idle);
    assert.deepEqual((await json('1.52', '/networks/none')).Status, { IPAM: {} });
  });

  it('POST /build/prune: reserved-space, max-used-space and min-free-space from 1.48', async () => {
    const prune = (v: string, query: string) => engine.request('POST', `/v${v}/build/prune${query}`);
    const message = (r: HttpResult) => r.json<{ message: string }>().message;
    assert.equal((await prune('1.47', '?reserved-space=abc&max-used-space=x&min-free-space=y')).status, 200);
    const old = await prune('1.47', '?keep-storage=abc');
    assert.equal(old.status, 400);
    assert.equal(
      message(old),
      'keep-storage is in bytes and expects an integer, got abc: strconv.Atoi: parsing "abc": invalid syntax',
    );
    for (const name of ['reserved-space', 'max-used-space', 'min-free-space']) {
      const r = await prune('1.48', `?${name}=1x`);
      assert.equal(r.status, 400, name);
      assert.equal(
        message(r),
        `${name} is in bytes and expects an integer, got 1x: strconv.Atoi: parsing "1x": invalid syntax`,
      );
    }
    // keep-storage is read only when reserved-space is 0 or absent
    assert.equal((await prune('1.48', '?reserved-space=10&keep-storage=abc')).status, 200);
    assert.equal((await prune('1.56', '?keep-storage=abc')).status, 400);
    const ok = await prune('1.56', '?reserved-space=1000&max-used-space=2000&min-free-space=3000');
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.json(), { CachesDeleted: null, SpaceReclaimed: 0 });
  });

  it('the docker CLI 28 (API 1.50) drives all of them', async () => {
    const ctr = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60']);
    try {
      assert.equal(await engine.dockerOk(['version', '--format', '{{.Client.APIVersion}}']), '1.50');
      assert.match(
        await engine.dockerOk(['info', '--format', '{{json .}}']),
        /"FirewallBackend":\{"Driver":"iptables"\}/,
      );
      assert.match(
        await engine.dockerOk(['system', 'df']),
        /^TYPE\s+TOTAL\s+ACTIVE\s+SIZE\s+RECLAIMABLE\nImages\s+\d+\s+\d+/,
      );
      const verbose = await engine.dockerOk(['system', 'df', '-v']);
      assert.match(verbose, /Images space usage:/);
      assert.match(verbose, new RegExp(ctr.slice(0, 12)));
      const images = await engine.dockerOk([
        'images',
        '--format',
        '{{.Repository}}:{{.Tag}} {{.Containers}}',
      ]);
      assert.match(images, /^busybox:latest N\/A$/m, 'Containers is -1 at 1.50');
      assert.equal(await engine.dockerOk(['image', 'inspect', '--format', '{{.Id}}', 'busybox']), busyboxId);
      assert.equal(
        await engine.dockerOk([
          'image',
          'inspect',
          '--platform',
          'linux/s390x',
          '--format',
          '{{.Id}}',
          'foreign:1',
        ]),
        foreignId,
      );
      const wrong = await engine.docker(['image', 'inspect', '--platform', 'linux/s390x', 'busybox']);
      assert.notEqual(wrong.code, 0);
      assert.match(wrong.stderr, /does not match the specified platform/);
      assert.match(await engine.dockerOk(['history', '--platform', 'linux/s390x', 'foreign:1']), /IMAGE/);
      await engine.dockerOk(['tag', 'foreign:1', 'foreign:cli']);
      const rmiWrong = await engine.docker(['rmi', '--platform', 'linux/arm/v5', 'foreign:cli']);
      assert.notEqual(rmiWrong.code, 0);
      assert.match(
        await engine.dockerOk(['rmi', '--platform', 'linux/s390x', 'foreign:cli']),
        /Untagged: foreign:cli/,
      );
      const since = Math.floor(Date.now() / 1000) - 1;
      await engine.dockerOk(['tag', 'busybox', 'cli-ev:1']);
      await engine.dockerOk(['rmi', 'cli-ev:1']);
      const events = await engine.events(since, '{{.Type}} {{.Action}} {{.Status}} {{.ID}}', [
        'image=cli-ev',
      ]);
      assert.match(events, new RegExp(`^image tag tag ${busyboxId}$`, 'm'));
      assert.match(
        await engine.dockerOk(['network', 'ls', '--format', '{{.Name}} {{.Driver}}']),
        /^bridge bridge$/m,
      );
      const net = JSON.parse(await engine.dockerOk(['network', 'inspect', 'bridge']))[0] as Json;
      assert.equal(net.EnableIPv4, true);
      assert.ok(!('Status' in net), 'Status from 1.52 only');
      assert.ok(ctr in (net.Containers as Json));
      assert.match(
        await engine.dockerOk(['builder', 'prune', '-f', '--keep-storage', '1mb']),
        /Total reclaimed space: 0B/,
      );
    } finally {
      await engine.dockerOk(['rm', '-f', ctr]);
    }
  });
});
