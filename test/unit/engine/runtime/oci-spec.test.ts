import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ContainerConfig, HostConfig } from '../../../../src/common/docker-types.js';
import { isKind } from '../../../../src/common/errors.js';
import { defaultCapabilities, tweakCapabilities } from '../../../../src/engine/runtime/oci/capabilities.js';
import { parseDeviceCgroupRule } from '../../../../src/engine/runtime/oci/devices.js';
import { buildExecProcess } from '../../../../src/engine/runtime/oci/exec.js';
import {
  capabilityNames,
  capsFromMask,
  type DeviceNode,
  parseProcLimits,
  type SpecHost,
  splitDev,
} from '../../../../src/engine/runtime/oci/host.js';
import { buildSpec, specToJson } from '../../../../src/engine/runtime/oci/index.js';
import { replaceOrAppendEnv } from '../../../../src/engine/runtime/oci/process-env.js';
import { resolveInRoot } from '../../../../src/engine/runtime/oci/rootfs-path.js';
import type { OciSpec } from '../../../../src/engine/runtime/oci/spec.types.js';
import type { SpecInput } from '../../../../src/engine/runtime/runtime.types.js';

type Spec = OciSpec;

const devices: Record<string, DeviceNode> = {
  '/dev/sda': { path: '/dev/sda', type: 'b', major: 8, minor: 0, fileMode: 0o660, uid: 0, gid: 6 },
  '/dev/fuse': { path: '/dev/fuse', type: 'c', major: 10, minor: 229, fileMode: 0o666, uid: 0, gid: 0 },
  '/dev/snd/pcm0': {
    path: '/dev/snd/pcm0',
    type: 'c',
    major: 116,
    minor: 2,
    fileMode: 0o660,
    uid: 0,
    gid: 29,
  },
  '/dev/snd/timer': {
    path: '/dev/snd/timer',
    type: 'c',
    major: 116,
    minor: 33,
    fileMode: 0o660,
    uid: 0,
    gid: 29,
  },
};

function fakeHost(over: Partial<SpecHost> = {}): SpecHost {
  return {
    processLimits: async () =>
      new Map([
        ['nofile', { soft: 20000, hard: 20000 }],
        ['nproc', { soft: 1000, hard: 2000 }],
        ['core', { soft: 0, hard: -1 }],
      ]),
    capabilityBound: async () => new Set(capabilityNames.filter((c) => c !== 'CAP_SYS_RESOURCE')),
    sysctlExists: async () => true,
    swapLimitSupported: async () => true,
    statDevice: async (path) => {
      if (path === '/dev/snd') return null;
      const d = devices[path];
      if (!d) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
      return d;
    },
    listDevices: async (dir) => Object.keys(devices).filter((p) => p.startsWith(`${dir}/`)),
    hostDevices: async () => [devices['/dev/sda']!],
    initPath: async () => '/usr/bin/tini-static',
    ...over,
  };
}

let dir: string;
let rootfs: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-spec-'));
  rootfs = join(dir, 'rootfs');
  await mkdir(join(rootfs, 'etc'), { recursive: true });
  await writeFile(
    join(rootfs, 'etc/passwd'),
    [
      'root:x:0:0:root:/root:/bin/sh',
      'daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin',
      'app:x:1000:1000:App:/home/app:/bin/sh',
      '# comment',
      '',
    ].join('\n'),
  );
  await writeFile(
    join(rootfs, 'etc/group'),
    [
      'root:x:0:',
      'daemon:x:1:',
      'wheel:x:10:app,root',
      'audio:x:29:app',
      'app:x:1000:',
      'docker:x:999:',
    ].join('\n'),
  );
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function input(
  config: ContainerConfig = {},
  hostConfig: HostConfig = {},
  extra: Partial<SpecInput> = {},
): SpecInput {
  return {
    id: 'c0ffee',
    rootfs,
    config: { Cmd: ['sh'], Hostname: 'c0ffee', ...config },
    hostConfig,
    hostsPath: '/data/c/hosts',
    hostnamePath: '/data/c/hostname',
    resolvConfPath: '/data/c/resolv.conf',
    cgroupsPath: '/berth/c0ffee',
    mounts: [],
    ...extra,
  };
}

async function spec(
  config: ContainerConfig = {},
  hostConfig: HostConfig = {},
  extra: Partial<SpecInput> = {},
  host = fakeHost(),
  warnings: string[] = [],
): Promise<Spec> {
  return await buildSpec(input(config, hostConfig, extra), { host, warnings });
}

async function rejectsInvalid(p: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isKind(err, 'InvalidParameter'), `expected InvalidParameter, got ${String(err)}`);
    assert.match((err as Error).message, message);
    return true;
  });
}

