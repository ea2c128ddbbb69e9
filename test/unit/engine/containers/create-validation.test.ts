import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { HostConfig } from '../../../../src/common/docker-types.js';
import { isKind } from '../../../../src/common/errors.js';
import { decodeCreateRequest } from '../../../../src/engine/api/containers.create.js';
import { decodeCreateJson } from '../../../../src/engine/api/schema/containers.schema.js';
import type { CreateRequest } from '../../../../src/engine/containers/core/create.js';
import { parseBind } from '../../../../src/engine/containers/core/mounts.validate.js';
import {
  validateConfig,
  validateHostConfig,
  validateNetworkingConfig,
} from '../../../../src/engine/containers/core/validate.js';
import { fullSysInfo, hostSysInfo, type SysInfo } from '../../../../src/engine/runtime/sysinfo.js';
import { CREATE_OPTIONS } from '../../../helpers/create-options.js';
import { type Harness, harness } from './fakes.js';

/** Create-time decoding and validation, against what dockerd 20.10 answers (recorded below). */

function invalid(fn: () => unknown, message: string | RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isKind(err, 'InvalidParameter'), `expected InvalidParameter, got ${String(err)}`);
    if (typeof message === 'string') assert.equal((err as Error).message, message);
    else assert.match((err as Error).message, message);
    return true;
  });
}

/** A host where everything is supported, 2 CPUs (0-1), one memory node. */
const full = fullSysInfo('0-1', '0');
const opts = (sysInfo: SysInfo = full) => ({ kernelMemory: true, sysInfo });
const hostcfg = (hc: HostConfig, sysInfo?: SysInfo) => validateHostConfig(hc, {}, opts(sysInfo));

