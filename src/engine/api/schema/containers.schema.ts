import type { ContainerConfig, HostConfig } from '../../../common/docker-types.js';
import type { NetworkingConfig } from '../../containers/core/record.types.js';
import {
  array,
  bool,
  decodeStruct,
  duration,
  type Fields,
  fileMode,
  goInt,
  int64,
  named,
  str,
  stringMap,
  strings,
  strslice,
  struct,
  uint,
  uint16,
  uint64,
} from './go-json.js';

/**
 * The JSON types of a container create and update body, as moby declares them (api/types/container
 * Config and HostConfig, network.NetworkingConfig, runconfig.ContainerConfigWrapper), and their
 * decoders (go-json.ts: Go's encoding/json rules and messages).
 */

const healthConfig = struct('container.HealthConfig', {
  Test: strings,
  Interval: duration,
  Timeout: duration,
  StartPeriod: duration,
  StartInterval: duration,
  Retries: goInt,
});

/** container.Config */
export const configFields: Fields = {
  Hostname: str,
  Domainname: str,
  User: str,
  AttachStdin: bool,
  AttachStdout: bool,
  AttachStderr: bool,
  ExposedPorts: { k: 'map', go: 'nat.PortSet', elem: { k: 'empty' } },
  Tty: bool,
  OpenStdin: bool,
  StdinOnce: bool,
  Env: strings,
  Cmd: strslice,
  Healthcheck: healthConfig,
  ArgsEscaped: bool,
  Image: str,
  Volumes: { k: 'map', go: 'map[string]struct {}', elem: { k: 'empty' } },
  WorkingDir: str,
  Entrypoint: strslice,
  NetworkDisabled: bool,
  MacAddress: str,
  OnBuild: strings,
  Labels: stringMap,
  StopSignal: str,
  StopTimeout: goInt,
  Shell: strslice,
};

const weightDevice = struct('blkiodev.WeightDevice', { Path: str, Weight: uint16 });
const throttleDevice = struct('blkiodev.ThrottleDevice', { Path: str, Rate: uint64 });
const throttleList = array('[]*blkiodev.ThrottleDevice', throttleDevice);

/** moby's mount.Mount (a container's HostConfig.Mounts, a service's ContainerSpec.Mounts). */
export const mountFields: Fields = {
  Type: named('mount.Type'),
  Source: str,
  Target: str,
  ReadOnly: bool,
  Consistency: named('mount.Consistency'),
  BindOptions: struct('mount.BindOptions', {
    Propagation: named('mount.Propagation'),
    NonRecursive: bool,
    CreateMountpoint: bool,
    ReadOnlyNonRecursive: bool,
    ReadOnlyForceRecursive: bool,
  }),
  VolumeOptions: struct('mount.VolumeOptions', {
    NoCopy: bool,
    Labels: stringMap,
    DriverConfig: struct('mount.Driver', { Name: str, Options: stringMap }),
    Subpath: str,
  }),
  TmpfsOptions: struct('mount.TmpfsOptions', {
    SizeBytes: int64,
    Mode: fileMode,
    Options: array('[][]string', strings),
  }),
  ImageOptions: struct('mount.ImageOptions', { Subpath: str }),
  ClusterOptions: struct('mount.ClusterOptions', {}),
};

