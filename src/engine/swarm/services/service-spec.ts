import { invalidParameter } from '../../../common/errors.js';
import { generateName } from '../../containers/core/names.js';
import type {
  ContainerSpec,
  EndpointSpec,
  Mount,
  NetworkAttachmentConfig,
  Privileges,
  ServiceMode,
  ServiceSpec,
  TaskSpec,
  UpdateConfig,
} from './service.types.js';

/**
 * A ServiceSpec as dockerd keeps it: what its convert package makes of the request on the way
 * into swarmkit and back out (daemon/cluster/convert/service.go, container.go). The fields a
 * client sent are kept as sent; the few that dockerd always fills are filled the same way (Labels
 * `{}`, a Replicated mode of 1, Runtime `container`, ForceUpdate 0, RestartPolicy's Condition and
 * MaxAttempts, UpdateConfig's FailureAction and Order, EndpointSpec's Mode and the ports'
 * Protocol and PublishMode, ContainerSpec's Isolation), and empty lists and strings are left
 * out as Go's `omitempty` does. The conversion's errors are dockerd's, with its words.
 */

const MODE_KEYS = ['Replicated', 'Global', 'ReplicatedJob', 'GlobalJob'] as const;

/** Drops `null` (Go's nil: the field unset; a nil entry of a list: nothing) at every level. */
function dropNulls<T>(value: T): T {
  if (Array.isArray(value)) return value.filter((v) => v !== null).map((v) => dropNulls(v)) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === null || v === undefined) continue;
      Object.defineProperty(out, k, {
        value: dropNulls(v),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out as T;
  }
  return value;
}

/** Go's `omitempty` on a non-pointer field: the zero value and empty lists and maps are left out. */
function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null || v === '' || v === 0 || v === false) return true;
  if (Array.isArray(v)) return v.length === 0;
  return false;
}

function isEmptyMap(v: unknown): boolean {
  return v === undefined || (typeof v === 'object' && v !== null && Object.keys(v).length === 0);
}

/** Copies the listed fields of `src` in that order, leaving out the ones `omit` says are empty. */
function pick<T extends object>(src: T, fields: readonly (keyof T)[], omit: (k: keyof T) => boolean): T {
  const out = {} as T;
  for (const f of fields) {
    const v = src[f];
    if (v === undefined) continue;
    if (omit(f) && (isEmpty(v) || (typeof v === 'object' && !Array.isArray(v) && isEmptyMap(v)))) continue;
    out[f] = v;
  }
  return out;
}

const CONTAINER_FIELDS: (keyof ContainerSpec)[] = [
  'Image',
  'Labels',
  'Command',
  'Args',
  'Hostname',
  'Env',
  'Dir',
  'User',
  'Groups',
  'Privileges',
  'Init',
  'StopSignal',
  'TTY',
  'OpenStdin',
  'ReadOnly',
  'Mounts',
  'StopGracePeriod',
  'Healthcheck',
  'Hosts',
  'DNSConfig',
  'Secrets',
  'Configs',
  'Isolation',
  'Sysctls',
  'CapabilityAdd',
  'CapabilityDrop',
  'Ulimits',
  'OomScoreAdj',
];
/** ContainerSpec's pointer fields: shown whenever set, even to a zero value. */
const CONTAINER_POINTERS = new Set<keyof ContainerSpec>([
  'Privileges',
  'Init',
  'StopGracePeriod',
  'Healthcheck',
  'DNSConfig',
]);

const MOUNT_TYPES = ['bind', 'volume', 'tmpfs', 'npipe', 'cluster'];
const PROPAGATIONS = ['rprivate', 'private', 'rshared', 'shared', 'rslave', 'slave'];
const CONSISTENCIES = ['default', 'consistent', 'cached', 'delegated'];

function normalizeMount(m: Mount): Mount {
  const type = (m.Type ?? '').toLowerCase();
  if (type !== '' && !MOUNT_TYPES.includes(type))
    throw invalidParameter(`invalid MountType: ${JSON.stringify(m.Type)}`);
  const out: Mount = { Type: (type || 'bind') as Mount['Type'] };
  if (m.Source) out.Source = m.Source;
  if (m.Target) out.Target = m.Target;
  if (m.ReadOnly) out.ReadOnly = true;
  const consistency = (m.Consistency ?? '').toLowerCase();
  if (consistency !== '' && !CONSISTENCIES.includes(consistency)) {
    throw invalidParameter(`invalid MountConsistency: ${JSON.stringify(m.Consistency)}`);
  }
  if (consistency !== '' && consistency !== 'default') out.Consistency = consistency;
  if (m.BindOptions) {
    const prop = (m.BindOptions.Propagation ?? '').toLowerCase();
    if (prop !== '' && !PROPAGATIONS.includes(prop)) {
      throw invalidParameter(`invalid MountPropagation: ${JSON.stringify(m.BindOptions.Propagation)}`);
    }
    if (prop !== '' || m.BindOptions.NonRecursive || m.BindOptions.CreateMountpoint) {
      out.BindOptions = { Propagation: prop || 'rprivate' };
      if (m.BindOptions.NonRecursive) out.BindOptions.NonRecursive = true;
      if (m.BindOptions.CreateMountpoint) out.BindOptions.CreateMountpoint = true;
    }
  }
  if (m.VolumeOptions) out.VolumeOptions = m.VolumeOptions;
  if (m.TmpfsOptions) out.TmpfsOptions = m.TmpfsOptions;
  return out;
}