describe('buildSpec defaults (as dockerd)', () => {
  it('makes the process', async () => {
    const s = await spec({ Entrypoint: ['/bin/sh', '-c'], Cmd: ['echo hi'] });
    assert.equal(s.ociVersion, '1.0.2-dev');
    assert.deepEqual(s.process.args, ['/bin/sh', '-c', 'echo hi']);
    assert.equal(s.process.cwd, '/');
    assert.equal(s.process.terminal, false);
    assert.deepEqual(s.process.env, [
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      'HOSTNAME=c0ffee',
    ]);
    assert.deepEqual(s.process.user, { uid: 0, gid: 0, additionalGids: [0, 10] });
    assert.deepEqual(s.process.capabilities.bounding, defaultCapabilities);
    assert.deepEqual(s.process.capabilities.effective, defaultCapabilities);
    assert.deepEqual(s.process.capabilities.permitted, defaultCapabilities);
    assert.equal(s.process.noNewPrivileges, false);
    assert.equal(s.process.oomScoreAdj, 0);
    assert.deepEqual(s.root, { path: rootfs, readonly: false });
    assert.equal(s.hostname, 'c0ffee');
  });

  it('has the default namespaces, no cgroup namespace (host mode on cgroup v1)', async () => {
    const s = await spec();
    assert.deepEqual(s.linux.namespaces, [
      { type: 'mount' },
      { type: 'network' },
      { type: 'uts' },
      { type: 'pid' },
      { type: 'ipc' },
    ]);
    assert.equal(s.linux.cgroupsPath, '/berth/c0ffee');
  });

  it('has the default mounts, network files and a 64 MiB /dev/shm', async () => {
    const s = await spec();
    assert.deepEqual(
      s.mounts.map((m) => [m.destination, m.type, m.source, m.options.join(',')]),
      [
        ['/proc', 'proc', 'proc', 'nosuid,noexec,nodev'],
        ['/dev', 'tmpfs', 'tmpfs', 'nosuid,strictatime,mode=755,size=65536k'],
        ['/dev/pts', 'devpts', 'devpts', 'nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5'],
        ['/sys', 'sysfs', 'sysfs', 'nosuid,noexec,nodev,ro'],
        ['/sys/fs/cgroup', 'cgroup', 'cgroup', 'ro,nosuid,noexec,nodev'],
        ['/dev/mqueue', 'mqueue', 'mqueue', 'nosuid,noexec,nodev'],
        ['/dev/shm', 'tmpfs', 'shm', 'nosuid,noexec,nodev,mode=1777,size=67108864'],
        ['/etc/resolv.conf', 'bind', '/data/c/resolv.conf', 'rbind,rprivate'],
        ['/etc/hostname', 'bind', '/data/c/hostname', 'rbind,rprivate'],
        ['/etc/hosts', 'bind', '/data/c/hosts', 'rbind,rprivate'],
      ],
    );
  });

  it('masks and write-protects what dockerd does', async () => {
    const s = await spec();
    assert.deepEqual(s.linux.maskedPaths, [
      '/proc/asound',
      '/proc/acpi',
      '/proc/kcore',
      '/proc/keys',
      '/proc/latency_stats',
      '/proc/timer_list',
      '/proc/timer_stats',
      '/proc/sched_debug',
      '/proc/scsi',
      '/sys/firmware',
    ]);
    assert.deepEqual(s.linux.readonlyPaths, [
      '/proc/bus',
      '/proc/fs',
      '/proc/irq',
      '/proc/sys',
      '/proc/sysrq-trigger',
    ]);
  });

  it('denies devices but the default set', async () => {
    const s = await spec();
    assert.deepEqual(s.linux.devices, []);
    assert.deepEqual(s.linux.resources.devices, [
      { allow: false, access: 'rwm' },
      { allow: true, type: 'c', major: 1, minor: 5, access: 'rwm' },
      { allow: true, type: 'c', major: 1, minor: 3, access: 'rwm' },
      { allow: true, type: 'c', major: 1, minor: 9, access: 'rwm' },
      { allow: true, type: 'c', major: 1, minor: 8, access: 'rwm' },
      { allow: true, type: 'c', major: 5, minor: 0, access: 'rwm' },
      { allow: true, type: 'c', major: 5, minor: 1, access: 'rwm' },
      { allow: false, type: 'c', major: 10, minor: 229, access: 'rwm' },
    ]);
  });

  it('sets the default sysctls of a private network and RLIMIT_NOFILE within the daemon hard limit', async () => {
    const s = await spec();
    assert.deepEqual(s.linux.sysctl, {
      'net.ipv4.ping_group_range': '0 2147483647',
      'net.ipv4.ip_unprivileged_port_start': '0',
      'net.ipv6.conf.all.disable_ipv6': '1',
      'net.ipv6.conf.default.disable_ipv6': '1',
    });
    assert.deepEqual(s.process.rlimits, [{ type: 'RLIMIT_NOFILE', soft: 20000, hard: 20000 }]);
    const roomy = fakeHost({
      processLimits: async () => new Map([['nofile', { soft: 1024, hard: 4194304 }]]),
    });
    const s2 = await spec({}, {}, {}, roomy);
    assert.deepEqual(s2.process.rlimits, [{ type: 'RLIMIT_NOFILE', soft: 1048576, hard: 1048576 }]);
  });

  it('rejects a container without a command', async () => {
    await rejectsInvalid(spec({ Cmd: [] }), /No command specified/);
  });
});