/** container.HostConfig, with the embedded container.Resources. */
export const hostConfigFields: Fields = {
  Binds: strings,
  ContainerIDFile: str,
  LogConfig: struct('container.LogConfig', { Type: str, Config: stringMap }),
  NetworkMode: named('container.NetworkMode'),
  PortBindings: {
    k: 'map',
    go: 'nat.PortMap',
    elem: array('[]nat.PortBinding', struct('nat.PortBinding', { HostIp: str, HostPort: str })),
  },
  RestartPolicy: struct('container.RestartPolicy', { Name: str, MaximumRetryCount: goInt }),
  AutoRemove: bool,
  VolumeDriver: str,
  VolumesFrom: strings,
  ConsoleSize: array('[2]uint', uint),
  Annotations: stringMap,
  CapAdd: strslice,
  CapDrop: strslice,
  CgroupnsMode: named('container.CgroupnsMode'),
  Dns: strings,
  DnsOptions: strings,
  DnsSearch: strings,
  ExtraHosts: strings,
  GroupAdd: strings,
  IpcMode: named('container.IpcMode'),
  Cgroup: named('container.CgroupSpec'),
  Links: strings,
  OomScoreAdj: goInt,
  PidMode: named('container.PidMode'),
  Privileged: bool,
  PublishAllPorts: bool,
  ReadonlyRootfs: bool,
  SecurityOpt: strings,
  StorageOpt: stringMap,
  Tmpfs: stringMap,
  UTSMode: named('container.UTSMode'),
  UsernsMode: named('container.UsernsMode'),
  ShmSize: int64,
  Sysctls: stringMap,
  Runtime: str,
  Isolation: named('container.Isolation'),
  // Resources
  CpuShares: int64,
  Memory: int64,
  NanoCpus: int64,
  CgroupParent: str,
  BlkioWeight: uint16,
  BlkioWeightDevice: array('[]*blkiodev.WeightDevice', weightDevice),
  BlkioDeviceReadBps: throttleList,
  BlkioDeviceWriteBps: throttleList,
  BlkioDeviceReadIOps: throttleList,
  BlkioDeviceWriteIOps: throttleList,
  CpuPeriod: int64,
  CpuQuota: int64,
  CpuRealtimePeriod: int64,
  CpuRealtimeRuntime: int64,
  CpusetCpus: str,
  CpusetMems: str,
  Devices: array(
    '[]container.DeviceMapping',
    struct('container.DeviceMapping', { PathOnHost: str, PathInContainer: str, CgroupPermissions: str }),
  ),
  DeviceCgroupRules: strings,
  DeviceRequests: array(
    '[]container.DeviceRequest',
    struct('container.DeviceRequest', {
      Driver: str,
      Count: goInt,
      DeviceIDs: strings,
      Capabilities: array('[][]string', strings),
      Options: stringMap,
    }),
  ),
  KernelMemory: int64,
  KernelMemoryTCP: int64,
  MemoryReservation: int64,
  MemorySwap: int64,
  MemorySwappiness: int64,
  OomKillDisable: bool,
  PidsLimit: int64,
  Ulimits: array('[]*units.Ulimit', struct('units.Ulimit', { Name: str, Hard: int64, Soft: int64 })),
  CpuCount: int64,
  CpuPercent: int64,
  IOMaximumIOps: uint64,
  IOMaximumBandwidth: uint64,
  // end of Resources
  Mounts: array('[]mount.Mount', struct('mount.Mount', mountFields)),
  MaskedPaths: strings,
  ReadonlyPaths: strings,
  Init: bool,
};

const hostConfig = struct('container.HostConfig', hostConfigFields);

const endpointSettings = struct('network.EndpointSettings', {
  IPAMConfig: struct('network.EndpointIPAMConfig', {
    IPv4Address: str,
    IPv6Address: str,
    LinkLocalIPs: strings,
  }),
  Links: strings,
  Aliases: strings,
  MacAddress: str,
  NetworkID: str,
  EndpointID: str,
  Gateway: str,
  IPAddress: str,
  IPPrefixLen: goInt,
  IPv6Gateway: str,
  GlobalIPv6Address: str,
  GlobalIPv6PrefixLen: goInt,
  DriverOpts: stringMap,
  DNSNames: strings,
  GwPriority: goInt,
});

const networkingConfig = struct('network.NetworkingConfig', {
  EndpointsConfig: { k: 'map', go: 'map[string]*network.EndpointSettings', elem: endpointSettings },
});

/**
 * runconfig.ContainerConfigWrapper: the Config fields, `HostConfig`, `NetworkingConfig`, the
 * deprecated `Cpuset`, and (embedded, deprecated) every HostConfig field at the top level.
 */
export const wrapperFields: Fields = {
  ...configFields,
  HostConfig: hostConfig,
  Cpuset: str,
  NetworkingConfig: networkingConfig,
  ...hostConfigFields,
};