// dockerd 20.10's messages for bodies of the wrong JSON types (it answers 500; berth 400)
const typeErrors: Array<[unknown, string]> = [
  [
    { Image: 'busybox', HostConfig: { OomKillDisable: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.OomKillDisable of type bool',
  ],
  [
    { Image: 'busybox', HostConfig: { Init: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.Init of type bool',
  ],
  [
    { Image: 'busybox', HostConfig: { RestartPolicy: { MaximumRetryCount: '3' } } },
    'json: cannot unmarshal string into Go struct field RestartPolicy.HostConfig.RestartPolicy.MaximumRetryCount of type int',
  ],
  [
    { Image: 'busybox', HostConfig: { Ulimits: [{ Soft: '1' }] } },
    'json: cannot unmarshal string into Go struct field Ulimit.HostConfig.Ulimits.Soft of type int64',
  ],
  [
    { Image: 'busybox', HostConfig: { CpuRealtimeRuntime: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.CpuRealtimeRuntime of type int64',
  ],
  [
    { Image: 'busybox', HostConfig: { Devices: ['x'] } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.Devices of type container.DeviceMapping',
  ],
  [
    { Image: 'busybox', Healthcheck: { Test: 'x' } },
    'json: cannot unmarshal string into Go struct field HealthConfig.Healthcheck.Test of type []string',
  ],
  [
    { Image: 'busybox', Healthcheck: { Test: [5] } },
    'json: cannot unmarshal number into Go struct field HealthConfig.Healthcheck.Test of type string',
  ],
  [
    { Image: 'busybox', Healthcheck: { Retries: '3' } },
    'json: cannot unmarshal string into Go struct field HealthConfig.Healthcheck.Retries of type int',
  ],
  [
    { Image: 'busybox', Healthcheck: { Interval: 'x' } },
    'json: cannot unmarshal string into Go struct field HealthConfig.Healthcheck.Interval of type time.Duration',
  ],
  [
    { Image: 'busybox', NetworkingConfig: { EndpointsConfig: 5 } },
    'json: cannot unmarshal number into Go struct field NetworkingConfig.NetworkingConfig.EndpointsConfig of type map[string]*network.EndpointSettings',
  ],
  [
    { Image: 'busybox', NetworkingConfig: { EndpointsConfig: { bridge: 5 } } },
    'json: cannot unmarshal number into Go struct field NetworkingConfig.NetworkingConfig.EndpointsConfig of type network.EndpointSettings',
  ],
  [
    {
      Image: 'busybox',
      NetworkingConfig: { EndpointsConfig: { bridge: { IPAMConfig: { LinkLocalIPs: 'x' } } } },
    },
    'json: cannot unmarshal string into Go struct field EndpointIPAMConfig.NetworkingConfig.EndpointsConfig.IPAMConfig.LinkLocalIPs of type []string',
  ],
  [
    { Image: 'busybox', HostConfig: { Memory: 10000000.5 } },
    'json: cannot unmarshal number 10000000.5 into Go struct field HostConfig.HostConfig.Memory of type int64',
  ],
  [
    { Image: 'busybox', HostConfig: { PidsLimit: 1.5 } },
    'json: cannot unmarshal number 1.5 into Go struct field HostConfig.HostConfig.PidsLimit of type int64',
  ],
  [
    { Image: 'busybox', HostConfig: { BlkioWeight: 70000 } },
    'json: cannot unmarshal number 70000 into Go struct field HostConfig.HostConfig.BlkioWeight of type uint16',
  ],
  [
    { Image: 'busybox', HostConfig: { ConsoleSize: [1, -1] } },
    'json: cannot unmarshal number -1 into Go struct field HostConfig.HostConfig.ConsoleSize of type uint',
  ],
  [
    { Image: 'busybox', HostConfig: { ConsoleSize: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.ConsoleSize of type [2]uint',
  ],
  [
    { Image: 'busybox', Memory: 'x' },
    'json: cannot unmarshal string into Go struct field ContainerConfigWrapper.Memory of type int64',
  ],
  [
    { Image: 'busybox', HostConfig: { LogConfig: { Config: { a: 1 } } } },
    'json: cannot unmarshal number into Go struct field LogConfig.HostConfig.LogConfig.Config of type string',
  ],
  [
    { Image: 'busybox', HostConfig: { CapAdd: 5 } },
    'json: cannot unmarshal number into Go struct field HostConfig.HostConfig.CapAdd of type string',
  ],
  [
    { Image: 'busybox', HostConfig: { CapAdd: [5] } },
    'json: cannot unmarshal array into Go struct field HostConfig.HostConfig.CapAdd of type string',
  ],
  [
    { Image: 'busybox', Cmd: 5 },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.Cmd of type string',
  ],
  [
    { Image: 'busybox', ExposedPorts: { '80/tcp': 5 } },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.ExposedPorts of type struct {}',
  ],
  [
    { Image: 'busybox', ExposedPorts: 'x' },
    'json: cannot unmarshal string into Go struct field ContainerConfigWrapper.ExposedPorts of type nat.PortSet',
  ],
  [
    { Image: 'busybox', Volumes: { '/x': 'y' } },
    'json: cannot unmarshal string into Go struct field ContainerConfigWrapper.Volumes of type struct {}',
  ],
  [
    { Image: 'busybox', HostConfig: { PortBindings: { '80/tcp': { HostPort: '1' } } } },
    'json: cannot unmarshal object into Go struct field HostConfig.HostConfig.PortBindings of type []nat.PortBinding',
  ],
  [
    { Image: 'busybox', HostConfig: { PortBindings: { '80/tcp': [{ HostPort: 1 }] } } },
    'json: cannot unmarshal number into Go struct field PortBinding.HostConfig.PortBindings.HostPort of type string',
  ],
  [
    { Image: 'busybox', HostConfig: { PortBindings: [] } },
    'json: cannot unmarshal array into Go struct field HostConfig.HostConfig.PortBindings of type nat.PortMap',
  ],
  [
    { Image: 'busybox', HostConfig: { RestartPolicy: [] } },
    'json: cannot unmarshal array into Go struct field HostConfig.HostConfig.RestartPolicy of type container.RestartPolicy',
  ],
  [
    { Image: 'busybox', HostConfig: { Mounts: [{ TmpfsOptions: { Mode: -1 } }] } },
    'json: cannot unmarshal number -1 into Go struct field TmpfsOptions.HostConfig.Mounts.TmpfsOptions.Mode of type fs.FileMode',
  ],
  [
    { Image: 'busybox', HostConfig: { Mounts: [{ Type: 5 }] } },
    'json: cannot unmarshal number into Go struct field Mount.HostConfig.Mounts.Type of type mount.Type',
  ],
  [
    { Image: 'busybox', HostConfig: { Mounts: [{ BindOptions: { Propagation: 5 } }] } },
    'json: cannot unmarshal number into Go struct field BindOptions.HostConfig.Mounts.BindOptions.Propagation of type mount.Propagation',
  ],
  [
    {
      Image: 'busybox',
      HostConfig: { Mounts: [{ VolumeOptions: { DriverConfig: { Options: { a: 1 } } } }] },
    },
    'json: cannot unmarshal number into Go struct field Driver.HostConfig.Mounts.VolumeOptions.DriverConfig.Options of type string',
  ],
  [
    { Image: 'busybox', HostConfig: { BlkioWeightDevice: [{ Weight: 'x' }] } },
    'json: cannot unmarshal string into Go struct field WeightDevice.HostConfig.BlkioWeightDevice.Weight of type uint16',
  ],
  [
    { Image: 'busybox', HostConfig: { BlkioDeviceReadBps: ['x'] } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.BlkioDeviceReadBps of type blkiodev.ThrottleDevice',
  ],
  [
    { Image: 'busybox', HostConfig: { DeviceRequests: [{ Capabilities: [['a', 1]] }] } },
    'json: cannot unmarshal number into Go struct field DeviceRequest.HostConfig.DeviceRequests.Capabilities of type string',
  ],
  [
    { Image: 'busybox', HostConfig: { Ulimits: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.Ulimits of type []*units.Ulimit',
  ],
  [
    { Image: 'busybox', HostConfig: { MemorySwappiness: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.MemorySwappiness of type int64',
  ],
  [
    { Image: 'busybox', HostConfig: { NetworkMode: 5 } },
    'json: cannot unmarshal number into Go struct field HostConfig.HostConfig.NetworkMode of type container.NetworkMode',
  ],
  [
    { Image: 'busybox', HostConfig: { Cgroup: 5 } },
    'json: cannot unmarshal number into Go struct field HostConfig.HostConfig.Cgroup of type container.CgroupSpec',
  ],
  [
    { Image: 'busybox', HostConfig: { Tmpfs: { '/x': 5 } } },
    'json: cannot unmarshal number into Go struct field HostConfig.HostConfig.Tmpfs of type string',
  ],
  [
    { Image: 'busybox', HostConfig: { Binds: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.Binds of type []string',
  ],
  [
    { Image: 'busybox', StopTimeout: 'x' },
    'json: cannot unmarshal string into Go struct field ContainerConfigWrapper.StopTimeout of type int',
  ],
  [
    { Image: 'busybox', HostConfig: 5 },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.HostConfig of type container.HostConfig',
  ],
  [
    { Image: 'busybox', Healthcheck: 5 },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.Healthcheck of type container.HealthConfig',
  ],
  [
    { Image: 'busybox', NetworkingConfig: 5 },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.NetworkingConfig of type network.NetworkingConfig',
  ],
  [
    { Image: 'busybox', Labels: { a: 1 } },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.Labels of type string',
  ],
  [
    { Image: 'busybox', Labels: 'x' },
    'json: cannot unmarshal string into Go struct field ContainerConfigWrapper.Labels of type map[string]string',
  ],
  [
    { Image: 5 },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.Image of type string',
  ],
  [
    { Image: 'busybox', Cpuset: 5 },
    'json: cannot unmarshal number into Go struct field ContainerConfigWrapper.Cpuset of type string',
  ],
  // keys in other cases are the same fields, with the same types
  [
    { image: 'busybox', hostconfig: { oomkilldisable: 'x' } },
    'json: cannot unmarshal string into Go struct field HostConfig.HostConfig.OomKillDisable of type bool',
  ],
  [
    { Image: 'busybox', Env: 'A=1' },
    'json: cannot unmarshal string into Go struct field ContainerConfigWrapper.Env of type []string',
  ],
];

describe('create body decoding (types as moby declares them)', () => {
  it('refuses values of the wrong JSON type with Go messages, as 400', () => {
    for (const [body, message] of typeErrors) {
      invalid(() => decodeCreateRequest(body as Record<string, unknown>, '1.44'), message);
    }
  });

  it('refuses a body without any Config field as dockerd does', () => {
    for (const body of [{}, { HostConfig: {} }, { NetworkingConfig: {}, Memory: 1 }]) {
      invalid(
        () => decodeCreateRequest(body, '1.44'),
        'Config cannot be empty in order to create a container',
      );
    }
  });

  it('takes StrSlice fields as one string or a list', () => {
    const d = decodeCreateRequest(
      {
        Image: 'busybox',
        Cmd: 'echo hi',
        Entrypoint: 'sh',
        Shell: ['/bin/sh', '-c'],
        HostConfig: { CapAdd: 'NET_ADMIN', CapDrop: ['MKNOD'] },
      },
      '1.44',
    );
    assert.deepEqual(d.config.Cmd, ['echo hi']);
    assert.deepEqual(d.config.Entrypoint, ['sh']);
    assert.deepEqual(d.config.Shell, ['/bin/sh', '-c']);
    assert.deepEqual(d.hostConfig.CapAdd, ['NET_ADMIN']);
    assert.deepEqual(d.hostConfig.CapDrop, ['MKNOD']);
  });

  it('maps keys case-insensitively to the canonical names, exact names first, last one wins', () => {
    const d = decodeCreateRequest(
      {
        image: 'busybox',
        cmd: ['true'],
        LABELS: { a: 'b' },
        hostconfig: { memory: 20000000, restartpolicy: { name: 'always' }, logconfig: { type: 'none' } },
        networkingconfig: { endpointsconfig: { bridge: { ipamconfig: { ipv4address: '172.17.0.9' } } } },
      },
      '1.44',
    );
    assert.deepEqual(d.config, { Image: 'busybox', Cmd: ['true'], Labels: { a: 'b' } });
    assert.equal(d.hostConfig.Memory, 20000000);
    assert.deepEqual(d.hostConfig.RestartPolicy, { Name: 'always' });
    assert.deepEqual(d.hostConfig.LogConfig, { Type: 'none' });
    assert.equal(d.networkingConfig.EndpointsConfig?.bridge?.IPAMConfig?.IPv4Address, '172.17.0.9');
    // map keys are data: never renamed
    assert.deepEqual(decodeCreateJson({ Image: 'x', Labels: { image: 'y' } }).config?.Labels, { image: 'y' });
    // as Go: each key sets its field, in order
    assert.equal(decodeCreateJson({ image: 'a', Image: 'b' }).config?.Image, 'b');
    assert.equal(decodeCreateJson({ Image: 'b', IMAGE: 'a' }).config?.Image, 'a');
  });

  it('drops unknown keys and leaves null fields unset (scalars in lists and maps: zero values)', () => {
    const d = decodeCreateJson({
      Image: 'busybox',
      Bogus: 1,
      Env: ['A=1', null],
      Labels: { a: null },
      Healthcheck: null,
      HostConfig: { Nope: true, Memory: null, LogConfig: { Config: { 'max-size': null } } },
    });
    assert.deepEqual(d.config, { Image: 'busybox', Env: ['A=1', ''], Labels: { a: '' }, Healthcheck: null });
    assert.deepEqual(d.hostConfig, { Memory: null, LogConfig: { Config: { 'max-size': '' } } });
  });

  it('legacy top-level HostConfig fields: the HostConfig when there is none (getHostConfig)', () => {
    const d = decodeCreateRequest(
      {
        Image: 'busybox',
        Memory: 20000000,
        CpuShares: 512,
        Cpuset: '0',
        Binds: ['/tmp:/x'],
        Privileged: true,
      },
      '1.41',
    );
    assert.deepEqual(d.hostConfig, {
      Memory: 20000000,
      CpuShares: 512,
      CpusetCpus: '0',
      Binds: ['/tmp:/x'],
      Privileged: true,
    });
    assert.deepEqual(d.config, { Image: 'busybox' });
  });

  it('legacy top-level fields with a HostConfig: only Memory, MemorySwap, CpuShares, CpusetCpus, VolumeDriver fill zeros', () => {
    const d = decodeCreateRequest(
      {
        Image: 'busybox',
        Memory: 20000000,
        MemorySwap: 40000000,
        CpuShares: 512,
        Cpuset: '0',
        VolumeDriver: 'local',
        Binds: ['/tmp:/x'],
        Privileged: true,
        HostConfig: { CpusetCpus: '', MemorySwap: 90000000 },
      },
      '1.41',
    );
    assert.deepEqual(d.hostConfig, {
      CpusetCpus: '0',
      MemorySwap: 90000000,
      Memory: 20000000,
      CpuShares: 512,
      VolumeDriver: 'local',
    });
    const inner = decodeCreateRequest(
      { Image: 'busybox', Memory: 20000000, HostConfig: { Memory: 30000000 } },
      '1.41',
    );
    assert.equal(inner.hostConfig.Memory, 30000000);
    // Cpuset without any HostConfig field is dropped, as dockerd drops it
    assert.deepEqual(decodeCreateRequest({ Image: 'busybox', Cpuset: '0' }, '1.41').hostConfig, {});
  });

  it('keeps the version gates: Annotations from 1.43, Healthcheck.StartInterval from 1.44', () => {
    const body = {
      Image: 'busybox',
      Healthcheck: { Test: ['CMD', 'true'], StartInterval: 5_000_000 },
      HostConfig: { Annotations: { a: 'b' } },
    };
    const old = decodeCreateRequest(body, '1.42');
    assert.equal(old.hostConfig.Annotations, undefined);
    assert.equal(old.config.Healthcheck?.StartInterval, undefined);
    const now = decodeCreateRequest(body, '1.44');
    assert.deepEqual(now.hostConfig.Annotations, { a: 'b' });
    assert.equal(now.config.Healthcheck?.StartInterval, 5_000_000);
  });
});

// dockerd 20.10's answers at create (400 unless noted: those it gives 500 for, berth gives 400)
const hostConfigErrors: Array<[HostConfig, string]> = [
  // mounts
  [
    { Mounts: [{ Type: 'bind', Source: '/tmp', Target: '/' }] },
    `invalid mount config for type "bind": invalid specification: destination can't be '/'`,
  ],
  [
    { Mounts: [{ Type: 'bind', Source: '/tmp', Target: '/x', BindOptions: { Propagation: 'bogus' } }] },
    'invalid mount config for type "bind": invalid propagation mode: bogus',
  ],
  [
    { Mounts: [{ Type: 'bogus' as 'bind', Target: '/x' }] },
    'invalid mount config for type "bogus": mount type unknown',
  ],
  [{ Mounts: [{ Target: '/x' }] }, 'invalid mount config for type "": mount type unknown'],
  [
    { Mounts: [{ Type: 'bind', Target: '/x' }] },
    'invalid mount config for type "bind": field Source must not be empty',
  ],
  [
    { Mounts: [{ Type: 'tmpfs', Target: 'rel' }] },
    `invalid mount config for type "tmpfs": invalid mount path: 'rel' mount path must be absolute`,
  ],
  [
    { Mounts: [{ Type: 'tmpfs', Target: '/x', Source: 'a' }] },
    'invalid mount config for type "tmpfs": field Source must not be specified',
  ],
  [
    { Mounts: [{ Type: 'volume', Target: '/x', ReadOnly: true }] },
    'invalid mount config for type "volume": must not set ReadOnly mode when using anonymous volumes',
  ],
  [
    { Mounts: [{ Type: 'volume', Target: '/x', BindOptions: { Propagation: 'bogus' } }] },
    'invalid mount config for type "volume": field BindOptions must not be specified',
  ],
  [
    { Mounts: [{ Type: 'bind', Source: '/nonexistent-cv', Target: '/x' }] },
    'invalid mount config for type "bind": bind source path does not exist: /nonexistent-cv',
  ],
  [{ Tmpfs: { '/': '' } }, "invalid specification: destination can't be '/'"],
  [{ Tmpfs: { rel: '' } }, "invalid mount path: 'rel' mount path must be absolute"],
  [{ Tmpfs: { '/x': '' }, Binds: ['/tmp:/x'] }, 'Duplicate mount point: /x'],
  [{ Tmpfs: { '/x': '' }, Binds: ['/tmp:/x/:ro'] }, 'Duplicate mount point: /x'],
  [{ Binds: ['/tmp:/x', '/var:/x'] }, 'Duplicate mount point: /x'],
  [
    { Binds: ['/tmp:/x'], Mounts: [{ Type: 'bind', Source: '/tmp', Target: '/x' }] },
    'Duplicate mount point: /x',
  ],
  [
    {
      Mounts: [
        { Type: 'bind', Source: '/tmp', Target: '/x' },
        { Type: 'bind', Source: '/tmp', Target: '/x' },
      ],
    },
    'Duplicate mount point: /x',
  ],
  [{ Binds: ['/tmp:/x:ro,rw'] }, 'invalid mode: ro,rw'],
  [{ Binds: ['/tmp:/x:zz'] }, 'invalid mode: zz'],
  [
    { Binds: ['/tmp:/'] },
    `invalid volume specification: '/tmp:/': invalid mount config for type "bind": invalid specification: destination can't be '/'`,
  ],
  [
    { Binds: ['/'] },
    `invalid volume specification: '/': invalid mount config for type "volume": invalid specification: destination can't be '/'`,
  ],
  [
    { Binds: ['/tmp:rel'] },
    `invalid volume specification: '/tmp:rel': invalid mount config for type "bind": invalid mount path: 'rel' mount path must be absolute`,
  ],
  [
    { Binds: ['/tmp::ro'] },
    `invalid volume specification: '/tmp::ro': invalid mount config for type "bind": field Target must not be empty`,
  ],
  [
    { Binds: ['/tmp:/x:nocopy'] },
    `invalid volume specification: '/tmp:/x:nocopy': invalid mount config for type "bind": field VolumeOptions must not be specified`,
  ],
  [
    { Binds: ['vol1:/x:rshared'] },
    `invalid volume specification: 'vol1:/x:rshared': invalid mount config for type "volume": field BindOptions must not be specified`,
  ],
  [{ Binds: ['a:b:c:d'] }, "invalid volume specification: 'a:b:c:d'"],
  [{ Binds: [':/x'] }, "invalid volume specification: ':/x'"],
  [{ Binds: ['/x:ro'] }, "invalid volume specification: '/x:ro'"],
  // runtime, security options, cpusets, capabilities, isolation, QoS, network mode
  [{ Runtime: 'bogus' }, 'Unknown runtime specified bogus'],
  [{ SecurityOpt: ['bogus'] }, 'invalid --security-opt 1: "bogus"'],
  [{ SecurityOpt: ['foo=bar'] }, 'invalid --security-opt 2: "foo=bar"'],
  [{ SecurityOpt: ['no-new-privileges=x'] }, 'invalid --security-opt 2: "no-new-privileges=x"'],
  [{ CpusetCpus: '0-200' }, 'Requested CPUs are not available - requested 0-200, available: 0-1'],
  [{ CpusetMems: '5' }, 'Requested memory nodes are not available - requested 5, available: 0'],
  [{ CpusetCpus: 'x' }, 'Invalid value x for cpuset cpus: invalid format: x'],
  [{ CpusetCpus: '1-0' }, 'Invalid value 1-0 for cpuset cpus: invalid format: 1-0'],
  [{ CpusetCpus: '9000' }, 'Invalid value 9000 for cpuset cpus: value of out range, maximum is 8192'],
  [{ CapAdd: ['CAP_ALL'] }, 'invalid CapAdd: unknown capability: "CAP_ALL"'],
  [{ CapAdd: ['CAP_BOGUS'] }, 'invalid CapAdd: unknown capability: "CAP_BOGUS"'],
  [{ CapAdd: ['bogus'] }, 'invalid CapAdd: unknown capability: "CAP_BOGUS"'],
  [{ CapDrop: ['Cap_Bogus'] }, 'invalid CapDrop: unknown capability: "CAP_BOGUS"'],
  [{ Isolation: 'hyperv' }, `Invalid isolation: "hyperv" - linux only supports 'default'`],
  [
    { IOMaximumBandwidth: 5 },
    'Invalid QoS settings: linux does not support configuration of maximum bandwidth',
  ],
  [{ IOMaximumIOps: 5 }, 'Invalid QoS settings: linux does not support configuration of maximum IOPs'],
  [{ NetworkMode: 'container:' }, 'Invalid network mode: invalid container format container:<name|id>'],
  [{ NetworkMode: 'container' }, 'Invalid network mode: invalid container format container:<name|id>'],
  // restart policies (20.10's words), AutoRemove
  [{ RestartPolicy: { Name: 'bogus' as 'no' } }, "invalid restart policy 'bogus'"],
  [
    { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: -1 } },
    'maximum retry count cannot be negative',
  ],
  [
    { RestartPolicy: { Name: 'always', MaximumRetryCount: 3 } },
    "maximum retry count cannot be used with restart policy 'always'",
  ],
  [
    { RestartPolicy: { Name: 'no', MaximumRetryCount: 1 } },
    "maximum retry count cannot be used with restart policy 'no'",
  ],
  [
    { AutoRemove: true, RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 1 } },
    "can't create 'AutoRemove' container with restart policy",
  ],
  // resources
  [{ NanoCpus: 1e9, CpuQuota: 50000 }, 'Conflicting options: Nano CPUs and CPU Quota cannot both be set'],
  [{ NanoCpus: 1e9, CpuPeriod: 50000 }, 'Conflicting options: Nano CPUs and CPU Period cannot both be set'],
  [
    { CpuRealtimeRuntime: 1000, CpuRealtimePeriod: 500 },
    'cpu real-time runtime cannot be higher than cpu real-time period',
  ],
  [{ KernelMemory: 1000 }, 'Minimum kernel memory limit allowed is 6MB'],
  [{ Memory: 4000000 }, 'Minimum memory limit allowed is 6MB'],
  [{ Memory: -1 }, 'Minimum memory limit allowed is 6MB'],
  [
    { MemorySwap: 100000000 },
    'You should always set the Memory limit when using Memoryswap limit, see usage',
  ],
  [{ MemoryReservation: 1000 }, 'Minimum memory reservation allowed is 6MB'],
  [
    { Memory: 10000000, MemoryReservation: 20000000 },
    'Minimum memory limit can not be less than memory reservation limit, see usage',
  ],
  [{ MemorySwappiness: 200 }, 'Invalid value: 200, valid memory swappiness range is 0-100'],
  [{ CpuPeriod: 10 }, 'CPU cfs period can not be less than 1ms (i.e. 1000) or larger than 1s (i.e. 1000000)'],
  [{ CpuQuota: 10 }, 'CPU cfs quota can not be less than 1ms (i.e. 1000)'],
  // a uint64 of the runtime's: runc refused the negative ones (a 500), found by the fuzzer
  [{ CpuRealtimePeriod: -(2 ** 63) }, 'invalid CPU real-time period: must not be negative'],
  [{ CpuRealtimePeriod: -1 }, 'invalid CPU real-time period: must not be negative'],
  [{ OomScoreAdj: 1001 }, 'Invalid value 1001, range for oom score adj is [-1000, 1000]'],
  [{ ShmSize: -1 }, 'SHM size can not be less than 0'],
  [{ CgroupnsMode: 'bogus' }, 'invalid cgroup namespace mode: bogus'],
  [{ BlkioWeight: 5 }, 'Range of blkio weight is from 10 to 1000'],
  // extra hosts
  [{ ExtraHosts: ['badentry'] }, 'bad format for add-host: "badentry"'],
  [{ ExtraHosts: [':1.2.3.4'] }, 'bad format for add-host: ":1.2.3.4"'],
  [{ ExtraHosts: ['a:bad'] }, 'invalid IP address in add-host: "bad"'],
];

describe('HostConfig validation at create (dockerd messages)', () => {
  it('refuses what dockerd refuses, with its message', () => {
    for (const [hc, message] of hostConfigErrors) invalid(() => hostcfg(structuredClone(hc)), message);
  });

  it('accepts what dockerd accepts', () => {
    const ok: HostConfig[] = [
      { CapAdd: ['net_admin', 'cap_sys_admin', 'all', 'ALL', 'CAP_NET_RAW'] },
      { Isolation: 'default' },
      { Isolation: 'Default' },
      { CpusetCpus: '0,1', CpusetMems: '0' },
      { CpusetCpus: '0-1,1' },
      { Runtime: 'runc' },
      { Runtime: 'crun' },
      {
        SecurityOpt: [
          'no-new-privileges',
          'label=disable',
          'seccomp=unconfined',
          'apparmor=x',
          'label:disable',
        ],
      },
      { SecurityOpt: ['no-new-privileges=true', 'no-new-privileges=0', 'disable'] },
      { Binds: ['/tmp:/x:', '/tmp:/y:ro,z,rprivate', 'vol1:/z:nocopy'] },
      { ExtraHosts: ['a:host-gateway', 'b:::1', 'c:[::1]', 'd:10.0.0.1'] },
      { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 3 } },
      { RestartPolicy: { Name: 'unless-stopped' } },
      { Tmpfs: { '/x': '' }, Mounts: [{ Type: 'tmpfs', Target: '/x' }] },
      { NetworkMode: 'container:abc' },
      { MemorySwappiness: -1, PidsLimit: -5 },
      { Memory: 64 << 20, MemorySwap: -1 },
    ];
    for (const hc of ok) hostcfg(hc);
  });

  it('rejects conflicting options of the network and UTS modes', () => {
    const c = (config: object, hc: HostConfig) => () => validateHostConfig(hc, config, opts());
    invalid(c({ Hostname: 'h' }, { UTSMode: 'host' }), 'conflicting options: hostname and the UTS mode');
    invalid(
      c({ MacAddress: '02:42:ac:11:00:09' }, { NetworkMode: 'host' }),
      'conflicting options: mac-address and the network mode',
    );
    invalid(
      c({ ExposedPorts: { '80/tcp': {} } }, { NetworkMode: 'container:x' }),
      'conflicting options: port exposing and the container type network mode',
    );
    invalid(
      c({ Hostname: 'h' }, { NetworkMode: 'container:x' }),
      'conflicting options: hostname and the network mode',
    );
  });

  it('warns as dockerd does and discards what the kernel cannot apply', () => {
    const oom: HostConfig = { OomKillDisable: true };
    assert.deepEqual(hostcfg(oom), [
      'OOM killer is disabled for the container, but no memory limit is set, this can result in the system running out of resources.',
    ]);
    assert.deepEqual(hostcfg({ OomKillDisable: true, Memory: 10000000 }), []);
    assert.deepEqual(hostcfg({ KernelMemory: 10000000 }), [
      'Specifying a kernel memory limit is deprecated and will be removed in a future release.',
    ]);
    // from API 1.42 KernelMemory means nothing (it is dropped at create)
    assert.deepEqual(
      validateHostConfig({ KernelMemory: 10 }, {}, { kernelMemory: false, sysInfo: full }),
      [],
    );
    const pct: HostConfig = { CpuPercent: 50 };
    assert.deepEqual(hostcfg(pct), ['linux does not support CPU percent. Percent discarded.']);
    assert.equal(pct.CpuPercent, 0);

    // this host's kind of cgroup v1: no blkio weight files at the root of the blkio hierarchy
    const noWeight = { ...full, blkioWeight: false, blkioWeightDevice: false };
    const blkio: HostConfig = { BlkioWeight: 5, BlkioWeightDevice: [{ Path: '/dev/sda', Weight: 500 }] };
    assert.deepEqual(hostcfg(blkio, noWeight), [
      'Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.',
      'Your kernel does not support Block I/O weight_device or the cgroup is not mounted. Weight-device discarded.',
    ]);
    assert.equal(blkio.BlkioWeight, 0);
    assert.deepEqual(blkio.BlkioWeightDevice, []);

    const noSwap: HostConfig = { Memory: 64 << 20 };
    assert.deepEqual(hostcfg(noSwap, { ...full, swapLimit: false }), [
      'Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.',
    ]);
    assert.equal(noSwap.MemorySwap, -1);

    const bare = {
      ...full,
      memorySwappiness: false,
      oomKillDisable: false,
      pidsLimit: false,
      cpuShares: false,
      cpuCfs: false,
      cpuset: false,
    };
    const hc: HostConfig = {
      MemorySwappiness: 10,
      OomKillDisable: true,
      PidsLimit: 10,
      CpuShares: 512,
      CpuQuota: 50000,
      CpusetCpus: '0',
    };
    assert.deepEqual(hostcfg(hc, bare), [
      'Your kernel does not support memory swappiness capabilities or the cgroup is not mounted. Memory swappiness discarded.',
      'Your kernel does not support OomKillDisable. OomKillDisable discarded.',
      'Your kernel does not support PIDs limit capabilities or the cgroup is not mounted. PIDs limit discarded.',
      'Your kernel does not support CPU shares or the cgroup is not mounted. Shares discarded.',
      'Your kernel does not support CPU CFS scheduler. CPU period/quota discarded.',
      'Your kernel does not support cpuset or the cgroup is not mounted. Cpuset discarded.',
    ]);
    assert.deepEqual(
      [hc.MemorySwappiness, hc.OomKillDisable, hc.PidsLimit, hc.CpuShares, hc.CpuQuota, hc.CpusetCpus],
      [null, null, null, 0, 0, ''],
    );
    assert.deepEqual(hostcfg({}, { ...full, ipv4ForwardingDisabled: true }), [
      'IPv4 forwarding is disabled. Networking will not work.',
    ]);
    assert.deepEqual(hostcfg({ NetworkMode: 'host' }, { ...full, ipv4ForwardingDisabled: true }), []);
    invalid(
      () => hostcfg({ CpuRealtimeRuntime: 1000 }, { ...full, cpuRealtime: false }),
      'Your kernel does not support CPU real-time scheduler',
    );
  });

  it('reads this host: the CPUs and memory nodes online', () => {
    const si = hostSysInfo();
    assert.match(si.cpus, /^\d+(-\d+)?(,\d+(-\d+)?)*$/);
    assert.match(si.mems, /^\d+(-\d+)?(,\d+(-\d+)?)*$/);
    invalid(
      () => validateHostConfig({ CpusetCpus: '0-4000' }, {}, { kernelMemory: true }),
      /^Requested CPUs/,
    );
  });

  it('parses binds as dockerd (kind, mode, propagation)', () => {
    assert.deepEqual(parseBind('/tmp:/x:ro,rshared'), {
      source: '/tmp',
      destination: '/x',
      readOnly: true,
      mode: 'ro,rshared',
      propagation: 'rshared',
      kind: 'bind',
    });
    assert.equal(parseBind('vol:/x').kind, 'volume');
    assert.equal(parseBind('/anon').source, '');
    invalid(
      () => parseBind('rel'),
      `invalid volume specification: 'rel': invalid mount config for type "volume": invalid mount path: 'rel' mount path must be absolute`,
    );
  });

  it('config and endpoint checks', () => {
    invalid(() => validateConfig({ Env: [''] }), 'invalid environment variable: ');
    invalid(
      () => validateNetworkingConfig({ EndpointsConfig: { bridge: null } }),
      'no EndpointSettings for bridge',
    );
  });
});

describe('create-time adjustments (containers service, fake runtime)', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.cleanup();
  });
  const req = (config: CreateRequest['config'], hostConfig: HostConfig, name?: string): CreateRequest => ({
    config,
    hostConfig,
    networkingConfig: {},
    options: CREATE_OPTIONS,
    ...(name ? { name } : {}),
  });

  it('MemorySwap is twice Memory when unset; OomKillDisable false; discards stored', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox' }, { Memory: 64 << 20, CpuPercent: 5 }));
    const hc = (await h.service.inspect(Id)).HostConfig as HostConfig;
    assert.equal(hc.MemorySwap, hostSysInfo().swapLimit ? 128 << 20 : -1);
    assert.equal(hc.OomKillDisable, false);
    assert.equal(hc.CpuPercent, 0);
    const minus = await h.service.create(req({ Image: 'busybox' }, { Memory: 64 << 20, MemorySwap: -1 }));
    assert.equal(((await h.service.inspect(minus.Id)).HostConfig as HostConfig).MemorySwap, -1);
  });

  it('stores container:<name> modes with the full ID and gives Config.Hostname the short ID', async () => {
    const target = await h.service.create(req({ Image: 'busybox' }, {}, 'cv-target'));
    const { Id } = await h.service.create(
      req(
        { Image: 'busybox' },
        {
          NetworkMode: 'container:cv-target',
          IpcMode: 'container:cv-target',
          PidMode: 'container:cv-target',
        },
      ),
    );
    const view = await h.service.inspect(Id);
    const hc = view.HostConfig as HostConfig;
    assert.equal(hc.NetworkMode, `container:${target.Id}`);
    assert.equal(hc.IpcMode, `container:${target.Id}`);
    assert.equal(hc.PidMode, `container:${target.Id}`);
    assert.equal(view.Config.Hostname, Id.slice(0, 12));
  });

  it('refuses an unknown runtime; takes the ones the engine knows', async () => {
    await assert.rejects(h.service.create(req({ Image: 'busybox' }, { Runtime: 'bogus' })), {
      message: 'Unknown runtime specified bogus',
    });
    const { Id } = await h.service.create(req({ Image: 'busybox' }, { Runtime: 'runc' }));
    assert.equal(((await h.service.inspect(Id)).HostConfig as HostConfig).Runtime, 'runc');
  });
});