describe('buildSpec: environment, tty, hostname', () => {
  it('lets Config.Env override, unset and add', async () => {
    const s = await spec({ Env: ['PATH=/bin', 'FOO=bar', 'HOSTNAME', 'A=1=2'], Tty: true });
    assert.deepEqual(s.process.env, ['PATH=/bin', 'TERM=xterm', 'FOO=bar', 'A=1=2']);
    assert.equal(s.process.terminal, true);
  });

  it('keeps duplicates of new keys and replaces known ones (moby ReplaceOrAppendEnvValues)', () => {
    assert.deepEqual(replaceOrAppendEnv(['A=1', 'B=2'], ['A=3', 'C=1', 'C=2', 'B']), ['A=3', 'C=1', 'C=2']);
  });

  it('sets the domain name through kernel.domainname and the console size', async () => {
    const s = await spec({ Domainname: 'example.org', Tty: true }, { ConsoleSize: [30, 100] });
    assert.equal(s.linux.sysctl['kernel.domainname'], 'example.org');
    assert.deepEqual(s.process.consoleSize, { height: 30, width: 100 });
  });
});

describe('buildSpec: capabilities', () => {
  it('adds and drops with or without CAP_, in any case', async () => {
    const s = await spec({}, { CapAdd: ['net_admin', 'CAP_SYS_PTRACE'], CapDrop: ['chown', 'Cap_Kill'] });
    const caps = s.process.capabilities.bounding!;
    assert.ok(caps.includes('CAP_NET_ADMIN') && caps.includes('CAP_SYS_PTRACE'));
    assert.ok(!caps.includes('CAP_CHOWN') && !caps.includes('CAP_KILL'));
    assert.equal(caps.length, defaultCapabilities.length);
  });

  it('handles ALL in CapAdd and CapDrop', () => {
    assert.deepEqual(tweakCapabilities(['NET_ADMIN'], ['ALL'], false), ['CAP_NET_ADMIN']);
    const all = tweakCapabilities(['all'], ['MKNOD'], false);
    assert.equal(all.length, capabilityNames.length - 1);
    assert.ok(!all.includes('CAP_MKNOD'));
  });

  it('rejects unknown capabilities', async () => {
    await rejectsInvalid(spec({}, { CapAdd: ['NOT_A_CAP'] }), /unknown capability: "CAP_NOT_A_CAP"/);
  });

  it('gives a non-root user only the bounding set', async () => {
    const s = await spec({ User: 'app' });
    assert.deepEqual(Object.keys(s.process.capabilities), ['bounding']);
  });

  it('never asks for a capability the daemon lacks', async () => {
    const s = await spec({}, { CapAdd: ['ALL'] });
    assert.ok(!s.process.capabilities.bounding!.includes('CAP_SYS_RESOURCE'));
    assert.equal(s.process.capabilities.bounding!.length, capabilityNames.length - 1);
  });
});

describe('buildSpec: privileged', () => {
  it('gets all capabilities, host devices, rw /sys and cgroups, nothing masked', async () => {
    const s = await spec({}, { Privileged: true });
    assert.equal(s.process.capabilities.bounding!.length, capabilityNames.length - 1);
    assert.deepEqual(s.linux.maskedPaths, []);
    assert.deepEqual(s.linux.readonlyPaths, []);
    assert.deepEqual(s.mounts.find((m) => m.destination === '/sys')!.options, ['nosuid', 'noexec', 'nodev']);
    assert.deepEqual(s.mounts.find((m) => m.destination === '/sys/fs/cgroup')!.options, [
      'nosuid',
      'noexec',
      'nodev',
    ]);
    assert.deepEqual(s.linux.devices, [devices['/dev/sda']]);
    assert.deepEqual(s.linux.resources.devices, [{ allow: true, access: 'rwm' }]);
  });
});

