import type { Placement, StoredService } from '../services/service.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { StoredNode } from './cluster-view.js';
import { constraintsOf, nodeMatches } from './constraints.js';
import { hostPortsOf, type NodeInfo } from './node-info.js';

/**
 * The scheduler's filters in swarmkit's order (manager/scheduler/filter.go), each with the words
 * swarmkit explains a failure with, for `no suitable node (…)`.
 */
export interface Filter {
  name: string;
  /** Whether the filter applies to this task at all. */
  enabled(task: StoredTask, service: StoredService | undefined): boolean;
  check(task: StoredTask, info: NodeInfo, service: StoredService | undefined): boolean;
  explain(nodes: number): string;
}

const onNodes = (what: string) => (n: number) => `${what} on ${n} node${n === 1 ? '' : 's'}`;

const ready: Filter = {
  name: 'ready',
  enabled: () => true,
  check: (_t, info) => info.up && (info.node.Spec?.Availability ?? 'active') === 'active',
  explain: (n) => (n === 1 ? '1 node not available for new tasks' : `${n} nodes not available for new tasks`),
};

const resources: Filter = {
  name: 'resources',
  enabled: (t) => {
    const r = t.Spec.Resources?.Reservations;
    return (
      !!r && ((r.NanoCPUs ?? 0) > 0 || (r.MemoryBytes ?? 0) > 0 || (r.GenericResources?.length ?? 0) > 0)
    );
  },
  check: (t, info) => {
    const r = t.Spec.Resources?.Reservations ?? {};
    const have = info.node.Description?.Resources ?? { NanoCPUs: 0, MemoryBytes: 0 };
    if ((r.NanoCPUs ?? 0) > have.NanoCPUs - info.reservedCpus) return false;
    if ((r.MemoryBytes ?? 0) > have.MemoryBytes - info.reservedMemory) return false;
    // nodes advertise no generic resources (yet): a task that needs some fits nowhere
    return (r.GenericResources?.length ?? 0) === 0;
  },
  explain: onNodes('insufficient resources'),
};

const constraints: Filter = {
  name: 'constraints',
  enabled: (t) => (t.Spec.Placement?.Constraints?.length ?? 0) > 0,
  check: (t, info) => constraintsFit(t.Spec.Placement, info.node),
  explain: onNodes('scheduling constraints not satisfied'),
};

const platforms: Filter = {
  name: 'platform',
  enabled: (t) => (t.Spec.Placement?.Platforms?.length ?? 0) > 0,
  check: (t, info) => platformFits(t.Spec.Placement, info.node),
  explain: onNodes('unsupported platform'),
};

const hostPorts: Filter = {
  name: 'host ports',
  enabled: (_t, service) => hostPortsOf(service).length > 0,
  check: (_t, info, service) => hostPortsOf(service).every((p) => !info.hostPorts.has(p)),
  explain: onNodes('host-mode port already in use'),
};

const maxReplicas: Filter = {
  name: 'max replicas',
  enabled: (t) => (t.Spec.Placement?.MaxReplicas ?? 0) > 0,
  check: (t, info) => (info.byService.get(t.ServiceID) ?? 0) < (t.Spec.Placement?.MaxReplicas ?? 0),
  explain: () => 'max replicas per node limit exceed',
};

export const FILTERS: readonly Filter[] = [ready, resources, constraints, platforms, hostPorts, maxReplicas];

/** The placement's constraints hold on the node (constraints that do not parse hold nowhere). */
export function constraintsFit(placement: Placement | undefined, node: StoredNode): boolean {
  const parsed = constraintsOf(placement?.Constraints);
  return parsed !== undefined && nodeMatches(parsed, node);
}

function normalArch(arch: string | undefined): string {
  if (arch === 'x86_64') return 'amd64';
  if (arch === 'aarch64') return 'arm64';
  return arch ?? '';
}

/** One of the placement's platforms is the node's (an empty field matches any). */
export function platformFits(placement: Placement | undefined, node: StoredNode): boolean {
  const list = placement?.Platforms ?? [];
  if (list.length === 0) return true;
  const p = node.Description?.Platform;
  const arch = normalArch(p?.Architecture);
  return list.some(
    (want) =>
      (!want.Architecture || normalArch(want.Architecture) === arch) &&
      (!want.OS || want.OS === (p?.OS ?? '')),
  );
}

/** Why no node took the task: the filters' failures, most first, in swarmkit's words. */
export function explainFailures(failures: Map<Filter, number>): string {
  const entries = FILTERS.map((f) => ({ f, n: failures.get(f) ?? 0 })).filter((e) => e.n > 0);
  entries.sort((a, b) => b.n - a.n);
  const text = entries.map((e) => e.f.explain(e.n)).join('; ');
  return text ? `no suitable node (${text})` : 'no suitable node';
}