function normalizePrivileges(p: Privileges): Privileges {
  const out: Privileges = {
    CredentialSpec: p.CredentialSpec
      ? {
          Config: p.CredentialSpec.Config ?? '',
          File: p.CredentialSpec.File ?? '',
          Registry: p.CredentialSpec.Registry ?? '',
        }
      : (null as unknown as undefined),
    SELinuxContext: p.SELinuxContext
      ? {
          Disable: p.SELinuxContext.Disable ?? false,
          User: p.SELinuxContext.User ?? '',
          Role: p.SELinuxContext.Role ?? '',
          Type: p.SELinuxContext.Type ?? '',
          Level: p.SELinuxContext.Level ?? '',
        }
      : (null as unknown as undefined),
  };
  if (p.Seccomp) out.Seccomp = p.Seccomp;
  if (p.AppArmor) out.AppArmor = p.AppArmor;
  if (p.NoNewPrivileges) out.NoNewPrivileges = true;
  return out;
}

function normalizeContainer(c: ContainerSpec): ContainerSpec {
  const out = pick(c, CONTAINER_FIELDS, (k) => !CONTAINER_POINTERS.has(k));
  if (out.Mounts) out.Mounts = out.Mounts.map(normalizeMount);
  if (out.Privileges) out.Privileges = normalizePrivileges(out.Privileges);
  const isolation = (c.Isolation ?? '').toLowerCase();
  out.Isolation = isolation === 'process' || isolation === 'hyperv' ? isolation : 'default';
  // Isolation comes after Configs in dockerd's order: rebuild it in place
  return pick(out, CONTAINER_FIELDS, () => false);
}

function normalizeNetworks(
  list: NetworkAttachmentConfig[] | undefined,
): NetworkAttachmentConfig[] | undefined {
  if (!list || list.length === 0) return undefined;
  return list.map((n) => {
    const out: NetworkAttachmentConfig = { Target: n.Target ?? '' };
    if (n.Aliases && n.Aliases.length > 0) out.Aliases = n.Aliases;
    if (n.DriverOpts && Object.keys(n.DriverOpts).length > 0) out.DriverOpts = n.DriverOpts;
    return out;
  });
}

function normalizeTask(t: TaskSpec): TaskSpec {
  const runtime = t.Runtime ?? '';
  if (runtime === '' || runtime === 'container') {
    if (!t.ContainerSpec) throw invalidParameter('mismatched Runtime and *Spec fields');
  } else if (runtime === 'plugin') {
    if (!t.PluginSpec) throw invalidParameter('mismatched Runtime and *Spec fields');
    throw invalidParameter('plugin services are not supported by this engine');
  } else {
    throw invalidParameter('unsupported runtime');
  }
  const out: TaskSpec = { ContainerSpec: normalizeContainer(t.ContainerSpec) };
  if (t.Resources) {
    const r: NonNullable<TaskSpec['Resources']> = {};
    if (t.Resources.Limits)
      r.Limits = pick(t.Resources.Limits, ['NanoCPUs', 'MemoryBytes', 'Pids'], () => true);
    if (t.Resources.Reservations) {
      r.Reservations = pick(
        t.Resources.Reservations,
        ['NanoCPUs', 'MemoryBytes', 'GenericResources'],
        () => true,
      );
    }
    out.Resources = r;
  }
  if (t.RestartPolicy) {
    const p = t.RestartPolicy;
    const condition = p.Condition ?? '';
    if (condition !== '' && !['none', 'on-failure', 'any'].includes(condition)) {
      throw invalidParameter(`invalid RestartCondition: ${JSON.stringify(condition)}`);
    }
    out.RestartPolicy = { Condition: (condition || 'any') as 'any' };
    if (p.Delay !== undefined) out.RestartPolicy.Delay = p.Delay;
    out.RestartPolicy.MaxAttempts = p.MaxAttempts ?? 0;
    if (p.Window !== undefined) out.RestartPolicy.Window = p.Window;
  }
  if (t.Placement) {
    const p = t.Placement;
    out.Placement = pick(
      {
        Constraints: p.Constraints,
        Preferences: p.Preferences?.filter((x) => x.Spread),
        MaxReplicas: p.MaxReplicas,
        Platforms: p.Platforms,
      },
      ['Constraints', 'Preferences', 'MaxReplicas', 'Platforms'],
      () => true,
    );
    if (out.Placement.Preferences) {
      out.Placement.Preferences = out.Placement.Preferences.map((x) => ({
        Spread: { SpreadDescriptor: x.Spread?.SpreadDescriptor ?? '' },
      }));
    }
  }
  const networks = normalizeNetworks(t.Networks);
  if (networks) out.Networks = networks;
  if (t.LogDriver) out.LogDriver = pick(t.LogDriver, ['Name', 'Options'], () => true);
  out.ForceUpdate = t.ForceUpdate ?? 0;
  out.Runtime = 'container';
  return out;
}