describe('buildSpec: namespaces and modes', () => {
  it('uses the host network: no netns, no network sysctls, net.* refused', async () => {
    const s = await spec({}, { NetworkMode: 'host' });
    assert.ok(!s.linux.namespaces.some((n) => n.type === 'network'));
    assert.deepEqual(s.linux.sysctl, {});
    await rejectsInvalid(
      spec({}, { NetworkMode: 'host', Sysctls: { 'net.core.somaxconn': '1024' } }),
      /network namespace/,
    );
    const s2 = await spec({}, {}, { netns: 'host' });
    assert.ok(!s2.linux.namespaces.some((n) => n.type === 'network'));
  });

  it('joins a network namespace path', async () => {
    const s = await spec(
      {},
      { NetworkMode: 'bridge', Sysctls: { 'net.ipv4.ip_forward': '1' } },
      { netns: '/run/netns/x' },
    );
    assert.deepEqual(
      s.linux.namespaces.find((n) => n.type === 'network'),
      { type: 'network', path: '/run/netns/x' },
    );
    assert.equal(s.linux.sysctl['net.ipv4.ip_forward'], '1');
    const c = await spec({}, { NetworkMode: 'container:abc' }, { netns: '/proc/42/ns/net' });
    assert.equal(c.linux.sysctl['net.ipv4.ping_group_range'], undefined);
    await rejectsInvalid(spec({}, { NetworkMode: 'container:abc' }), /namespace path/);
  });

  it('NetworkMode none keeps a private namespace (loopback only)', async () => {
    const s = await spec({}, { NetworkMode: 'none' });
    assert.deepEqual(
      s.linux.namespaces.find((n) => n.type === 'network'),
      { type: 'network' },
    );
  });

  it('shares pid, ipc, uts with the host or a container', async () => {
    const s = await spec({ Domainname: 'x.org' }, { PidMode: 'host', IpcMode: 'host', UTSMode: 'host' });
    assert.deepEqual(
      s.linux.namespaces.map((n) => n.type),
      ['mount', 'network'],
    );
    assert.equal(s.hostname, '');
    assert.equal(s.linux.sysctl['kernel.domainname'], undefined);
    assert.deepEqual(
      s.mounts.find((m) => m.destination === '/dev/shm'),
      {
        destination: '/dev/shm',
        type: 'bind',
        source: '/dev/shm',
        options: ['rbind', 'rprivate'],
      },
    );
    const j = await spec(
      {},
      { PidMode: 'container:a', IpcMode: 'container:a' },
      { joinNamespaces: { pid: '/proc/7/ns/pid', ipc: '/proc/7/ns/ipc', uts: '/proc/7/ns/uts' } },
    );
    assert.deepEqual(j.linux.namespaces.slice(2), [
      { type: 'uts', path: '/proc/7/ns/uts' },
      { type: 'pid', path: '/proc/7/ns/pid' },
      { type: 'ipc', path: '/proc/7/ns/ipc' },
    ]);
    await rejectsInvalid(spec({}, { PidMode: 'container:a' }), /namespace path/);
    await rejectsInvalid(spec({}, { IpcMode: 'bogus' }), /invalid IPC mode/);
  });

  it('adds a cgroup namespace for CgroupnsMode private', async () => {
    const s = await spec({}, { CgroupnsMode: 'private' });
    assert.deepEqual(s.linux.namespaces.at(-1), { type: 'cgroup' });
    await rejectsInvalid(spec({}, { CgroupnsMode: 'weird' }), /invalid cgroup namespace mode/);
  });

  it('validates namespaced sysctls', async () => {
    const s = await spec({}, { Sysctls: { 'kernel.shmmax': '1000', 'fs.mqueue.msg_max': '20' } });
    assert.equal(s.linux.sysctl['kernel.shmmax'], '1000');
    await rejectsInvalid(spec({}, { IpcMode: 'host', Sysctls: { 'kernel.msgmax': '1' } }), /IPC namespace/);
    await rejectsInvalid(
      spec({}, { Sysctls: { 'vm.swappiness': '1' } }),
      /not in a separate kernel namespace/,
    );
    await rejectsInvalid(spec({}, { Sysctls: { 'kernel.hostname': 'x' } }), /hostname/);
  });
});

