import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { ContainerInspect, ContainerSummary } from '../../../src/engine/containers/core/views.types.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

const exec = promisify(execFile);

type CreateAnswer = { Id: string; Warnings: string[] | null; message?: string };

/**
 * The containers endpoints from API 1.45 to 1.56 (docs/api-versions.md): what each version adds,
 * drops or refuses, over raw HTTP at versions on both sides of each change, and through the
 * docker CLI 28 (which speaks 1.50).
 */
describe('API versions: containers', () => {
  let engine: TestEngine;
  let dir: string;
  const made: string[] = [];

  const create = async (version: string, body: Record<string, unknown>) => {
    const r = await engine.request('POST', `/v${version}/containers/create`, {
      body: { Image: 'busybox', ...body },
    });
    const answer = r.json<CreateAnswer>();
    if (r.status === 201) made.push(answer.Id);
    return { status: r.status, ...answer };
  };
  const inspect = async (version: string, id: string) =>
    (await engine.request('GET', `/v${version}/containers/${id}/json`)).json<ContainerInspect>();
  /** Start, wait for the exit, answer the exit code and the output. */
  const run = async (id: string) => {
    const start = await engine.request('POST', `/v1.50/containers/${id}/start`);
    assert.equal(start.status, 204, start.text());
    const wait = (await engine.request('POST', `/v1.50/containers/${id}/wait`)).json<{
      StatusCode: number;
    }>();
    const logs = await engine.docker(['logs', id]);
    return { code: wait.StatusCode, out: `${logs.stdout}${logs.stderr}`.trim() };
  };

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    dir = await mkdtemp(join(tmpdir(), 'berth-versions-'));
  });
  after(async () => {
    for (const id of made) await engine.request('DELETE', `/v1.50/containers/${id}?force=1&v=1`);
    await engine?.destroy();
    await exec('umount', [join(dir, 'host', 'sub')]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('1.45: a volume subpath is mounted (a 400 before), and must exist', async () => {
    await engine.dockerOk(['volume', 'create', 'subvol']);
    await engine.dockerOk([
      'run',
      '--rm',
      '-v',
      'subvol:/v',
      'busybox',
      'sh',
      '-c',
      'mkdir -p /v/a/b && echo deep > /v/a/b/f',
    ]);
    const mount = { Type: 'volume', Source: 'subvol', Target: '/s', VolumeOptions: { Subpath: 'a/b' } };
    const old = await create('1.44', { HostConfig: { Mounts: [mount] } });
    assert.equal(old.status, 400);
    assert.equal(old.message, 'VolumeOptions.Subpath needs API v1.45 or newer');
    const c = await create('1.45', { Cmd: ['cat', '/s/f'], HostConfig: { Mounts: [mount] } });
    assert.equal(c.status, 201, c.message);
    assert.deepEqual(await run(c.Id), { code: 0, out: 'deep' });
    // through the docker CLI 28
    assert.equal(
      await engine.dockerOk([
        'run',
        '--rm',
        '--mount',
        'type=volume,src=subvol,dst=/s,volume-subpath=a',
        'busybox',
        'cat',
        '/s/b/f',
      ]),
      'deep',
    );
    const escaping = await create('1.45', {
      HostConfig: { Mounts: [{ ...mount, VolumeOptions: { Subpath: '../x' } }] },
    });
    assert.equal(escaping.status, 400);
    assert.match(escaping.message ?? '', /subpath must be a relative path within the volume/);
    const missing = await create('1.45', {
      HostConfig: { Mounts: [{ ...mount, VolumeOptions: { Subpath: 'nope' } }] },
    });
    assert.equal(missing.status, 201);
    const start = await engine.request('POST', `/v1.45/containers/${missing.Id}/start`);
    assert.equal(start.status, 400);
    assert.match(start.json<{ message: string }>().message, /cannot access path .*nope/);
  });

  it('1.46: tmpfs Mount options (exec), validated', async () => {
    const tmpfs = (options?: string[][]) => ({
      Type: 'tmpfs',
      Target: '/t',
      ...(options ? { TmpfsOptions: { Options: options } } : {}),
    });
    const cmd = ['sh', '-c', 'cp /bin/busybox /t/true && /t/true && echo ran'];
    const exe = await create('1.46', { Cmd: cmd, HostConfig: { Mounts: [tmpfs([['exec']])] } });
    assert.deepEqual(await run(exe.Id), { code: 0, out: 'ran' });
    const noexec = await create('1.46', { Cmd: cmd, HostConfig: { Mounts: [tmpfs()] } });
    const r = await run(noexec.Id);
    assert.notEqual(r.code, 0, 'tmpfs is noexec by default');
    const bad = await create('1.46', { HostConfig: { Mounts: [tmpfs([['suid']])] } });
    assert.equal(bad.status, 400);
    assert.match(bad.message ?? '', /invalid option: suid/);
  });

  it('1.48: image mounts (read-only, a subpath), the image in use; a 400 before', async () => {
    const mount = { Type: 'image', Source: 'busybox', Target: '/img' };
    const old = await create('1.47', { HostConfig: { Mounts: [mount] } });
    assert.equal(old.status, 400);
    assert.equal(old.message, 'Mount type "Image" needs API v1.48 or newer');
    const c = await create('1.48', {
      Cmd: ['sh', '-c', 'ls /img/busybox && ! touch /img/x 2>/dev/null && echo ro'],
      HostConfig: { Mounts: [{ ...mount, ImageOptions: { Subpath: 'bin' } }] },
    });
    assert.equal(c.status, 201, c.message);
    assert.deepEqual(await run(c.Id), { code: 0, out: '/img/busybox\nro' });
    const mounts = (await inspect('1.48', c.Id)).Mounts;
    assert.equal(mounts[0]?.Type, 'image');
    assert.equal(mounts[0]?.RW, false);
    // the image is in use while the container exists
    const rmi = await engine.docker(['rmi', 'busybox']);
    assert.notEqual(rmi.code, 0);
    assert.match(rmi.stderr, /conflict|being used/);
    const missing = await create('1.48', { HostConfig: { Mounts: [{ ...mount, Source: 'nosuchimage' }] } });
    assert.equal(missing.status, 400);
    assert.match(missing.message ?? '', /No such image: nosuchimage/);
    // the CLI 28 has --mount type=image; the snapshot goes with the container
    assert.equal(
      await engine.dockerOk([
        'run',
        '--rm',
        '--mount',
        'type=image,src=busybox,dst=/i',
        'busybox',
        'ls',
        '/i/bin/sh',
      ]),
      '/i/bin/sh',
    );
    const snapshot = createHash('sha256').update(`${c.Id}-src=busybox-dst=/img`).digest('hex');
    assert.ok(existsSync(join(engine.dataRoot, 'overlay', snapshot)));
    await engine.request('DELETE', `/v1.48/containers/${c.Id}`);
    assert.ok(
      !existsSync(join(engine.dataRoot, 'overlay', snapshot)),
      'the snapshot goes with the container',
    );
    assert.ok(
      !readFileSync('/proc/self/mountinfo', 'utf8').includes(snapshot),
      'nothing of it stays mounted',
    );
  });

  it('1.44: read-only binds are read-only all the way down; before, only at their top', async () => {
    const host = join(dir, 'host');
    await mkdir(join(host, 'sub'), { recursive: true });
    await exec('mount', ['-t', 'tmpfs', 'tmpfs', join(host, 'sub')]);
    const cmd = ['sh', '-c', 'touch /d/sub/x 2>/dev/null && echo wrote || echo refused'];
    const now = await create('1.44', { Cmd: cmd, HostConfig: { Binds: [`${host}:/d:ro`] } });
    assert.equal((await run(now.Id)).out, 'refused');
    const old = await create('1.43', { Cmd: cmd, HostConfig: { Binds: [`${host}:/d:ro`] } });
    assert.equal((await run(old.Id)).out, 'wrote', 'non-recursive before 1.44');
    const nonRec = await create('1.44', {
      Cmd: cmd,
      HostConfig: {
        Mounts: [
          {
            Type: 'bind',
            Source: host,
            Target: '/d',
            ReadOnly: true,
            BindOptions: { ReadOnlyNonRecursive: true },
          },
        ],
      },
    });
    assert.equal((await run(nonRec.Id)).out, 'wrote');
    const force = await create('1.43', {
      HostConfig: {
        Mounts: [
          {
            Type: 'bind',
            Source: host,
            Target: '/d',
            ReadOnly: true,
            BindOptions: { ReadOnlyForceRecursive: true },
          },
        ],
      },
    });
    assert.equal(force.status, 400);
    assert.equal(force.message, 'BindOptions.ReadOnlyForceRecursive needs API v1.44 or newer');
  });

  it('the container-wide MAC address: moved to the endpoint before 1.44, deprecated to 1.51, ignored from 1.52', async () => {
    const mac = '02:42:ac:11:00:99';
    const macOf = async (id: string) => {
      await run(id);
      return (await engine.dockerOk(['logs', id])).trim();
    };
    const cmd = ['cat', '/sys/class/net/eth0/address'];
    const old = await create('1.43', { Cmd: cmd, MacAddress: mac });
    assert.equal(old.Warnings?.length ?? 0, 0);
    assert.equal(await macOf(old.Id), mac);
    const dep = await create('1.44', { Cmd: cmd, MacAddress: mac });
    assert.deepEqual(dep.Warnings, [
      'The container-wide MacAddress field is now deprecated. It should be specified in EndpointsConfig instead.',
    ]);
    assert.equal(await macOf(dep.Id), mac);
    const clash = await create('1.44', {
      MacAddress: mac,
      NetworkingConfig: { EndpointsConfig: { bridge: { MacAddress: '02:42:ac:11:00:98' } } },
    });
    assert.equal(clash.status, 400);
    assert.match(clash.message ?? '', /must match the endpoint-specific MAC address/);
    const ignored = await create('1.52', { Cmd: cmd, MacAddress: mac });
    assert.equal(ignored.Warnings?.length ?? 0, 0);
    assert.notEqual(await macOf(ignored.Id), mac);
    assert.equal((await inspect('1.52', ignored.Id)).Config.MacAddress, undefined);
    const multi = await create('1.43', { NetworkingConfig: { EndpointsConfig: { a: {}, b: {} } } });
    assert.equal(multi.status, 400);
    assert.equal(multi.message, 'Container cannot be created with multiple network endpoints: a, b');
  });

  it('interface sysctls: migrated to the endpoint up to 1.47, a 400 from 1.48; endpoint sysctls applied', async () => {
    const cmd = ['cat', '/proc/sys/net/ipv4/conf/eth0/log_martians'];
    const old = await create('1.47', {
      Cmd: cmd,
      HostConfig: { Sysctls: { 'net.ipv4.conf.eth0.log_martians': '1' } },
    });
    assert.equal(old.status, 201, old.message);
    assert.deepEqual(old.Warnings, [
      'Migrated sysctl "net.ipv4.conf.eth0.log_martians" to DriverOpts{"com.docker.network.endpoint.sysctls":"net.ipv4.conf.IFNAME.log_martians=1"}.',
    ]);
    assert.deepEqual(await run(old.Id), { code: 0, out: '1' });
    const refused = await create('1.48', {
      HostConfig: { Sysctls: { 'net.ipv4.conf.eth0.log_martians': '1' } },
    });
    assert.equal(refused.status, 400);
    assert.equal(
      refused.message,
      `interface specific sysctl setting "net.ipv4.conf.eth0.log_martians" must be supplied using driver option 'com.docker.network.endpoint.sysctls'`,
    );
    const driverOpts = (value: string) => ({
      EndpointsConfig: { bridge: { DriverOpts: { 'com.docker.network.endpoint.sysctls': value } } },
    });
    const ep = await create('1.48', {
      Cmd: cmd,
      NetworkingConfig: driverOpts('net.ipv4.conf.IFNAME.log_martians=1'),
    });
    assert.equal(ep.status, 201, ep.message);
    assert.deepEqual(await run(ep.Id), { code: 0, out: '1' });
    const bad = await create('1.48', { NetworkingConfig: driverOpts('net.core.somaxconn=5') });
    assert.equal(bad.status, 400);
    assert.match(bad.message ?? '', /unrecognised network interface sysctl 'net.core.somaxconn=5'/);
  });

  it('create warnings: VolumeDriver with volume Mounts (1.48), empty port-binding lists (1.52)', async () => {
    const volumeDriver = {
      HostConfig: { VolumeDriver: 'local', Mounts: [{ Type: 'volume', Target: '/v' }] },
    };
    assert.equal((await create('1.47', volumeDriver)).Warnings?.length ?? 0, 0);
    assert.match(
      (await create('1.48', volumeDriver)).Warnings?.[0] ?? '',
      /container-wide volume-driver configuration is ignored/,
    );
    const ports = { ExposedPorts: { '80/tcp': {} }, HostConfig: { PortBindings: { '80/tcp': [] } } };
    const empty =
      'Following container port(s) have an empty list of port-bindings: 80/tcp. Such bindings will be discarded in a future version.';
    assert.ok(!(await create('1.51', ports)).Warnings?.includes(empty));
    assert.ok((await create('1.52', ports)).Warnings?.includes(empty));
  });

  it('inspect: NetworkMode default is the bridge from 1.45; GwPriority from 1.48; from 1.52 the trimmed NetworkSettings', async () => {
    const old = await create('1.44', { Cmd: ['true'] });
    assert.equal((await inspect('1.44', old.Id)).HostConfig.NetworkMode, 'default');
    const c = await create('1.45', {
      Cmd: ['sleep', '60'],
      NetworkingConfig: { EndpointsConfig: { default: { GwPriority: 3 } } },
    });
    assert.equal((await inspect('1.45', c.Id)).HostConfig.NetworkMode, 'bridge');
    await engine.request('POST', `/v1.50/containers/${c.Id}/start`);
    const v47 = await inspect('1.47', c.Id);
    assert.equal('GwPriority' in (v47.NetworkSettings.Networks.bridge ?? {}), false);
    // 1.45-1.47 zero GwPriority at create; this one was made at 1.45
    assert.equal((await inspect('1.48', c.Id)).NetworkSettings.Networks.bridge?.GwPriority, 0);
    const v51 = await inspect('1.51', c.Id);
    assert.match(v51.NetworkSettings.IPAddress ?? '', /^\d+\.\d+\.\d+\.\d+$/);
    assert.equal(v51.Config.OnBuild, null);
    const v52 = await inspect('1.52', c.Id);
    assert.deepEqual(Object.keys(v52.NetworkSettings), ['SandboxID', 'SandboxKey', 'Ports', 'Networks']);
    assert.equal(v52.NetworkSettings.Networks.bridge?.IPAddress, v51.NetworkSettings.IPAddress);
    assert.equal('OnBuild' in v52.Config, false);
    assert.equal('KernelMemoryTCP' in v52.HostConfig, false);
    const gw = await create('1.48', { NetworkingConfig: { EndpointsConfig: { bridge: { GwPriority: 7 } } } });
    assert.equal((await inspect('1.48', gw.Id)).NetworkSettings.Networks.bridge?.GwPriority, 7);
    await engine.request('POST', `/v1.50/containers/${c.Id}/kill`);
  });

  it('list: Annotations from 1.46, Health from 1.52; stats os_type from 1.52', async () => {
    const c = await create('1.46', {
      Cmd: ['sleep', '60'],
      HostConfig: { Annotations: { 'berth.test': 'yes' } },
    });
    await engine.request('POST', `/v1.50/containers/${c.Id}/start`);
    const row = async (version: string) =>
      (await engine.request('GET', `/v${version}/containers/json?filters={"id":["${c.Id}"]}`)).json<
        ContainerSummary[]
      >()[0];
    assert.equal((await row('1.45'))?.HostConfig.Annotations, undefined);
    assert.deepEqual((await row('1.46'))?.HostConfig.Annotations, { 'berth.test': 'yes' });
    assert.equal((await row('1.51'))?.Health, undefined);
    assert.deepEqual((await row('1.52'))?.Health, { Status: 'none', FailingStreak: 0 });
    const stats = async (version: string) =>
      (await engine.request('GET', `/v${version}/containers/${c.Id}/stats?stream=0&one-shot=1`)).json<{
        os_type?: string;
      }>();
    assert.equal((await stats('1.51')).os_type, undefined);
    assert.equal((await stats('1.52')).os_type, 'linux');
    await engine.request('POST', `/v1.50/containers/${c.Id}/kill`);
  });

  it('1.55: update takes the blkio device limits (ignored before)', async () => {
    const device = existsSync('/dev/vda') ? '/dev/vda' : undefined;
    if (!device) return;
    const c = await create('1.55', { Cmd: ['sleep', '60'] });
    await engine.request('POST', `/v1.55/containers/${c.Id}/start`);
    const limit = [{ Path: device, Rate: 1048576 }];
    const before = await engine.request('POST', `/v1.54/containers/${c.Id}/update`, {
      body: { BlkioDeviceReadBps: limit },
    });
    assert.equal(before.status, 200, before.text());
    assert.equal((await inspect('1.55', c.Id)).HostConfig.BlkioDeviceReadBps?.length ?? 0, 0);
    const now = await engine.request('POST', `/v1.55/containers/${c.Id}/update`, {
      body: { BlkioDeviceReadBps: limit },
    });
    assert.equal(now.status, 200, now.text());
    assert.deepEqual((await inspect('1.55', c.Id)).HostConfig.BlkioDeviceReadBps, limit);
    const cgroup = `/sys/fs/cgroup/blkio/berth/${c.Id}/blkio.throttle.read_bps_device`;
    if (existsSync(cgroup)) assert.match(readFileSync(cgroup, 'utf8'), / 1048576/);
    await engine.request('POST', `/v1.55/containers/${c.Id}/update`, { body: { BlkioDeviceReadBps: [] } });
    assert.deepEqual((await inspect('1.55', c.Id)).HostConfig.BlkioDeviceReadBps, []);
    await engine.request('POST', `/v1.50/containers/${c.Id}/kill`);
  });

  it('1.54: logs as JSON records (format=json or a JSON record Accept), plain streams before', async () => {
    const c = await create('1.54', { Cmd: ['sh', '-c', 'echo out; echo err >&2'] });
    await run(c.Id);
    const json = await engine.request('GET', `/v1.54/containers/${c.Id}/logs?stdout=1&stderr=1&format=json`);
    assert.equal(json.status, 200);
    assert.equal(json.headers['content-type'], 'application/x-ndjson');
    const records = json
      .text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { Line: string; Source: string; Timestamp: string });
    assert.deepEqual(records.map((r) => [r.Line, r.Source]).sort(), [
      ['err\n', 'stderr'],
      ['out\n', 'stdout'],
    ]);
    assert.match(records[0]?.Timestamp ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    const seq = await engine.request('GET', `/v1.54/containers/${c.Id}/logs?stdout=1`, {
      headers: { Accept: 'application/json-seq' },
    });
    assert.equal(seq.headers['content-type'], 'application/json-seq');
    assert.equal(seq.body[0], 0x1e);
    const bad = await engine.request('GET', `/v1.54/containers/${c.Id}/logs?stdout=1&format=xml`);
    assert.equal(bad.status, 400);
    const old = await engine.request('GET', `/v1.53/containers/${c.Id}/logs?stdout=1&format=json`);
    assert.equal(old.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
  });

  it('the docker CLI 28 negotiates 1.50 and runs, inspects and lists through it', async () => {
    const version = await engine.dockerOk([
      'version',
      '--format',
      '{{.Client.APIVersion}} {{.Server.APIVersion}}',
    ]);
    assert.equal(version, '1.50 1.56');
    const out = await engine.dockerOk(['run', '--rm', '--name', 'cli150', 'busybox', 'echo', 'hi']);
    assert.equal(out, 'hi');
    await writeFile(join(dir, 'marker'), 'm');
    const id = await engine.dockerOk(['run', '-d', '-v', `${dir}:/h:ro`, 'busybox', 'sleep', '60']);
    made.push(id);
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.HostConfig.NetworkMode}}', id]), 'bridge');
    assert.match(await engine.dockerOk(['ps', '--format', '{{.ID}} {{.Status}}']), /Up /);
    assert.equal(await engine.dockerOk(['exec', id, 'cat', '/h/marker']), 'm');
    await engine.dockerOk(['rm', '-f', id]);
  });
});