function normalizeMode(m: ServiceMode | undefined): ServiceMode {
  const given = MODE_KEYS.filter((k) => m?.[k] !== undefined);
  if (given.length > 1) throw invalidParameter('must specify only one service mode');
  if (m?.Global) return { Global: {} };
  if (m?.GlobalJob) return { GlobalJob: {} };
  if (m?.ReplicatedJob) {
    const max = m.ReplicatedJob.MaxConcurrent ?? 1;
    return {
      ReplicatedJob: { MaxConcurrent: max, TotalCompletions: m.ReplicatedJob.TotalCompletions ?? max },
    };
  }
  return { Replicated: { Replicas: m?.Replicated?.Replicas ?? 1 } };
}

function normalizeUpdate(u: UpdateConfig): UpdateConfig {
  const action = u.FailureAction ?? '';
  if (!['', 'pause', 'continue', 'rollback'].includes(action)) {
    throw invalidParameter(`unrecognized update failure action ${action}`);
  }
  const order = u.Order ?? '';
  if (!['', 'stop-first', 'start-first'].includes(order))
    throw invalidParameter(`unrecognized update order ${order}`);
  const out: UpdateConfig = { Parallelism: u.Parallelism ?? 0 };
  if (u.Delay) out.Delay = u.Delay;
  out.FailureAction = (action || 'pause') as UpdateConfig['FailureAction'];
  if (u.Monitor) out.Monitor = u.Monitor;
  out.MaxFailureRatio = u.MaxFailureRatio ?? 0;
  out.Order = (order || 'stop-first') as UpdateConfig['Order'];
  return out;
}

function normalizeEndpoint(e: EndpointSpec): EndpointSpec {
  const mode = e.Mode ?? '';
  if (mode !== '' && mode !== 'vip' && mode !== 'dnsrr') {
    throw invalidParameter(`invalid resolution mode: ${JSON.stringify(mode)}`);
  }
  const out: EndpointSpec = { Mode: mode || 'vip' };
  if (e.Ports && e.Ports.length > 0) {
    out.Ports = e.Ports.map((p) => {
      const proto = (p.Protocol ?? '').toLowerCase();
      const publish = (p.PublishMode ?? '').toLowerCase();
      const port: NonNullable<EndpointSpec['Ports']>[number] = {};
      if (p.Name) port.Name = p.Name;
      // swarmkit's enums: an unknown name reads as the first value (tcp, ingress), as dockerd does
      port.Protocol = proto === 'udp' || proto === 'sctp' ? proto : 'tcp';
      if (p.TargetPort) port.TargetPort = p.TargetPort;
      if (p.PublishedPort) port.PublishedPort = p.PublishedPort;
      port.PublishMode = publish === 'host' ? 'host' : 'ingress';
      return port;
    });
  }
  return out;
}

/**
 * The spec dockerd stores for a request's spec (see above), or dockerd's 400 for what its
 * conversion refuses. An empty Name gets a random one, as dockerd's namesgenerator gives.
 */
export function normalizeServiceSpec(input: ServiceSpec): ServiceSpec {
  const s = dropNulls(input);
  const out: ServiceSpec = { Name: s.Name || generateName(), Labels: s.Labels ?? {} };
  out.TaskTemplate = normalizeTask(s.TaskTemplate ?? {});
  out.Mode = normalizeMode(s.Mode);
  if (s.UpdateConfig) out.UpdateConfig = normalizeUpdate(s.UpdateConfig);
  if (s.RollbackConfig) out.RollbackConfig = normalizeUpdate(s.RollbackConfig);
  const networks = normalizeNetworks(s.Networks);
  if (networks) out.Networks = networks;
  if (s.EndpointSpec) out.EndpointSpec = normalizeEndpoint(s.EndpointSpec);
  return out;
}

const SECOND = 1_000_000_000;