describe('buildSpec: mounts', () => {
  it('sizes /dev/shm from ShmSize; none for IpcMode none', async () => {
    const s = await spec({}, { ShmSize: 1 << 20 });
    assert.ok(s.mounts.find((m) => m.destination === '/dev/shm')!.options.includes('size=1048576'));
    const n = await spec({}, { IpcMode: 'none' });
    assert.ok(!n.mounts.some((m) => m.destination === '/dev/shm'));
  });

  it('lets engine mounts replace defaults and network files, sorted by depth', async () => {
    const s = await spec(
      {},
      {},
      {
        mounts: [
          { destination: '/data/sub', type: 'bind', source: '/h/sub', options: ['rbind'] },
          { destination: '/data', type: 'bind', source: '/h/data', options: ['rbind', 'ro'] },
          { destination: '/etc/hosts', type: 'bind', source: '/mine/hosts', options: ['rbind'] },
          { destination: '/dev/shm', type: 'bind', source: '/h/shm', options: ['rbind', 'rslave'] },
        ],
      },
    );
    const dests = s.mounts.map((m) => `${m.destination}=${m.source}`);
    assert.equal(dests.filter((d) => d.startsWith('/etc/hosts=')).length, 1);
    assert.ok(dests.includes('/etc/hosts=/mine/hosts'));
    assert.equal(dests.filter((d) => d.startsWith('/dev/shm=')).length, 1);
    assert.ok(dests.indexOf('/data=/h/data') < dests.indexOf('/data/sub=/h/sub'));
    assert.equal(s.linux.rootfsPropagation, 'rslave');
  });

  it('drops the default /dev/* mounts when /dev is mounted', async () => {
    const s = await spec(
      {},
      {},
      { mounts: [{ destination: '/dev', type: 'bind', source: '/dev', options: ['rbind'] }] },
    );
    assert.ok(!s.mounts.some((m) => m.destination.startsWith('/dev/')));
  });

  it('makes a read-only root and its mounts read-only, but not /dev, /proc or engine mounts', async () => {
    const s = await spec(
      {},
      { ReadonlyRootfs: true },
      { mounts: [{ destination: '/vol', type: 'bind', source: '/h', options: ['rbind'] }] },
    );
    assert.equal(s.root.readonly, true);
    const opts = Object.fromEntries(s.mounts.map((m) => [m.destination, m.options]));
    assert.ok(opts['/etc/hosts']!.includes('ro'));
    assert.ok(opts['/sys/fs/cgroup']!.includes('ro'));
    assert.ok(!opts['/dev']!.includes('ro'));
    assert.ok(!opts['/proc']!.includes('ro'));
    assert.ok(!opts['/vol']!.includes('ro'));
  });

  it('uses HostConfig masked and read-only paths when given', async () => {
    const s = await spec({}, { MaskedPaths: ['/proc/kcore'], ReadonlyPaths: [] });
    assert.deepEqual(s.linux.maskedPaths, ['/proc/kcore']);
    assert.deepEqual(s.linux.readonlyPaths, []);
  });
});

describe('buildSpec: user and working directory', () => {
  it('resolves a name with its supplementary groups and GroupAdd', async () => {
    const s = await spec({ User: 'app' }, { GroupAdd: ['docker', '4242'] });
    assert.deepEqual(s.process.user, { uid: 1000, gid: 1000, additionalGids: [1000, 10, 29, 999, 4242] });
  });

  it('resolves uid, uid:gid, name:group; an explicit group has no supplementary groups', async () => {
    assert.deepEqual((await spec({ User: '1000' })).process.user, {
      uid: 1000,
      gid: 1000,
      additionalGids: [1000, 10, 29],
    });
    assert.deepEqual((await spec({ User: '1234' })).process.user, { uid: 1234, gid: 0, additionalGids: [0] });
    assert.deepEqual((await spec({ User: '1234:5678' })).process.user, {
      uid: 1234,
      gid: 5678,
      additionalGids: [5678],
    });
    assert.deepEqual((await spec({ User: 'app:audio' })).process.user, {
      uid: 1000,
      gid: 29,
      additionalGids: [29],
    });
    assert.deepEqual((await spec({ User: 'daemon:10' })).process.user, {
      uid: 1,
      gid: 10,
      additionalGids: [10],
    });
  });

  it('fails like dockerd for unknown names', async () => {
    await rejectsInvalid(
      spec({ User: 'nobody' }),
      /^unable to find user nobody: no matching entries in passwd file$/,
    );
    await rejectsInvalid(
      spec({ User: 'app:nogroup' }),
      /unable to find group nogroup: no matching entries in group file/,
    );
    await rejectsInvalid(spec({}, { GroupAdd: ['nogroup'] }), /Unable to find group nogroup/);
  });

  it('works without /etc/passwd for numeric users', async () => {
    const bare = join(dir, 'bare');
    await mkdir(bare, { recursive: true });
    const s = await buildSpec({ ...input({ User: '33:33' }), rootfs: bare }, { host: fakeHost() });
    assert.deepEqual(s.process.user, { uid: 33, gid: 33, additionalGids: [33] });
  });

  it('creates the working directory inside the rootfs, through symlinks', async () => {
    await mkdir(join(rootfs, 'srv'), { recursive: true });
    await symlink('/srv', join(rootfs, 'link'));
    const s = await spec({ WorkingDir: '/link/app/' });
    assert.equal(s.process.cwd, '/link/app');
    assert.ok((await stat(join(rootfs, 'srv/app'))).isDirectory());
    await rejectsInvalid(spec({ WorkingDir: 'relative' }), /absolute path/);
  });

  it('resolves symlinks without leaving the root', async () => {
    await symlink('../../../../etc', join(rootfs, 'escape'));
    assert.equal(await resolveInRoot(rootfs, '/escape/passwd'), join(rootfs, 'etc/passwd'));
    await symlink('/etc/passwd', join(rootfs, 'abs'));
    assert.equal(await resolveInRoot(rootfs, '/abs'), join(rootfs, 'etc/passwd'));
  });
});

