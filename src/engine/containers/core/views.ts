import type {
  ContainerConfig,
  EndpointSettings,
  HostConfig,
  MountSpec,
  PortBinding,
} from '../../../common/docker-types.js';
import { sortedMap } from '../../../common/sorted-map.js';
import { parseTimestampMs } from '../../../common/time.js';
import type { Endpoint } from '../../network/network.types.js';
import { portsMap } from '../../network/ports/port-spec.js';
import { type ParsedBind, parseBind } from './mounts.validate.js';
import { type ContainerRecord, type ContainerStatus, type MountPoint, ZERO_TIME } from './record.types.js';
import { humanDuration } from './units.js';
import type {
  ContainerInspect,
  ContainerSummary,
  EndpointView,
  MountView,
  NetworkSettingsView,
  PortView,
  StateView,
} from './views.types.js';

/**
 * The container as GET /containers/{id}/json and GET /containers/json show it, for the newest API
 * version; the API layer removes or adds what older versions differ in. Key order follows dockerd.
 */

export interface ViewSource {
  record: ContainerRecord;
  hostConfig: HostConfig;
  /** Container IDs of running exec instances. */
  execIds: string[];
  /** The GraphDriver data (overlay dirs) when known. */
  graphDriverData?: Record<string, string>;
  sizeRw?: number;
  sizeRootFs?: number;
  /** HostConfig.Links as inspect shows them (`/target:/parent/alias`). */
  links?: string[] | null;
  /** All names (list): the container's and the link names pointing to it. */
  names?: string[];
}

/** Status text of the list ("Up 2 seconds", "Exited (0) 3 minutes ago"...). */
export function statusText(rec: ContainerRecord, now = Date.now()): string {
  const s = rec.State;
  // as dockerd's State.String: a running container's removal (its kill) shows it running
  if (!s.Running && (s.RemovalInProgress || s.Status === 'removing')) return 'Removal In Progress';
  if (!s.Running && (s.Dead || s.Status === 'dead')) return 'Dead';
  if (s.Restarting) {
    return `Restarting (${s.ExitCode}) ${humanDuration(now - parseTimestampMs(s.FinishedAt))} ago`;
  }
  if (s.Running) {
    let text = `Up ${humanDuration(now - parseTimestampMs(s.StartedAt))}`;
    if (s.Paused) text += ' (Paused)';
    const health = s.Health?.Status;
    if (health && health !== 'none') text += health === 'starting' ? ' (health: starting)' : ` (${health})`;
    return text;
  }
  if (s.StartedAt === ZERO_TIME) return 'Created';
  if (s.FinishedAt === ZERO_TIME) return '';
  return `Exited (${s.ExitCode}) ${humanDuration(now - parseTimestampMs(s.FinishedAt))} ago`;
}

export function listState(rec: ContainerRecord): ContainerStatus {
  return rec.State.Status;
}

/** The network the container's NetworkMode names, as the Networks map keys it. */
export function networkName(hc: HostConfig, rec?: ContainerRecord): string | undefined {
  // NetworkDisabled: on no network at all (dockerd's Networks is empty)
  if (rec?.Config.NetworkDisabled) return undefined;
  // the network its sandbox is on (`none` for the default mode of an engine without a bridge)
  if (rec?.Sandbox && !hc.NetworkMode?.startsWith('container:')) return rec.Sandbox.Network;
  const nm = hc.NetworkMode || 'default';
  if (nm === 'default' || nm === 'bridge') return 'bridge';
  if (nm === 'host' || nm === 'none') return nm;
  if (nm.startsWith('container:')) return undefined;
  return nm;
}

/**
 * The networks a container is on, its main network first (the NetworkMode's, which gives the
 * default route), then the others of its EndpointsConfig in order. After a `network connect` or
 * `disconnect` (NetworksExplicit), the EndpointsConfig alone says which (dockerd's Networks map).
 * `default` is the bridge's key of older API versions.
 */