function updateDefaults(u: UpdateConfig | undefined): UpdateConfig {
  if (!u) {
    return {
      Parallelism: 1,
      FailureAction: 'pause',
      Monitor: 5 * SECOND,
      MaxFailureRatio: 0,
      Order: 'stop-first',
    };
  }
  // only a missing Monitor is filled in a given config (swarmkit's InterpolateService)
  const out: UpdateConfig = { Parallelism: u.Parallelism ?? 0 };
  if (u.Delay) out.Delay = u.Delay;
  out.FailureAction = u.FailureAction ?? 'pause';
  out.Monitor = u.Monitor || 5 * SECOND;
  out.MaxFailureRatio = u.MaxFailureRatio ?? 0;
  out.Order = u.Order ?? 'stop-first';
  return out;
}

/**
 * `insertDefaults=true`: swarmkit's defaults (api/defaults) where the spec leaves a part out:
 * StopGracePeriod 10 s, an empty DNSConfig, Resources and Placement, RestartPolicy {any, 5 s, 0},
 * UpdateConfig and RollbackConfig {1, pause, 5 s monitor, stop-first}, EndpointSpec {vip}.
 */
export function withDefaults(spec: ServiceSpec): ServiceSpec {
  const out: ServiceSpec = structuredClone(spec);
  const task: TaskSpec = out.TaskTemplate ?? {};
  const c = task.ContainerSpec;
  if (c) {
    const filled: ContainerSpec = {};
    for (const f of CONTAINER_FIELDS) {
      if (f === 'StopGracePeriod') {
        filled.StopGracePeriod = c.StopGracePeriod ?? 10 * SECOND;
        continue;
      }
      if (f === 'DNSConfig') {
        filled.DNSConfig = c.DNSConfig ?? {};
        continue;
      }
      if (c[f] !== undefined) (filled as Record<string, unknown>)[f] = c[f];
    }
    task.ContainerSpec = filled;
  }
  const ordered: TaskSpec = {};
  if (task.ContainerSpec) ordered.ContainerSpec = task.ContainerSpec;
  ordered.Resources = task.Resources ?? {};
  ordered.RestartPolicy = task.RestartPolicy
    ? {
        Condition: task.RestartPolicy.Condition ?? 'any',
        Delay: task.RestartPolicy.Delay ?? 5 * SECOND,
        MaxAttempts: task.RestartPolicy.MaxAttempts ?? 0,
        ...(task.RestartPolicy.Window !== undefined ? { Window: task.RestartPolicy.Window } : {}),
      }
    : { Condition: 'any', Delay: 5 * SECOND, MaxAttempts: 0 };
  ordered.Placement = task.Placement ?? {};
  if (task.Networks) ordered.Networks = task.Networks;
  if (task.LogDriver) ordered.LogDriver = task.LogDriver;
  ordered.ForceUpdate = task.ForceUpdate ?? 0;
  if (task.Runtime) ordered.Runtime = task.Runtime;
  const result: ServiceSpec = { Name: out.Name, Labels: out.Labels, TaskTemplate: ordered, Mode: out.Mode };
  // jobs too: swarmkit's InterpolateService fills them whatever the mode
  result.UpdateConfig = updateDefaults(out.UpdateConfig);
  result.RollbackConfig = updateDefaults(out.RollbackConfig);
  if (out.Networks) result.Networks = out.Networks;
  result.EndpointSpec = out.EndpointSpec ?? { Mode: 'vip' };
  return result;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/**
 * Whether going from `prev` to `next` replaces tasks (a new `_.specVersion`): a change of the
 * TaskTemplate (ForceUpdate included), of the networks or of the published ports. Labels and
 * Replicas alone do not.
 */
export function replacesTasks(prev: ServiceSpec, next: ServiceSpec): boolean {
  return (
    !same(prev.TaskTemplate, next.TaskTemplate) ||
    !same(prev.Networks, next.Networks) ||
    !same(prev.EndpointSpec?.Ports, next.EndpointSpec?.Ports)
  );
}

/** The kind of mode, for `service mode change is not allowed` and the `mode` filter. */
export function modeOf(spec: ServiceSpec): 'replicated' | 'global' | 'replicated-job' | 'global-job' {
  if (spec.Mode?.Global) return 'global';
  if (spec.Mode?.GlobalJob) return 'global-job';
  if (spec.Mode?.ReplicatedJob) return 'replicated-job';
  return 'replicated';
}

/** The networks a spec attaches to: the TaskTemplate's, else the deprecated top-level ones (dockerd). */
export function specNetworks(spec: ServiceSpec): NetworkAttachmentConfig[] {
  const task = spec.TaskTemplate?.Networks ?? [];
  return task.length > 0 ? task : (spec.Networks ?? []);
}
