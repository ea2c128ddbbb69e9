import type { StoredService } from '../services/service.types.js';
import { isAttachment, type StoredTask, stateRank } from '../tasks/task.types.js';
import type { StoredNode } from './cluster-view.js';
import { explainFailures, FILTERS, type Filter } from './filters.js';
import { addTask, type NodeInfo, newNodeInfo } from './node-info.js';
import type { Plan } from './plan.js';
import { isLive } from './task-life.js';

/**
 * The scheduler: every task desired to run that no node holds yet moves `new` → `pending`, then
 * to `assigned` on the best node that passes the filters (filters.ts): the fewest tasks of its
 * service, then the fewest in all, so that 30 replicas on 3 equal nodes are 10/10/10. Placement
 * preferences spread over a label's values first, as a tree (one level per preference). A task
 * that fits nowhere stays `pending` with swarmkit's `no suitable node (…)` in Err, and is tried
 * again on the next pass (any change in the cluster runs one).
 */
export const PENDING_MESSAGE = 'pending task scheduling';
export const ASSIGNED_MESSAGE = 'scheduler assigned task to node';

export function schedule(plan: Plan): void {
  const infos = new Map<string, NodeInfo>();
  for (const [id, n] of plan.snap.nodes) infos.set(id, newNodeInfo(n.value, plan.nodeUp(id)));
  const waiting: StoredTask[] = [];
  for (const t of plan.tasks.values()) {
    // a container's network attachment is its node's from the start and takes no room
    if (isAttachment(t)) continue;
    const placed = t.NodeID && stateRank(t.Status.State) >= stateRank('assigned');
    if (placed) {
      const info = t.NodeID ? infos.get(t.NodeID) : undefined;
      if (info) addTask(info, t, plan.services.get(t.ServiceID));
    } else if (isLive(t)) waiting.push(t);
  }
  waiting.sort(
    (a, b) =>
      cmp(a.ServiceID, b.ServiceID) ||
      (a.Slot ?? 0) - (b.Slot ?? 0) ||
      cmp(a.CreatedAt, b.CreatedAt) ||
      cmp(a.ID, b.ID),
  );
  for (const t of waiting) {
    if (t.Status.State === 'new' || t.Status.State === 'allocated')
      plan.setStatus(t, 'pending', PENDING_MESSAGE);
    // no addresses on its networks yet (a full block): no node may run it
    if (plan.unallocated.has(t.ID)) continue;
    const service = plan.services.get(t.ServiceID);
    const candidates = t.NodeID ? [infos.get(t.NodeID)].filter((i) => i !== undefined) : [...infos.values()];
    const failures = new Map<Filter, number>();
    const passing = candidates.filter((info) => passes(t, info, service, failures));
    const chosen = choose(t, passing);
    if (!chosen) {
      plan.setStatus(t, 'pending', PENDING_MESSAGE, explainFailures(failures));
      continue;
    }
    t.NodeID = chosen.node.ID;
    plan.setStatus(t, 'assigned', ASSIGNED_MESSAGE);
    addTask(chosen, t, service);
  }
}

function passes(
  t: StoredTask,
  info: NodeInfo,
  service: StoredService | undefined,
  failures: Map<Filter, number>,
): boolean {
  for (const f of FILTERS) {
    if (!f.enabled(t, service)) continue;
    if (!f.check(t, info, service)) {
      failures.set(f, (failures.get(f) ?? 0) + 1);
      return false;
    }
  }
  return true;
}

/** Fewer tasks of the service, then fewer tasks in all, then the node ID (a stable order). */
function nodeLess(serviceId: string) {
  return (a: NodeInfo, b: NodeInfo) =>
    (a.byService.get(serviceId) ?? 0) - (b.byService.get(serviceId) ?? 0) ||
    a.total - b.total ||
    cmp(a.node.ID, b.node.ID);
}

/** The best node, walking the preferences' tree first: at each level the branch with the fewest. */
function choose(t: StoredTask, passing: NodeInfo[]): NodeInfo | undefined {
  let nodes = passing;
  const prefs = (t.Spec.Placement?.Preferences ?? [])
    .map((p) => p.Spread?.SpreadDescriptor)
    .filter((d): d is string => !!d);
  for (const descriptor of prefs) {
    if (nodes.length <= 1) break;
    const branches = new Map<string, NodeInfo[]>();
    for (const n of nodes) {
      const v = spreadValue(descriptor, n.node);
      branches.set(v, [...(branches.get(v) ?? []), n]);
    }
    const count = (b: NodeInfo[]) => b.reduce((s, n) => s + (n.byService.get(t.ServiceID) ?? 0), 0);
    const best = [...branches.entries()].sort((a, b) => count(a[1]) - count(b[1]) || cmp(a[0], b[0]))[0];
    if (best) nodes = best[1];
  }
  return [...nodes].sort(nodeLess(t.ServiceID))[0];
}

/** A node's value for a spread descriptor (`node.labels.x`, `engine.labels.x`); '' without one. */
function spreadValue(descriptor: string, node: StoredNode): string {
  const lower = descriptor.toLowerCase();
  if (lower.startsWith('node.labels.'))
    return node.Spec?.Labels?.[descriptor.slice('node.labels.'.length)] ?? '';
  if (lower.startsWith('engine.labels.'))
    return node.Description?.Engine?.Labels?.[descriptor.slice('engine.labels.'.length)] ?? '';
  return '';
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