describe('buildSpec: limits and resources', () => {
  it('keeps ulimits within the daemon hard limit and warns', async () => {
    const warnings: string[] = [];
    const s = await spec(
      {},
      {
        Ulimits: [
          { Name: 'nofile', Soft: 65536, Hard: 65536 },
          { Name: 'nproc', Soft: 500, Hard: 1500 },
          { Name: 'core', Soft: -1, Hard: -1 },
        ],
      },
      {},
      fakeHost(),
      warnings,
    );
    assert.deepEqual(s.process.rlimits, [
      { type: 'RLIMIT_NOFILE', soft: 20000, hard: 20000 },
      { type: 'RLIMIT_NPROC', soft: 500, hard: 1500 },
      { type: 'RLIMIT_CORE', soft: -1, hard: -1 },
    ]);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /nofile/);
    assert.match(specToJson(s), /"soft":18446744073709551615,"hard":18446744073709551615/);
    // integers a double cannot hold exactly are written as Go's int64/uint64 read them (found by
    // the fuzzer: runc refused 9223372036854776000 and -9223372036854776000)
    const edges = specToJson({
      memory: { limit: 2 ** 63, swap: -(2 ** 63) },
      cpu: { period: 2 ** 64, quota: 2 ** 53 + 2, shares: 1e19 },
      blockIO: { weight: 10 },
    });
    assert.equal(
      edges,
      '{"memory":{"limit":9223372036854775807,"swap":-9223372036854775808},"cpu":{"period":18446744073709551615,"quota":9007199254740994,"shares":10000000000000000000},"blockIO":{"weight":10}}',
    );
    assert.equal(JSON.parse(specToJson({ cpu: { cpus: '__berth_int_1__' } })).cpu.cpus, '__berth_int_1__');
    await rejectsInvalid(
      spec({}, { Ulimits: [{ Name: 'bogus', Soft: 1, Hard: 1 }] }),
      /invalid ulimit type: bogus/,
    );
    await rejectsInvalid(spec({}, { Ulimits: [{ Name: 'nproc', Soft: 10, Hard: 1 }] }), /soft limit/);
  });

  it('sets memory, cpu, pids and blkio resources', async () => {
    const s = await spec(
      {},
      {
        Memory: 64 << 20,
        MemoryReservation: 32 << 20,
        MemorySwappiness: 10,
        OomKillDisable: true,
        KernelMemory: 1 << 20,
        CpuShares: 512,
        NanoCpus: 1.5e9,
        CpusetCpus: '0',
        CpusetMems: '0',
        PidsLimit: 100,
        BlkioWeight: 300,
        BlkioWeightDevice: [{ Path: '/dev/sda', Weight: 200 }],
        BlkioDeviceReadBps: [{ Path: '/dev/sda', Rate: 1048576 }],
        BlkioDeviceWriteIOps: [{ Path: '/dev/sda', Rate: 100 }],
      },
    );
    const r = s.linux.resources;
    assert.deepEqual(r.memory, {
      limit: 64 << 20,
      reservation: 32 << 20,
      swap: 128 << 20,
      swappiness: 10,
      disableOOMKiller: true,
    });
    assert.deepEqual(r.cpu, { shares: 512, cpus: '0', mems: '0', period: 100000, quota: 150000 });
    assert.deepEqual(r.pids, { limit: 100 });
    assert.deepEqual(r.blockIO, {
      weight: 300,
      weightDevice: [{ major: 8, minor: 0, weight: 200 }],
      throttleReadBpsDevice: [{ major: 8, minor: 0, rate: 1048576 }],
      throttleWriteIOPSDevice: [{ major: 8, minor: 0, rate: 100 }],
    });
  });

  it('handles swap -1, unsupported swap limits, period/quota, unlimited pids', async () => {
    const a = await spec(
      {},
      { Memory: 1 << 20, MemorySwap: -1, CpuPeriod: 50000, CpuQuota: 25000, PidsLimit: -1 },
    );
    assert.deepEqual(a.linux.resources.memory, { limit: 1 << 20 });
    assert.deepEqual(a.linux.resources.cpu, { period: 50000, quota: 25000 });
    assert.deepEqual(a.linux.resources.pids, { limit: -1 });
    const warnings: string[] = [];
    const b = await spec(
      {},
      { Memory: 1 << 20, MemorySwap: 4 << 20 },
      {},
      fakeHost({ swapLimitSupported: async () => false }),
      warnings,
    );
    assert.deepEqual(b.linux.resources.memory, { limit: 1 << 20 });
    assert.equal(warnings.length, 1);
    await rejectsInvalid(spec({}, { BlkioWeight: 5 }), /blkio weight/);
    await rejectsInvalid(spec({}, { NanoCpus: 1e9, CpuQuota: 1000 }), /Nano CPUs/);
    // twice int64's largest memory limit is no swap limit runc can read (found by the fuzzer: a 500)
    const c = await spec({}, { Memory: 2 ** 63 });
    assert.match(specToJson(c), /"memory":\{"limit":9223372036854775807,"swap":9223372036854775807\}/);
  });
});