/** container.Resources' JSON names: what an update may change, with RestartPolicy. */
const RESOURCE_FIELDS = [
  'CpuShares',
  'Memory',
  'NanoCpus',
  'CgroupParent',
  'BlkioWeight',
  'BlkioWeightDevice',
  'BlkioDeviceReadBps',
  'BlkioDeviceWriteBps',
  'BlkioDeviceReadIOps',
  'BlkioDeviceWriteIOps',
  'CpuPeriod',
  'CpuQuota',
  'CpuRealtimePeriod',
  'CpuRealtimeRuntime',
  'CpusetCpus',
  'CpusetMems',
  'Devices',
  'DeviceCgroupRules',
  'DeviceRequests',
  'KernelMemory',
  'KernelMemoryTCP',
  'MemoryReservation',
  'MemorySwap',
  'MemorySwappiness',
  'OomKillDisable',
  'PidsLimit',
  'Ulimits',
  'CpuCount',
  'CpuPercent',
  'IOMaximumIOps',
  'IOMaximumBandwidth',
] as const;

/** container.UpdateConfig (POST /containers/{id}/update): Resources and RestartPolicy. */
export const updateConfigFields: Fields = Object.fromEntries(
  [...RESOURCE_FIELDS, 'RestartPolicy'].map((f) => {
    const node = hostConfigFields[f];
    if (!node) throw new Error(`HostConfig has no field ${f}`);
    return [f, node];
  }),
);

/** An update body, decoded as dockerd's json.Decoder fills container.UpdateConfig. */
export function decodeUpdateJson(body: Record<string, unknown>): HostConfig {
  return decodeStruct(body, updateConfigFields, 'UpdateConfig', []) as HostConfig;
}

export interface DecodedCreateBody {
  /** undefined when the body names no Config field (dockerd's `Config` is nil then). */
  config?: ContainerConfig;
  /** The HostConfig dockerd takes (ContainerConfigWrapper.getHostConfig); undefined for none. */
  hostConfig?: HostConfig;
  networkingConfig?: NetworkingConfig;
}

/** Legacy top-level fields copied into a given HostConfig when that one has them unset. */
const LEGACY_COPIED = ['Memory', 'MemorySwap', 'CpuShares', 'CpusetCpus', 'VolumeDriver'] as const;

/**
 * Decode a create body (the parsed JSON object) as dockerd's decodeContainerConfig does: types
 * checked against moby's structs (400 with Go's message on a mismatch), keys mapped to their
 * canonical names case-insensitively, unknown keys dropped, and the HostConfig resolved from
 * `HostConfig` and the deprecated top-level fields as getHostConfig does.
 */
export function decodeCreateJson(body: Record<string, unknown>): DecodedCreateBody {
  const all = decodeStruct(body, wrapperFields, 'ContainerConfigWrapper', []);
  const out: DecodedCreateBody = {};
  let config: Record<string, unknown> | undefined;
  let top: Record<string, unknown> | undefined;
  for (const [field, value] of Object.entries(all)) {
    if (Object.hasOwn(configFields, field)) {
      config ??= {};
      config[field] = value;
    } else if (Object.hasOwn(hostConfigFields, field)) {
      top ??= {};
      top[field] = value;
    }
  }
  if (config) out.config = config as ContainerConfig;
  const inner = (all.HostConfig ?? undefined) as Record<string, unknown> | undefined;
  let hc: Record<string, unknown> | undefined;
  if (!top) hc = inner;
  else if (!inner) hc = top;
  else {
    for (const f of LEGACY_COPIED) if (top[f] && !inner[f]) inner[f] = top[f];
    hc = inner;
  }
  const cpuset = all.Cpuset;
  if (hc && typeof cpuset === 'string' && cpuset !== '' && !hc.CpusetCpus) hc.CpusetCpus = cpuset;
  if (hc) out.hostConfig = hc as HostConfig;
  if (all.NetworkingConfig) out.networkingConfig = all.NetworkingConfig as NetworkingConfig;
  return out;
}
