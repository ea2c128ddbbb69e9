import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import type { ExecCreateRequest, ExecStartRequest } from './exec.js';
import type { NetworkingConfig } from './types.js';

/**
 * The JSON types of a container create body (and of the exec bodies), as moby declares them (api/types/container Config
 * and HostConfig up to API 1.44, network.NetworkingConfig, runconfig.ContainerConfigWrapper), and
 * a decoder that reads a body the way Go's encoding/json does: keys match struct fields exactly or
 * else case-insensitively, unknown keys are dropped, `null` leaves a field unset, a value of the
 * wrong JSON type or a number that does not fit the field's integer type is refused with the
 * message Go gives (dockerd answers it with 500; berth with 400).
 */

type Node =
  | { k: 'bool'; go: string }
  | { k: 'string'; go: string }
  /** An integer type: Go refuses fractions and values out of range (`number 1.5`). */
  | { k: 'int'; go: string; min: number; max: number }
  /** strslice.StrSlice: a string or an array of strings (decoded to an array). */
  | { k: 'strslice' }
  | { k: 'array'; go: string; elem: Node }
  | { k: 'map'; go: string; elem: Node }
  /** `struct {}`: any object. */
  | { k: 'empty' }
  /** `name` is what Go's errors call the struct (`HostConfig`), `go` its qualified type. */
  | { k: 'struct'; go: string; name: string; fields: Fields };

type Fields = Record<string, Node>;

const bool: Node = { k: 'bool', go: 'bool' };
const str: Node = { k: 'string', go: 'string' };
const named = (go: string): Node => ({ k: 'string', go });
const int = (go: string, min: number, max: number): Node => ({ k: 'int', go, min, max });
// JSON numbers are doubles: 2^63 - 1 reads as 2^63, so the bound is inclusive of that.
const int64 = int('int64', -(2 ** 63), 2 ** 63);
const goInt = int('int', -(2 ** 63), 2 ** 63);
const uint16 = int('uint16', 0, 65535);
const uint64 = int('uint64', 0, 2 ** 64);
const uint = int('uint', 0, 2 ** 64);
const duration = int('time.Duration', -(2 ** 63), 2 ** 63);
const fileMode = int('fs.FileMode', 0, 2 ** 32 - 1);
const strslice: Node = { k: 'strslice' };
const strings: Node = { k: 'array', go: '[]string', elem: str };
const stringMap: Node = { k: 'map', go: 'map[string]string', elem: str };
const struct = (go: string, fields: Fields): Node => ({
  k: 'struct',
  go,
  name: go.slice(go.lastIndexOf('.') + 1),
  fields,
});
const array = (go: string, elem: Node): Node => ({ k: 'array', go, elem });

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

const mountFields: Fields = {
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
  }),
  TmpfsOptions: struct('mount.TmpfsOptions', { SizeBytes: int64, Mode: fileMode }),
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
});

const networkingConfig = struct('network.NetworkingConfig', {
  EndpointsConfig: { k: 'map', go: 'map[string]*network.EndpointSettings', elem: endpointSettings },
});

/**
 * runconfig.ContainerConfigWrapper: the Config fields, `HostConfig`, `NetworkingConfig`, the
 * deprecated `Cpuset`, and (embedded, deprecated) every HostConfig field at the top level.
 */
const wrapperFields: Fields = {
  ...configFields,
  HostConfig: hostConfig,
  Cpuset: str,
  NetworkingConfig: networkingConfig,
  ...hostConfigFields,
};

/** Field lookup: exact name first, then the first field equal to the key ignoring case (Go). */
const folded = new WeakMap<Fields, Map<string, string>>();
function fieldName(fields: Fields, key: string): string | undefined {
  if (Object.hasOwn(fields, key)) return key;
  let byLower = folded.get(fields);
  if (!byLower) {
    byLower = new Map();
    for (const name of Object.keys(fields)) {
      const lower = name.toLowerCase();
      if (!byLower.has(lower)) byLower.set(lower, name);
    }
    folded.set(fields, byLower);
  }
  return byLower.get(key.toLowerCase());
}

/** Where a value sits, for Go's message: the enclosing struct's name and the path of field names. */
interface At {
  struct: string;
  path: string[];
}