export function attachedNetworkNames(hc: HostConfig, rec: ContainerRecord): string[] {
  const main = networkName(hc, rec);
  if (main === undefined || main === 'host' || main === 'none') return main ? [main] : [];
  const keys = Object.keys(rec.NetworkingConfig.EndpointsConfig ?? {}).map((k) =>
    k === 'default' ? 'bridge' : k,
  );
  if (rec.NetworksExplicit) return [...new Set(keys)];
  return [...new Set([main, ...keys])];
}

/** The container's current endpoints (records before user networks kept one). */
export function endpointsOf(rec: ContainerRecord): Endpoint[] {
  return rec.Endpoints ?? (rec.Endpoint ? [rec.Endpoint] : []);
}

/**
 * One endpoint: what the create request gave (IPAMConfig, Aliases...), the network's ID once the
 * container ran (dockerd keeps it after a stop), the addresses while it runs.
 */
function endpointView(
  given: EndpointSettings | null | undefined,
  rec: ContainerRecord,
  name: string,
): EndpointView {
  const live = endpointsOf(rec).find((e) => e.network === name);
  const sandbox = rec.Sandbox?.Network === name ? rec.Sandbox : undefined;
  return {
    IPAMConfig: given?.IPAMConfig ?? null,
    Links: given?.Links ?? null,
    Aliases: given?.Aliases ?? null,
    NetworkID: live?.networkId ?? sandbox?.NetworkID ?? given?.NetworkID ?? '',
    EndpointID: live?.endpointId ?? '',
    Gateway: live?.gateway ?? '',
    IPAddress: live?.ipAddress ?? '',
    IPPrefixLen: live?.prefixLen ?? 0,
    IPv6Gateway: live?.ipv6Gateway ?? '',
    GlobalIPv6Address: live?.ipv6Address ?? '',
    GlobalIPv6PrefixLen: live?.ipv6PrefixLen ?? 0,
    MacAddress: live?.macAddress ?? '',
    DriverOpts: given?.DriverOpts ?? null,
    GwPriority: given?.GwPriority ?? 0,
    DNSNames: given?.DNSNames ?? dnsNames(rec, name, given?.Aliases ?? []),
  };
}

/**
 * The names a container answers to on a user-defined network (moby's buildEndpointDNSNames):
 * its name, its aliases, its short ID and its hostname; none on the predefined networks.
 */