describe('buildSpec: devices', () => {
  it('adds HostConfig.Devices (files and directories) with their permissions', async () => {
    const s = await spec(
      {},
      {
        Devices: [
          { PathOnHost: '/dev/fuse', PathInContainer: '/dev/fuse', CgroupPermissions: 'rwm' },
          { PathOnHost: '/dev/snd', PathInContainer: '/dev/sound', CgroupPermissions: 'r' },
        ],
        DeviceCgroupRules: ['c 42:* rmw', 'a *:* m'],
      },
    );
    assert.deepEqual(
      s.linux.devices.map((d) => [d.path, d.type, d.major, d.minor]),
      [
        ['/dev/fuse', 'c', 10, 229],
        ['/dev/sound/pcm0', 'c', 116, 2],
        ['/dev/sound/timer', 'c', 116, 33],
      ],
    );
    assert.deepEqual(s.linux.resources.devices?.slice(8), [
      { allow: true, type: 'c', major: 10, minor: 229, access: 'rwm' },
      { allow: true, type: 'c', major: 116, minor: 2, access: 'r' },
      { allow: true, type: 'c', major: 116, minor: 33, access: 'r' },
      { allow: true, type: 'c', major: 42, access: 'rmw' },
      { allow: true, type: 'a', access: 'm' },
    ]);
  });

  it('rejects bad rules, permissions and missing devices', async () => {
    assert.throws(() => parseDeviceCgroupRule('x 1:2 r'), /invalid device cgroup rule format/);
    await rejectsInvalid(
      spec({}, { Devices: [{ PathOnHost: '/dev/fuse', PathInContainer: '', CgroupPermissions: 'rwx' }] }),
      /permissions/,
    );
    await rejectsInvalid(
      spec({}, { Devices: [{ PathOnHost: '/dev/nope', PathInContainer: '', CgroupPermissions: 'rwm' }] }),
      /no such file/,
    );
  });
});

describe('buildSpec: security options and init', () => {
  it('sets no-new-privileges, rejects unknown options', async () => {
    assert.equal((await spec({}, { SecurityOpt: ['no-new-privileges'] })).process.noNewPrivileges, true);
    assert.equal((await spec({}, { SecurityOpt: ['no-new-privileges:true'] })).process.noNewPrivileges, true);
    assert.equal(
      (await spec({}, { SecurityOpt: ['no-new-privileges=false'] })).process.noNewPrivileges,
      false,
    );
    assert.equal(
      (await spec({}, { SecurityOpt: ['seccomp=unconfined', 'label=disable'] })).process.noNewPrivileges,
      false,
    );
    await rejectsInvalid(spec({}, { SecurityOpt: ['bogus=1'] }), /invalid --security-opt/);
  });

  it('runs docker-init for HostConfig.Init', async () => {
    const s = await spec({ Cmd: ['sleep', '1'] }, { Init: true, OomScoreAdj: 500 });
    assert.deepEqual(s.process.args, ['/sbin/docker-init', '--', 'sleep', '1']);
    assert.deepEqual(s.mounts.at(-1), {
      destination: '/sbin/docker-init',
      type: 'bind',
      source: '/usr/bin/tini-static',
      options: ['bind', 'ro'],
    });
    assert.equal(s.process.oomScoreAdj, 500);
  });
});

describe('host facts', () => {
  it('parses /proc/self/limits', () => {
    const text = [
      'Limit                     Soft Limit           Hard Limit           Units     ',
      'Max cpu time              unlimited            unlimited            seconds   ',
      'Max open files            20000                40000                files     ',
      'Max processes             96365                96365                processes ',
    ].join('\n');
    const l = parseProcLimits(text);
    assert.deepEqual(l.get('nofile'), { soft: 20000, hard: 40000 });
    assert.deepEqual(l.get('cpu'), { soft: -1, hard: -1 });
    assert.deepEqual(l.get('nproc'), { soft: 96365, hard: 96365 });
  });

  it('reads capability masks and device numbers', () => {
    const caps = capsFromMask('000001fffeffffff');
    assert.equal(caps.size, capabilityNames.length - 1);
    assert.ok(!caps.has('CAP_SYS_RESOURCE'));
    assert.deepEqual(splitDev(BigInt((8 << 8) | 1)), { major: 8, minor: 1 });
    assert.deepEqual(splitDev(BigInt(259 << 8) | (BigInt(0x1200) << 12n)), {
      major: 259,
      minor: 0x1200,
    });
  });
});

