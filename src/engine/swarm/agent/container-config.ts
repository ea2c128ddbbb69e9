import type {
  ContainerConfig,
  HealthConfig,
  HostConfig,
  MountSpec,
  PortBinding,
} from '../../../common/docker-types.js';
import type { AssignedTask } from '../cluster-api/assignments.types.js';
import type { ContainerSpec, Mount, Privileges } from '../services/service.types.js';
import { expandTemplate, type TemplateContext } from './templates.js';

/**
 * A task's ContainerSpec as a container's create request, the way moby's
 * daemon/cluster/executor/container does it: Command → Entrypoint and Args → Cmd, the swarm
 * labels over ContainerSpec.Labels, `"IP host"` lines → ExtraHosts `host:IP`, Resources.Limits,
 * host-mode ports as port bindings, Hostname, Env and mount sources and targets templated per
 * task, and the task's secret and config files bound read-only at their targets.
 */

export interface NodeFacts {
  ID: string;
  Hostname: string;
}

/** A file of the task's secrets or configs on the node, and where the container sees it. */
export interface TaskFileMount {
  source: string;
  target: string;
}

export interface TaskContainer {
  name: string;
  config: ContainerConfig;
  hostConfig: HostConfig;
}

/** `<service>.<slot>.<task>`, or `<service>.<node>.<task>` for a task without a slot (global). */
export function taskContainerName(a: AssignedTask): string {
  return containerNameOf(a.Service.Name, a.Task);
}

/** `<service>.<slot>.<task>` (a global task: `<service>.<node>.<task>`). */
export function containerNameOf(service: string, t: { ID: string; Slot?: number; NodeID?: string }): string {
  const slot = t.Slot ? String(t.Slot) : (t.NodeID ?? '');
  return `${service}.${slot}.${t.ID}`;
}

export function templateContext(a: AssignedTask, node: NodeFacts): TemplateContext {
  return {
    Service: { ID: a.Service.ID, Name: a.Service.Name, Labels: a.Service.Labels },
    Node: {
      ID: node.ID,
      Hostname: node.Hostname,
      Platform: { OS: 'linux', Architecture: process.arch === 'x64' ? 'x86_64' : process.arch },
    },
    Task: {
      ID: a.Task.ID,
      Name: taskContainerName(a),
      Slot: a.Task.Slot ? String(a.Task.Slot) : (a.Task.NodeID ?? ''),
    },
  };
}

/** The labels every task container carries (moby's), over the spec's own. */
export function taskLabels(a: AssignedTask, nodeId: string): Record<string, string> {
  const labels: Record<string, string> = { ...(a.Task.Spec.ContainerSpec?.Labels ?? {}) };
  const namespace = a.Service.Labels['com.docker.stack.namespace'];
  if (namespace !== undefined && labels['com.docker.stack.namespace'] === undefined)
    labels['com.docker.stack.namespace'] = namespace;
  Object.assign(labels, {
    'com.docker.swarm.node.id': nodeId,
    'com.docker.swarm.service.id': a.Service.ID,
    'com.docker.swarm.service.name': a.Service.Name,
    'com.docker.swarm.task': '',
    'com.docker.swarm.task.id': a.Task.ID,
    'com.docker.swarm.task.name': taskContainerName(a),
  });
  return labels;
}

function mountSpec(m: Mount, t: (s: string) => string): MountSpec {
  const out: MountSpec = {};
  if (m.Type) out.Type = m.Type;
  if (m.Source !== undefined) out.Source = t(m.Source);
  if (m.Target !== undefined) out.Target = t(m.Target);
  if (m.ReadOnly) out.ReadOnly = true;
  if (m.Consistency) out.Consistency = m.Consistency;
  if (m.BindOptions) out.BindOptions = { ...m.BindOptions };
  if (m.VolumeOptions) out.VolumeOptions = structuredClone(m.VolumeOptions);
  if (m.TmpfsOptions) out.TmpfsOptions = structuredClone(m.TmpfsOptions);
  return out;
}