export function dnsNames(rec: ContainerRecord, network: string, aliases: string[]): string[] | null {
  if (network === 'bridge' || network === 'host' || network === 'none') return null;
  const names = [rec.Name.replace(/^\//, ''), ...aliases, rec.ID.slice(0, 12)];
  if (rec.Config.Hostname) names.push(rec.Config.Hostname);
  return [...new Set(names.filter((n) => n))];
}

/** The Networks map: every network the container is on. */
export function networksView(src: ViewSource): Record<string, EndpointView> {
  const out: Record<string, EndpointView> = {};
  for (const name of attachedNetworkNames(src.hostConfig, src.record)) {
    const given =
      src.record.NetworkingConfig.EndpointsConfig?.[name] ??
      (name === 'bridge' ? src.record.NetworkingConfig.EndpointsConfig?.default : undefined);
    out[name] = endpointView(given, src.record, name);
  }
  return out;
}

/** Ports as inspect shows them: the exposed and bound ports of a running container, with the host ports it got. */
function portsView(src: ViewSource): Record<string, PortBinding[] | null> {
  if (!src.record.State.Running) return {};
  const nm = src.hostConfig.NetworkMode ?? '';
  if (nm === 'host' || nm === 'none' || nm.startsWith('container:') || src.record.Config.NetworkDisabled)
    return {};
  return portsMap(
    Object.keys(src.record.Config.ExposedPorts ?? {}),
    Object.keys(src.hostConfig.PortBindings ?? {}),
    src.record.PublishedPorts ?? [],
  );
}

/** A bind of HostConfig.Binds as a mount point (propagation rprivate unless given). */
export function bindPoint(p: ParsedBind): MountPoint {
  return {
    Type: 'bind',
    Source: p.source,
    Destination: p.destination,
    Mode: p.mode,
    RW: !p.readOnly,
    Propagation: p.propagation || 'rprivate',
  };
}

/** A bind Mount of HostConfig.Mounts as a mount point. */
export function bindMountPoint(m: MountSpec): MountPoint {
  return {
    Type: 'bind',
    Source: m.Source ?? '',
    Destination: m.Target ?? '',
    Mode: '',
    RW: !m.ReadOnly,
    Propagation: m.BindOptions?.Propagation || 'rprivate',
  };
}

/** Inspect/list `Mounts`: binds and bind/tmpfs Mounts from HostConfig, then volumes and VolumesFrom. */
export function mountsView(hc: HostConfig, points: MountPoint[] = []): MountView[] {
  const out: MountView[] = [];
  for (const b of hc.Binds ?? []) {
    const p = parseBind(b);
    if (p.kind !== 'volume') out.push(mountPointView(bindPoint(p)));
  }
  for (const m of hc.Mounts ?? []) {
    // volumes and images: the record's mount points
    if (m.Type === 'bind') out.push(mountPointView(bindMountPoint(m)));
    else if (m.Type === 'tmpfs') {
      out.push({
        Type: 'tmpfs',
        Source: '',
        Destination: m.Target ?? '',
        Mode: '',
        RW: !m.ReadOnly,
        Propagation: '',
      });
    }
  }
  for (const m of points) out.push(mountPointView(m));
  return out;
}

/** Inspect/list `Mounts` entry of a mount point. */
export function mountPointView(m: MountPoint): MountView {
  if (m.Type === 'volume') {
    return {
      Type: 'volume',
      Name: m.Name ?? '',
      Source: m.Source,
      Destination: m.Destination,
      Driver: m.Driver ?? 'local',
      Mode: m.Mode,
      RW: m.RW,
      Propagation: m.Propagation,
    };
  }
  if (m.Type === 'image') {
    return {
      Type: 'image',
      Name: m.Name ?? '',
      Source: m.Source,
      Destination: m.Destination,
      Mode: m.Mode,
      RW: m.RW,
      Propagation: m.Propagation,
    };
  }
  return {
    Type: 'bind',
    Source: m.Source,
    Destination: m.Destination,
    Mode: m.Mode,
    RW: m.RW,
    Propagation: m.Propagation,
  };
}

/** The list's Command as dockerd writes it: the path, then the arguments, those with a space quoted. */
export function commandText(rec: ContainerRecord): string {
  if (!rec.Args.length) return rec.Path;
  return `${rec.Path} ${rec.Args.map((a) => (a.includes(' ') ? `'${a}'` : a)).join(' ')}`;
}

function stateView(rec: ContainerRecord): StateView {
  const s = rec.State;
  const out: StateView = {
    Status: s.Status,
    Running: s.Running,
    Paused: s.Paused,
    Restarting: s.Restarting,
    OOMKilled: s.OOMKilled,
    Dead: s.Dead,
    Pid: s.Pid,
    ExitCode: s.ExitCode,
    Error: s.Error,
    StartedAt: s.StartedAt,
    FinishedAt: s.FinishedAt,
  };
  if (s.Health) out.Health = s.Health;
  return out;
}

/** A map's value when it has keys (an absent key in JSON: JSON.stringify skips `undefined`). */
function nonEmpty<T extends object>(m: T | undefined | null): T | undefined {
  return m && Object.keys(m).length ? m : undefined;
}

/**
 * HostConfig as inspect echoes it, with dockerd's defaults and key order. One object literal, so
 * that V8 keeps it a fast object (JSON.stringify is ~30% slower on the dictionary object that
 * adding ~75 keys one group at a time made); keys dockerd leaves out when empty are `undefined`
 * here, which JSON leaves out too.
 */
export function hostConfigView(hc: HostConfig, links?: string[] | null): HostConfig {
  return {
    Binds: hc.Binds ?? null,
    ContainerIDFile: hc.ContainerIDFile ?? '',
    LogConfig: { Type: hc.LogConfig?.Type || 'json-file', Config: sortedMap(hc.LogConfig?.Config ?? {}) },
    NetworkMode: hc.NetworkMode || 'default',
    PortBindings: sortedMap(hc.PortBindings ?? {}),
    RestartPolicy: {
      Name: hc.RestartPolicy?.Name || 'no',
      MaximumRetryCount: hc.RestartPolicy?.MaximumRetryCount ?? 0,
    },
    AutoRemove: hc.AutoRemove ?? false,
    VolumeDriver: hc.VolumeDriver ?? '',
    VolumesFrom: hc.VolumesFrom ?? null,
    Annotations: sortedMap(nonEmpty(hc.Annotations)),
    CapAdd: hc.CapAdd ?? null,
    CapDrop: hc.CapDrop ?? null,
    CgroupnsMode: hc.CgroupnsMode || 'host',
    Dns: hc.Dns ?? [],
    DnsOptions: hc.DnsOptions ?? [],
    DnsSearch: hc.DnsSearch ?? [],
    ExtraHosts: hc.ExtraHosts ?? null,
    GroupAdd: hc.GroupAdd ?? null,
    IpcMode: hc.IpcMode ?? '',
    Cgroup: hc.Cgroup ?? '',
    Links: links !== undefined ? links : (hc.Links ?? null),
    OomScoreAdj: hc.OomScoreAdj ?? 0,
    PidMode: hc.PidMode ?? '',
    Privileged: hc.Privileged ?? false,
    PublishAllPorts: hc.PublishAllPorts ?? false,
    ReadonlyRootfs: hc.ReadonlyRootfs ?? false,
    SecurityOpt: hc.SecurityOpt ?? null,
    StorageOpt: sortedMap(nonEmpty(hc.StorageOpt)),
    Tmpfs: sortedMap(nonEmpty(hc.Tmpfs)),
    UTSMode: hc.UTSMode ?? '',
    UsernsMode: hc.UsernsMode ?? '',
    ShmSize: hc.ShmSize ?? 67108864,
    Sysctls: sortedMap(nonEmpty(hc.Sysctls)),
    Runtime: hc.Runtime || 'runc',
    ConsoleSize: hc.ConsoleSize ?? [0, 0],
    Isolation: hc.Isolation ?? '',
    CpuShares: hc.CpuShares ?? 0,
    Memory: hc.Memory ?? 0,
    NanoCpus: hc.NanoCpus ?? 0,
    CgroupParent: hc.CgroupParent ?? '',
    BlkioWeight: hc.BlkioWeight ?? 0,
    BlkioWeightDevice: hc.BlkioWeightDevice ?? [],
    BlkioDeviceReadBps: hc.BlkioDeviceReadBps ?? [],
    BlkioDeviceWriteBps: hc.BlkioDeviceWriteBps ?? [],
    BlkioDeviceReadIOps: hc.BlkioDeviceReadIOps ?? [],
    BlkioDeviceWriteIOps: hc.BlkioDeviceWriteIOps ?? [],
    CpuPeriod: hc.CpuPeriod ?? 0,
    CpuQuota: hc.CpuQuota ?? 0,
    CpuRealtimePeriod: hc.CpuRealtimePeriod ?? 0,
    CpuRealtimeRuntime: hc.CpuRealtimeRuntime ?? 0,
    CpusetCpus: hc.CpusetCpus ?? '',
    CpusetMems: hc.CpusetMems ?? '',
    Devices: hc.Devices ?? [],
    DeviceCgroupRules: hc.DeviceCgroupRules ?? null,
    DeviceRequests: hc.DeviceRequests ?? null,
    KernelMemory: hc.KernelMemory ?? 0,
    KernelMemoryTCP: hc.KernelMemoryTCP ?? 0,
    MemoryReservation: hc.MemoryReservation ?? 0,
    MemorySwap: hc.MemorySwap ?? 0,
    MemorySwappiness: hc.MemorySwappiness ?? null,
    OomKillDisable: hc.OomKillDisable ?? false,
    PidsLimit: hc.PidsLimit ?? null,
    Ulimits: hc.Ulimits ?? [],
    CpuCount: hc.CpuCount ?? 0,
    CpuPercent: hc.CpuPercent ?? 0,
    IOMaximumIOps: hc.IOMaximumIOps ?? 0,
    IOMaximumBandwidth: hc.IOMaximumBandwidth ?? 0,
    Mounts: hc.Mounts?.length ? hc.Mounts : undefined,
    Init: hc.Init ?? undefined,
    MaskedPaths: hc.MaskedPaths ?? null,
    ReadonlyPaths: hc.ReadonlyPaths ?? null,
  };
}

function configView(rec: ContainerRecord): ContainerConfig {
  const c = rec.Config;
  const out: ContainerConfig = {
    Hostname: c.Hostname ?? '',
    Domainname: c.Domainname ?? '',
    User: c.User ?? '',
    AttachStdin: c.AttachStdin ?? false,
    AttachStdout: c.AttachStdout ?? false,
    AttachStderr: c.AttachStderr ?? false,
  };
  if (c.ExposedPorts && Object.keys(c.ExposedPorts).length) out.ExposedPorts = sortedMap(c.ExposedPorts);
  Object.assign(out, {
    Tty: c.Tty ?? false,
    OpenStdin: c.OpenStdin ?? false,
    StdinOnce: c.StdinOnce ?? false,
    Env: c.Env ?? null,
    Cmd: c.Cmd ?? null,
  });
  if (c.Healthcheck) out.Healthcheck = c.Healthcheck;
  if (c.ArgsEscaped) out.ArgsEscaped = c.ArgsEscaped;
  Object.assign(out, {
    Image: c.Image ?? '',
    Volumes: c.Volumes && Object.keys(c.Volumes).length > 0 ? sortedMap(c.Volumes) : null,
    WorkingDir: c.WorkingDir ?? '',
    Entrypoint: c.Entrypoint ?? null,
  });
  if (c.NetworkDisabled) out.NetworkDisabled = c.NetworkDisabled;
  if (c.MacAddress) out.MacAddress = c.MacAddress;
  out.OnBuild = c.OnBuild ?? null;
  out.Labels = sortedMap(c.Labels ?? {});
  if (c.StopSignal) out.StopSignal = c.StopSignal;
  if (c.StopTimeout !== undefined && c.StopTimeout !== null) out.StopTimeout = c.StopTimeout;
  if (c.Shell) out.Shell = c.Shell;
  return out;
}

/**
 * The namespace: a bridge sandbox's file (kept after a stop, as dockerd shows it); the one the
 * runtime made (none) while the container runs; none for host and `container:` modes.
 */
function sandboxKey(rec: ContainerRecord, hc: HostConfig): string {
  const nm = hc.NetworkMode ?? '';
  if (nm === 'host' || nm.startsWith('container:')) return '';
  if (rec.Sandbox?.Key) return rec.Sandbox.Key;
  if (!rec.State.Running || rec.State.Pid <= 0) return '';
  return `/proc/${rec.State.Pid}/ns/net`;
}

/** The top-level address fields: dockerd fills them from the default bridge's endpoint only. */
function bridgeAddress(
  rec: ContainerRecord,
): Pick<
  NetworkSettingsView,
  | 'EndpointID'
  | 'Gateway'
  | 'GlobalIPv6Address'
  | 'GlobalIPv6PrefixLen'
  | 'IPAddress'
  | 'IPPrefixLen'
  | 'IPv6Gateway'
  | 'MacAddress'
> {
  const ep = rec.Endpoint?.network === 'bridge' ? rec.Endpoint : undefined;
  return {
    EndpointID: ep?.endpointId ?? '',
    Gateway: ep?.gateway ?? '',
    GlobalIPv6Address: ep?.ipv6Address ?? '',
    GlobalIPv6PrefixLen: ep?.ipv6PrefixLen ?? 0,
    IPAddress: ep?.ipAddress ?? '',
    IPPrefixLen: ep?.prefixLen ?? 0,
    IPv6Gateway: ep?.ipv6Gateway ?? '',
    MacAddress: ep?.macAddress ?? '',
  };
}

function sandboxId(rec: ContainerRecord, hc: HostConfig, key: string): string {
  if (hc.NetworkMode?.startsWith('container:')) return '';
  if (rec.Sandbox) return rec.Sandbox.ID;
  // a runtime-made namespace without the network layer: the container is its own sandbox
  return key ? rec.ID : '';
}

export function inspectView(src: ViewSource): ContainerInspect {
  const rec = src.record;
  const started = rec.State.StartedAt !== ZERO_TIME || rec.HasBeenStartedBefore;
  const sk = sandboxKey(rec, src.hostConfig);
  return {
    Id: rec.ID,
    Created: rec.Created,
    Path: rec.Path,
    Args: rec.Args,
    State: stateView(rec),
    Image: rec.Image,
    ResolvConfPath: started ? rec.ResolvConfPath : '',
    HostnamePath: started ? rec.HostnamePath : '',
    HostsPath: started ? rec.HostsPath : '',
    LogPath: started && rec.LogPath && src.hostConfig.LogConfig?.Type !== 'none' ? rec.LogPath : '',
    Name: rec.Name,
    RestartCount: rec.RestartCount,
    Driver: rec.Driver,
    Platform: rec.Platform,
    MountLabel: rec.MountLabel,
    ProcessLabel: rec.ProcessLabel,
    AppArmorProfile: rec.AppArmorProfile,
    ExecIDs: src.execIds.length ? src.execIds : null,
    HostConfig: hostConfigView(src.hostConfig, src.links),
    GraphDriver: { Data: sortedMap(src.graphDriverData) ?? null, Name: rec.Driver },
    // undefined keys are left out of the JSON (size only when asked for)
    SizeRw: src.sizeRw,
    SizeRootFs: src.sizeRootFs,
    Mounts: mountsView(src.hostConfig, src.record.MountPoints),
    Config: configView(rec),
    NetworkSettings: {
      Bridge: '',
      SandboxID: sandboxId(rec, src.hostConfig, sk),
      HairpinMode: false,
      LinkLocalIPv6Address: '',
      LinkLocalIPv6PrefixLen: 0,
      Ports: portsView(src),
      SandboxKey: sk,
      SecondaryIPAddresses: null,
      SecondaryIPv6Addresses: null,
      ...bridgeAddress(rec),
      Networks: networksView(src),
    },
  };
}

/**
 * List Ports: a running container's ports, one entry per host binding (IP, PublicPort) and one
 * for each port without any, as dockerd lists them.
 */
function listPorts(src: ViewSource): PortView[] {
  const out: PortView[] = [];
  for (const [key, bindings] of Object.entries(portsView(src))) {
    const [port = '', proto = 'tcp'] = key.split('/');
    const n = Number(port);
    if (!Number.isInteger(n)) continue;
    if (!bindings?.length) out.push({ PrivatePort: n, Type: proto });
    for (const b of bindings ?? []) {
      out.push({ IP: b.HostIp ?? '', PrivatePort: n, PublicPort: Number(b.HostPort), Type: proto });
    }
  }
  return out.sort((a, b) => Number(a.PrivatePort) - Number(b.PrivatePort));
}

export function listItemView(src: ViewSource & { imageName: string; now?: number }): ContainerSummary {
  const rec = src.record;
  const annotations = src.hostConfig.Annotations;
  return {
    Id: rec.ID,
    Names: src.names ?? [rec.Name],
    Image: src.imageName,
    ImageID: rec.Image,
    Command: commandText(rec),
    Created: Math.floor(parseTimestampMs(rec.Created) / 1000),
    Ports: listPorts(src),
    // the list leaves a zero SizeRw out (omitempty); inspect shows it
    SizeRw: src.sizeRw ? src.sizeRw : undefined,
    SizeRootFs: src.sizeRootFs,
    Labels: rec.Config.Labels ?? {},
    State: listState(rec),
    Status: statusText(rec, src.now),
    HostConfig: {
      NetworkMode: src.hostConfig.NetworkMode || 'default',
      Annotations: annotations && Object.keys(annotations).length ? annotations : undefined,
    },
    NetworkSettings: { Networks: networksView(src) },
    Mounts: mountsView(src.hostConfig, src.record.MountPoints),
    Health: {
      Status: rec.State.Health?.Status ?? 'none',
      FailingStreak: rec.State.Health?.FailingStreak ?? 0,
    },
  };
}