function jsonKind(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  return typeof v; // string, number, object
}

function typeError(v: unknown, node: Node, at: At, literal = false): Error {
  const what = literal ? `number ${String(v)}` : jsonKind(v);
  const go = node.k === 'strslice' ? 'string' : node.k === 'empty' ? 'struct {}' : node.go;
  return invalidParameter(
    `json: cannot unmarshal ${what} into Go struct field ${at.struct}.${at.path.join('.')} of type ${go}`,
  );
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * What a `null` array element or map value becomes: Go's zero value for scalars; `null` for
 * structs and lists, which validation refuses where an entry is needed.
 */
function zero(node: Node): unknown {
  switch (node.k) {
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'int':
      return 0;
    case 'empty':
      return {};
    default:
      return null;
  }
}

function decodeValue(v: unknown, node: Node, at: At): unknown {
  switch (node.k) {
    case 'bool':
      if (typeof v !== 'boolean') throw typeError(v, node, at);
      return v;
    case 'string':
      if (typeof v !== 'string') throw typeError(v, node, at);
      return v;
    case 'int':
      if (typeof v !== 'number') throw typeError(v, node, at);
      if (!Number.isInteger(v) || v < node.min || v > node.max) throw typeError(v, node, at, true);
      return v;
    case 'strslice':
      // StrSlice.UnmarshalJSON: an array of strings, else one string (Go reports the second try)
      if (typeof v === 'string') return [v];
      if (!Array.isArray(v)) throw typeError(v, node, at);
      return v.map((s) => {
        if (s === null) return '';
        if (typeof s !== 'string') throw typeError(v, node, at);
        return s;
      });
    case 'empty':
      if (!isObject(v)) throw typeError(v, node, at);
      return {};
    case 'array': {
      if (!Array.isArray(v)) throw typeError(v, node, at);
      return v.map((e) => (e === null ? zero(node.elem) : decodeValue(e, node.elem, at)));
    }
    case 'map': {
      if (!isObject(v)) throw typeError(v, node, at);
      const out: Record<string, unknown> = {};
      for (const [key, e] of Object.entries(v)) {
        const value = e === null ? zero(node.elem) : decodeValue(e, node.elem, at);
        // a data key (`__proto__` too) as an own property, never a prototype
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
    case 'struct':
      if (!isObject(v)) throw typeError(v, node, at);
      return decodeStruct(v, node.fields, node.name, at.path);
  }
}

function decodeStruct(
  v: Record<string, unknown>,
  fields: Fields,
  name: string,
  path: string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(v)) {
    const field = fieldName(fields, key);
    if (field === undefined) continue; // unknown: ignored, as Go does
    const node = fields[field] as Node;
    out[field] = value === null ? null : decodeValue(value, node, { struct: name, path: [...path, field] });
  }
  return out;
}

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
const updateConfigFields: Fields = Object.fromEntries(
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

/** types.ExecConfig (POST /containers/{id}/exec). */
const execConfigFields: Fields = {
  User: str,
  Privileged: bool,
  Tty: bool,
  ConsoleSize: array('*[2]uint', uint),
  AttachStdin: bool,
  AttachStderr: bool,
  AttachStdout: bool,
  Detach: bool,
  DetachKeys: str,
  Env: strings,
  WorkingDir: str,
  Cmd: strings,
};

/** types.ExecStartCheck (POST /exec/{id}/start). */
const execStartFields: Fields = {
  Detach: bool,
  Tty: bool,
  ConsoleSize: array('*[2]uint', uint),
};

/** An exec create body, decoded as dockerd's json.Decoder fills types.ExecConfig. */
export function decodeExecCreateJson(body: Record<string, unknown>): ExecCreateRequest {
  return decodeStruct(body, execConfigFields, 'ExecConfig', []) as ExecCreateRequest;
}

/** An exec start body, decoded as dockerd's json.Decoder fills types.ExecStartCheck. */
export function decodeExecStartJson(body: Record<string, unknown>): ExecStartRequest {
  return decodeStruct(body, execStartFields, 'ExecStartCheck', []) as ExecStartRequest;
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