function healthcheck(h: ContainerSpec['Healthcheck']): HealthConfig | undefined {
  if (!h) return undefined;
  const out: HealthConfig = {};
  if (h.Test) out.Test = [...h.Test];
  if (h.Interval) out.Interval = h.Interval;
  if (h.Timeout) out.Timeout = h.Timeout;
  if (h.StartPeriod) out.StartPeriod = h.StartPeriod;
  if (h.StartInterval) out.StartInterval = h.StartInterval;
  if (h.Retries) out.Retries = h.Retries;
  return out;
}

/** moby's applyPrivileges: seccomp, AppArmor, SELinux labels and no-new-privileges as SecurityOpt. */
function securityOpts(p: Privileges | undefined): string[] {
  const out: string[] = [];
  if (!p) return out;
  const se = p.SELinuxContext;
  if (se) {
    if (se.Disable) out.push('label=disable');
    if (se.User) out.push(`label=user:${se.User}`);
    if (se.Role) out.push(`label=role:${se.Role}`);
    if (se.Type) out.push(`label=type:${se.Type}`);
    if (se.Level) out.push(`label=level:${se.Level}`);
  }
  if (p.Seccomp?.Mode === 'unconfined') out.push('seccomp=unconfined');
  else if (p.Seccomp?.Mode === 'custom' && p.Seccomp.Profile) out.push(`seccomp=${p.Seccomp.Profile}`);
  if (p.AppArmor?.Mode === 'disabled') out.push('apparmor=unconfined');
  if (p.NoNewPrivileges) out.push('no-new-privileges=true');
  return out;
}

/** `"IP host [aliases…]"` → `host:IP` (moby keeps the canonical name only). */
function extraHosts(hosts: string[] | undefined): string[] {
  const out: string[] = [];
  for (const entry of hosts ?? []) {
    const parts = entry.trim().split(/\s+/);
    if (parts.length > 1) out.push(`${parts[1]}:${parts[0]}`);
  }
  return out;
}

