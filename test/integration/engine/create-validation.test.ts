import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { hostSysInfo } from '../../../src/engine/runtime/sysinfo.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

// biome-ignore lint/suspicious/noExplicitAny: inspect JSON is walked freely in assertions.
type Inspect = Record<string, any>;

/**
 * POST /containers/create against a real engine, through raw HTTP and the docker CLI: bodies
 * dockerd refuses at decode time get a 400 and leave nothing behind, what dockerd accepts is
 * accepted (case-insensitive keys, StrSlice strings, legacy top-level HostConfig fields), its
 * create-time adjustments and warnings are there, and `container:` modes survive a rename.
 */
describe('container create: validation, adjustments, warnings', () => {
  let engine: TestEngine;
  const create = (body: unknown, query = '') =>
    engine.request('POST', `/v1.44/containers/create${query}`, {
      body: Buffer.from(JSON.stringify(body)),
      headers: { 'Content-Type': 'application/json' },
    });
  const message = (r: { json<T>(): T }) => r.json<{ message: string }>().message;
  const inspect = async (id: string) =>
    (await engine.request('GET', `/v1.44/containers/${id}/json`)).json<Inspect>();
  const count = async () =>
    (await engine.request('GET', '/v1.44/containers/json?all=1')).json<unknown[]>().length;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('bodies of the wrong JSON types: 400 naming the field and its type, no container left', async () => {
    const before = await count();
    const cases: Array<[unknown, string]> = [
      [
        { Image: 'busybox', HostConfig: { OomKillDisable: 'x' } },
        'HostConfig.HostConfig.OomKillDisable of type bool',
      ],
      [{ Image: 'busybox', HostConfig: { Init: 'x' } }, 'HostConfig.HostConfig.Init of type bool'],
      [
        { Image: 'busybox', HostConfig: { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: '3' } } },
        'RestartPolicy.HostConfig.RestartPolicy.MaximumRetryCount of type int',
      ],
      [
        { Image: 'busybox', HostConfig: { Ulimits: [{ Name: 'nofile', Soft: '1', Hard: 2 }] } },
        'Soft of type int64',
      ],
      [{ Image: 'busybox', HostConfig: { CpuRealtimeRuntime: 'x' } }, 'CpuRealtimeRuntime of type int64'],
      [{ Image: 'busybox', HostConfig: { Devices: ['x'] } }, 'Devices of type container.DeviceMapping'],
      [{ Image: 'busybox', Healthcheck: { Test: 'x' } }, 'Healthcheck.Test of type []string'],
      [{ Image: 'busybox', Healthcheck: { Test: [5] } }, 'Healthcheck.Test of type string'],
      [{ Image: 'busybox', Healthcheck: { Retries: '3' } }, 'Healthcheck.Retries of type int'],
      [{ Image: 'busybox', NetworkingConfig: { EndpointsConfig: 5 } }, 'EndpointsConfig of type map'],
      [{ Image: 'busybox', HostConfig: { Memory: 10000000.5 } }, 'number 10000000.5 into Go struct field'],
      [
        { Image: 'busybox', HostConfig: { LogConfig: { Type: 'json-file', Config: { 'max-file': 3 } } } },
        'Config of type string',
      ],
      [{ Image: 'busybox', HostConfig: { Sysctls: { 'net.ipv4.ip_forward': 1 } } }, 'Sysctls of type string'],
      [{ Image: 'busybox', HostConfig: { ConsoleSize: [24, 'x'] } }, 'ConsoleSize of type uint'],
      [
        {
          Image: 'busybox',
          HostConfig: { Mounts: [{ Type: 'tmpfs', Target: '/t', TmpfsOptions: { SizeBytes: '1' } }] },
        },
        'SizeBytes of type int64',
      ],
      [{ Image: 'busybox', memory: 'lots' }, 'ContainerConfigWrapper.Memory of type int64'],
    ];
    for (const [body, fragment] of cases) {
      const r = await create(body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.status} ${r.text()}`);
      assert.match(message(r), /^json: cannot unmarshal /);
      assert.ok(message(r).includes(fragment), `${message(r)} should name ${fragment}`);
    }
    for (const body of [null, {}, { HostConfig: { Memory: 1 << 30 } }]) {
      const r = await create(body);
      assert.equal(r.status, 400);
      assert.equal(message(r), 'Config cannot be empty in order to create a container');
    }
    assert.equal(await count(), before);
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });

  it('refuses at create what dockerd refuses there (or only fails at start), with its messages', async () => {
    const before = await count();
    const cases: Array<[Record<string, unknown>, string]> = [
      [
        { Mounts: [{ Type: 'bind', Source: '/tmp', Target: '/' }] },
        `invalid mount config for type "bind": invalid specification: destination can't be '/'`,
      ],
      [
        { Mounts: [{ Type: 'bind', Source: '/tmp', Target: '/x', BindOptions: { Propagation: 'bogus' } }] },
        'invalid mount config for type "bind": invalid propagation mode: bogus',
      ],
      [{ Tmpfs: { '/': '' } }, "invalid specification: destination can't be '/'"],
      [{ Tmpfs: { '/x': '' }, Binds: ['/tmp:/x'] }, 'Duplicate mount point: /x'],
      [{ Binds: ['/tmp:/x:ro,rw'] }, 'invalid mode: ro,rw'],
      [{ Runtime: 'bogus' }, 'Unknown runtime specified bogus'],
      [{ SecurityOpt: ['bogus'] }, 'invalid --security-opt 1: "bogus"'],
      [{ CapAdd: ['CAP_ALL'] }, 'invalid CapAdd: unknown capability: "CAP_ALL"'],
      [{ Isolation: 'hyperv' }, `Invalid isolation: "hyperv" - linux only supports 'default'`],
      [
        { IOMaximumBandwidth: 1 },
        'Invalid QoS settings: linux does not support configuration of maximum bandwidth',
      ],
      [{ NetworkMode: 'container:' }, 'Invalid network mode: invalid container format container:<name|id>'],
      [{ RestartPolicy: { Name: 'bogus' } }, "invalid restart policy 'bogus'"],
      [{ NanoCpus: 1e9, CpuQuota: 50000 }, 'Conflicting options: Nano CPUs and CPU Quota cannot both be set'],
      [{ ExtraHosts: ['badentry'] }, 'bad format for add-host: "badentry"'],
      // overlay2 without project quotas, as dockerd (which answers 500)
      [
        { StorageOpt: { size: '1G' } },
        "--storage-opt is supported only for overlay over xfs with 'pquota' mount option",
      ],
      [{ StorageOpt: { Foo: 'bar' } }, 'Unknown option foo'],
    ];
    for (const [hc, expected] of cases) {
      const r = await create({ Image: 'busybox', HostConfig: hc });
      assert.equal(r.status, 400, `${JSON.stringify(hc)} → ${r.status} ${r.text()}`);
      assert.equal(message(r), expected);
    }
    const cpus = hostSysInfo().cpus;
    const r = await create({ Image: 'busybox', HostConfig: { CpusetCpus: '0-200' } });
    assert.equal(r.status, 400);
    assert.equal(message(r), `Requested CPUs are not available - requested 0-200, available: ${cpus}`);
    assert.equal(await count(), before);

    // the CLI shows them as they are
    const cli = await engine.docker(['create', '--runtime', 'bogus', 'busybox']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /Unknown runtime specified bogus/);
    const storage = await engine.docker(['create', '--storage-opt', 'size=1G', 'busybox']);
    assert.notEqual(storage.code, 0);
    assert.match(storage.stderr, /--storage-opt is supported only for overlay over xfs/);
    assert.equal((await create({ Image: 'busybox', HostConfig: { StorageOpt: {} } })).status, 201);
    const cpuset = await engine.docker(['create', '--cpuset-cpus', '0-200', 'busybox']);
    assert.notEqual(cpuset.code, 0);
    assert.match(cpuset.stderr, /Requested CPUs are not available - requested 0-200/);
    assert.equal(await count(), before + 1);
  });

  it('accepts keys in any case, StrSlice strings and legacy top-level HostConfig fields', async () => {
    const lower = await create(
      { image: 'busybox', cmd: ['true'], hostconfig: { memory: 20000000, capadd: 'NET_ADMIN' } },
      '?name=cv-lower',
    );
    assert.equal(lower.status, 201, lower.text());
    const li = await inspect('cv-lower');
    assert.deepEqual(li.Config.Cmd, ['true']);
    assert.equal(li.HostConfig.Memory, 20000000);
    assert.deepEqual(li.HostConfig.CapAdd, ['NET_ADMIN']);

    const legacy = await create(
      { Image: 'busybox', Memory: 20000000, CpuShares: 512, Cpuset: '0', Privileged: true },
      '?name=cv-legacy',
    );
    assert.equal(legacy.status, 201, legacy.text());
    const gi = await inspect('cv-legacy');
    assert.equal(gi.HostConfig.Memory, 20000000);
    assert.equal(gi.HostConfig.CpuShares, 512);
    assert.equal(gi.HostConfig.CpusetCpus, '0');
    assert.equal(gi.HostConfig.Privileged, true);
    assert.equal('Memory' in gi.Config, false);

    // with a HostConfig, only Memory, MemorySwap, CpuShares, CpusetCpus come from the top level
    const both = await create(
      { Image: 'busybox', Memory: 20000000, Privileged: true, HostConfig: { CpuShares: 256 } },
      '?name=cv-both',
    );
    assert.equal(both.status, 201, both.text());
    const bi = await inspect('cv-both');
    assert.equal(bi.HostConfig.Memory, 20000000);
    assert.equal(bi.HostConfig.CpuShares, 256);
    assert.equal(bi.HostConfig.Privileged, false);

    // a capability given as one string starts (the runtime takes it)
    await engine.dockerOk(['start', 'cv-lower']);
    assert.equal((await engine.dockerOk(['wait', 'cv-lower'])).trim(), '0');
    await engine.dockerOk(['rm', 'cv-lower', 'cv-legacy', 'cv-both']);
  });

  it('--memory 64m: MemorySwap is twice that, as dockerd stores it', async () => {
    await engine.dockerOk(['create', '--name', 'cv-mem', '--memory', '64m', 'busybox', 'true']);
    const hc = (await inspect('cv-mem')).HostConfig;
    assert.equal(hc.Memory, 67108864);
    assert.equal(hc.MemorySwap, hostSysInfo().swapLimit ? 134217728 : -1);
    assert.equal(hc.OomKillDisable, false);
    await engine.dockerOk(['start', 'cv-mem']);
    assert.equal((await engine.dockerOk(['wait', 'cv-mem'])).trim(), '0');
    await engine.dockerOk(['rm', 'cv-mem']);
    // twice 2^62 leaves int64: unlimited swap, and the container starts
    const huge = await engine.request('POST', '/v1.44/containers/create?name=cv-huge', {
      body: { Image: 'busybox', Cmd: ['true'], HostConfig: { Memory: 2 ** 62 } },
    });
    assert.equal(huge.status, 201, huge.text());
    if (hostSysInfo().swapLimit) assert.equal((await inspect('cv-huge')).HostConfig.MemorySwap, -1);
    assert.equal((await engine.request('POST', '/v1.44/containers/cv-huge/start')).status, 204);
    assert.equal((await engine.dockerOk(['wait', 'cv-huge'])).trim(), '0');
    await engine.dockerOk(['rm', 'cv-huge']);
  });

  it('a request naming a container whose create is still under way gets a 404, never a 500', async () => {
    for (let round = 0; round < 5; round++) {
      const name = `cv-race${round}`;
      const results = await Promise.all([
        engine.request('POST', `/v1.44/containers/create?name=${name}`, {
          body: { Image: 'busybox', Cmd: ['true'] },
        }),
        engine.request('DELETE', `/v1.44/containers/${name}?force=1`),
        engine.request('POST', `/v1.44/containers/${name}/start`),
        engine.request('GET', `/v1.44/containers/${name}/json`),
      ]);
      for (const r of results) assert.ok(r.status < 500, `${r.status} ${r.text()}`);
      await engine.request('DELETE', `/v1.44/containers/${name}?force=1`);
    }
  });

  it('--network container:x survives `docker rename x y`: stored with the full ID', async () => {
    const target = await engine.dockerOk(['run', '-d', '--name', 'cv-x', 'busybox', 'sleep', '60']);
    const id = await engine.dockerOk([
      'create',
      '--name',
      'cv-joiner',
      '--network',
      'container:cv-x',
      '--ipc',
      'container:cv-x',
      '--pid',
      'container:cv-x',
      'busybox',
      'hostname',
    ]);
    const view = await inspect('cv-joiner');
    assert.equal(view.HostConfig.NetworkMode, `container:${target}`);
    assert.equal(view.HostConfig.IpcMode, `container:${target}`);
    assert.equal(view.HostConfig.PidMode, `container:${target}`);
    assert.equal(view.Config.Hostname, id.slice(0, 12));
    await engine.dockerOk(['rename', 'cv-x', 'cv-y']);
    await engine.dockerOk(['start', 'cv-joiner']);
    assert.equal((await engine.dockerOk(['wait', 'cv-joiner'])).trim(), '0');
    // at start it takes the hostname of the container whose network it joins, as dockerd does
    assert.equal((await engine.dockerOk(['logs', 'cv-joiner'])).trim(), target.slice(0, 12));
    await engine.dockerOk(['rm', '-f', 'cv-joiner', 'cv-y']);
  });

  it('docker create prints the warnings dockerd gives', async () => {
    const oom = await engine.docker(['create', '--name', 'cv-oom', '--oom-kill-disable', 'busybox', 'true']);
    assert.equal(oom.code, 0, oom.stderr);
    assert.match(
      oom.stderr,
      /WARNING: OOM killer is disabled for the container, but no memory limit is set, this can result in the system running out of resources\./,
    );
    assert.equal((await inspect('cv-oom')).HostConfig.OomKillDisable, true);

    const r = await create({ Image: 'busybox', HostConfig: { CpuPercent: 50 } }, '?name=cv-pct');
    assert.deepEqual(r.json<{ Warnings: string[] }>().Warnings, [
      'linux does not support CPU percent. Percent discarded.',
    ]);
    assert.equal((await inspect('cv-pct')).HostConfig.CpuPercent, 0);

    const blkio = await engine.docker([
      'create',
      '--name',
      'cv-blkio',
      '--blkio-weight',
      '500',
      'busybox',
      'true',
    ]);
    assert.equal(blkio.code, 0, blkio.stderr);
    if (hostSysInfo().blkioWeight) {
      assert.equal((await inspect('cv-blkio')).HostConfig.BlkioWeight, 500);
    } else {
      assert.match(
        blkio.stderr,
        /WARNING: Your kernel does not support Block I\/O weight or the cgroup is not mounted\. Weight discarded\./,
      );
      assert.equal((await inspect('cv-blkio')).HostConfig.BlkioWeight, 0);
      // discarded, so the container starts
      await engine.dockerOk(['start', 'cv-blkio']);
      assert.equal((await engine.dockerOk(['wait', 'cv-blkio'])).trim(), '0');
    }

    // API 1.41: KernelMemory still means something, and is deprecated
    const kmem = await engine.request('POST', '/v1.41/containers/create?name=cv-kmem', {
      body: { Image: 'busybox', HostConfig: { KernelMemory: 10 << 20 } },
    });
    assert.equal(kmem.status, 201, kmem.text());
    assert.ok(
      kmem
        .json<{ Warnings: string[] }>()
        .Warnings.includes(
          'Specifying a kernel memory limit is deprecated and will be removed in a future release.',
        ),
    );
    await engine.dockerOk(['rm', 'cv-oom', 'cv-pct', 'cv-blkio', 'cv-kmem']);
  });
});