describe('buildSpec: seccomp (Docker default profile)', () => {
  type Seccomp = {
    defaultAction: string;
    architectures: string[];
    syscalls: { names: string[]; action: string; errnoRet?: number; args?: unknown[] }[];
  };
  const allowed = (s: Seccomp) =>
    new Set(s.syscalls.filter((c) => c.action === 'SCMP_ACT_ALLOW' && !c.args).flatMap((c) => c.names));

  it('applies the default profile, filtered by the container capabilities', async () => {
    const s = (await spec()) as unknown as { linux: { seccomp: Seccomp } };
    const sc = s.linux.seccomp;
    assert.equal(sc.defaultAction, 'SCMP_ACT_ERRNO');
    if (process.arch === 'x64')
      assert.deepEqual(sc.architectures, ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
    const ok = allowed(sc);
    assert.ok(ok.has('read') && ok.has('clone3') === false);
    assert.ok(!ok.has('mount') && !ok.has('unshare') && !ok.has('reboot'));
    assert.deepEqual(
      sc.syscalls.find((c) => c.names.includes('clone3')),
      { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 },
    );
    const admin = (await spec({}, { CapAdd: ['SYS_ADMIN'] })) as unknown as { linux: { seccomp: Seccomp } };
    const okAdmin = allowed(admin.linux.seccomp);
    assert.ok(okAdmin.has('mount') && okAdmin.has('unshare') && okAdmin.has('clone3'));
  });

  it('has none when privileged or unconfined; takes a custom profile', async () => {
    assert.equal(
      ((await spec({}, { Privileged: true })) as unknown as { linux: { seccomp?: unknown } }).linux.seccomp,
      undefined,
    );
    assert.equal(
      (
        (await spec({}, { SecurityOpt: ['seccomp=unconfined'] })) as unknown as {
          linux: { seccomp?: unknown };
        }
      ).linux.seccomp,
      undefined,
    );
    const custom = JSON.stringify({
      defaultAction: 'SCMP_ACT_ALLOW',
      syscalls: [{ name: 'chmod', action: 'SCMP_ACT_ERRNO' }],
    });
    const s = (await spec({}, { SecurityOpt: [`seccomp=${custom}`] })) as unknown as {
      linux: { seccomp: Seccomp };
    };
    assert.deepEqual(s.linux.seccomp, {
      defaultAction: 'SCMP_ACT_ALLOW',
      syscalls: [{ names: ['chmod'], action: 'SCMP_ACT_ERRNO' }],
    });
    await rejectsInvalid(spec({}, { SecurityOpt: ['seccomp={not json'] }), /Decoding seccomp profile failed/);
    const daemonOff = (await buildSpec(input(), { host: fakeHost(), seccompProfile: 'unconfined' })) as {
      linux: { seccomp?: unknown };
    };
    assert.equal(daemonOff.linux.seccomp, undefined);
  });
});

describe('buildExecProcess', () => {
  it('derives the exec process from the container spec', async () => {
    const container = await buildSpec(input({ Env: ['FOO=1'], Tty: true, User: 'app', WorkingDir: '/w' }), {
      host: fakeHost(),
    });
    const p = await buildExecProcess(container, { Cmd: ['sh'], Env: ['BAR=2'] });
    assert.deepEqual(p.args, ['sh']);
    assert.equal(p.terminal, false);
    assert.ok(!p.env.includes('TERM=xterm'));
    assert.ok(p.env.includes('FOO=1') && p.env.includes('BAR=2'));
    assert.equal(p.cwd, '/w');
    assert.deepEqual(p.user, { uid: 1000, gid: 1000, additionalGids: [1000, 10, 29] });
    assert.deepEqual(Object.keys(p.capabilities), ['bounding']);
    const root = await buildExecProcess(
      container,
      { Cmd: ['id'], User: '0', Tty: true, WorkingDir: '/tmp', Privileged: true },
      { host: fakeHost(), consoleSize: { height: 3, width: 4 } },
    );
    assert.equal(root.user.uid, 0);
    assert.ok(root.env.includes('TERM=xterm'));
    assert.equal(root.cwd, '/tmp');
    assert.equal(root.capabilities.effective!.length, capabilityNames.length - 1);
    assert.deepEqual(root.consoleSize, { height: 3, width: 4 });
    await rejectsInvalid(buildExecProcess(container, { Cmd: [] }), /No exec command/);
    await rejectsInvalid(
      buildExecProcess(container, { Cmd: ['x'], User: 'ghost' }),
      /unable to find user ghost/,
    );
  });
});