/** The create request of a task's container. `image` is the reference the node resolved. */
export function taskContainer(
  a: AssignedTask,
  node: NodeFacts,
  image: string,
  files: TaskFileMount[],
  /** The node's overlay DNS (the gateway bridge's address) when the task is on overlay networks. */
  overlayDns?: string,
): TaskContainer {
  const spec = a.Task.Spec.ContainerSpec ?? {};
  const ctx = templateContext(a, node);
  const t = (s: string) => expandTemplate(s, ctx);

  const config: ContainerConfig = {
    Image: image,
    Labels: taskLabels(a, node.ID),
    Env: (spec.Env ?? []).map(t),
    Tty: spec.TTY === true,
    OpenStdin: spec.OpenStdin === true,
  };
  if (spec.Hostname) config.Hostname = t(spec.Hostname);
  if (spec.User) config.User = spec.User;
  if (spec.Dir) config.WorkingDir = spec.Dir;
  if (spec.StopSignal) config.StopSignal = spec.StopSignal;
  if (spec.Command && spec.Command.length > 0) {
    config.Entrypoint = [...spec.Command];
    config.Cmd = [...(spec.Args ?? [])];
  } else if (spec.Args && spec.Args.length > 0) {
    config.Cmd = [...spec.Args];
  }
  const hc = healthcheck(spec.Healthcheck);
  if (hc) config.Healthcheck = hc;

  const hostConfig: HostConfig = {
    Mounts: [
      ...(spec.Mounts ?? []).map((m) => mountSpec(m, t)),
      ...files.map((f) => ({ Type: 'bind' as const, Source: f.source, Target: f.target, ReadOnly: true })),
    ],
  };
  if (spec.Groups && spec.Groups.length > 0) hostConfig.GroupAdd = [...spec.Groups];
  if (spec.ReadOnly) hostConfig.ReadonlyRootfs = true;
  if (spec.Init !== undefined && spec.Init !== null) hostConfig.Init = spec.Init;
  if (spec.Sysctls) hostConfig.Sysctls = { ...spec.Sysctls };
  if (spec.CapabilityAdd) hostConfig.CapAdd = [...spec.CapabilityAdd];
  if (spec.CapabilityDrop) hostConfig.CapDrop = [...spec.CapabilityDrop];
  if (spec.Ulimits) hostConfig.Ulimits = spec.Ulimits.map((u) => ({ ...u }));
  if (spec.OomScoreAdj) hostConfig.OomScoreAdj = spec.OomScoreAdj;
  if (spec.Isolation && spec.Isolation !== 'default') hostConfig.Isolation = spec.Isolation;
  const dns = spec.DNSConfig;
  if (dns?.Nameservers) hostConfig.Dns = [...dns.Nameservers];
  if (dns?.Search) hostConfig.DnsSearch = [...dns.Search];
  if (dns?.Options) hostConfig.DnsOptions = [...dns.Options];
  if (overlayDns) {
    // on overlay networks only (the agent plugs them in once it runs; a task with host-mode ports
    // keeps the node's default network for them), the names answered by the engine's DNS
    if (a.Service.HostPorts.length === 0) hostConfig.NetworkMode = 'none';
    if (!dns?.Nameservers) hostConfig.Dns = [overlayDns];
    if (!dns?.Search) hostConfig.DnsSearch = ['.'];
    if (!dns?.Options) hostConfig.DnsOptions = ['ndots:0'];
  }
  const hosts = extraHosts(spec.Hosts);
  if (hosts.length > 0) hostConfig.ExtraHosts = hosts;
  const security = securityOpts(spec.Privileges);
  if (security.length > 0) hostConfig.SecurityOpt = security;

  const limits = a.Task.Spec.Resources?.Limits;
  if (limits?.MemoryBytes && limits.MemoryBytes > 0) hostConfig.Memory = limits.MemoryBytes;
  if (limits?.NanoCPUs && limits.NanoCPUs > 0) hostConfig.NanoCpus = limits.NanoCPUs;
  if (limits?.Pids && limits.Pids > 0) hostConfig.PidsLimit = limits.Pids;

  const log = a.Task.Spec.LogDriver;
  if (log?.Name) hostConfig.LogConfig = { Type: log.Name, Config: { ...(log.Options ?? {}) } };

  if (a.Service.HostPorts.length > 0) {
    const bindings: Record<string, PortBinding[]> = {};
    const exposed: Record<string, Record<string, never>> = {};
    for (const p of a.Service.HostPorts) {
      if (!p.TargetPort) continue;
      const key = `${p.TargetPort}/${(p.Protocol ?? 'tcp').toLowerCase()}`;
      bindings[key] = [p.PublishedPort ? { HostPort: String(p.PublishedPort) } : {}];
      exposed[key] = {};
    }
    hostConfig.PortBindings = bindings;
    config.ExposedPorts = exposed;
  }
  return { name: taskContainerName(a), config, hostConfig };
}

/** Where a secret reference's file goes in the container: `/run/secrets/<name>` or an absolute name. */
export function secretTarget(name: string): string {
  return name.startsWith('/') ? name : `/run/secrets/${name}`;
}

/** Where a config reference's file goes: `/<name>` or an absolute name. */
export function configTarget(name: string): string {
  return name.startsWith('/') ? name : `/${name}`;
}

/** StopGracePeriod in whole seconds for a stop (10 when not given, as swarmkit). */
export function stopTimeoutSeconds(a: AssignedTask): number {
  const ns = a.Task.Spec.ContainerSpec?.StopGracePeriod;
  if (ns === undefined || ns === null || ns < 0) return 10;
  return Math.ceil(ns / 1e9);
}
