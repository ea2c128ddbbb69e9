import type { StoredService } from '../services/service.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { StoredNode } from './cluster-view.js';
import { constraintsFit } from './filters.js';
import type { Plan } from './plan.js';
import { type SlotOutcome, settleSlot } from './slots.js';
import { isLive } from './task-life.js';

/**
 * A replicated service: slots 1..Replicas, each with one task desired to run. A slot whose task
 * ended is refilled as its restart policy says (slots.ts). Scaling up fills the lowest free slot
 * numbers; scaling down removes slots that run nothing first, then those on the nodes with the
 * most tasks of the service, the highest slot first.
 */
export function reconcileReplicated(plan: Plan, serviceId: string, service: StoredService): void {
  const want = Math.max(0, service.Spec.Mode?.Replicated?.Replicas ?? 1);
  const slots = groupBySlot(plan.tasksOf(serviceId));
  const outcomes = new Map<number, SlotOutcome>();
  for (const [slot, tasks] of slots) {
    outcomes.set(slot, settleSlot({ plan, service, isJob: false, fits: taskFits }, tasks));
  }
  let surplus = outcomes.size - want;
  if (surplus > 0) {
    for (const slot of slotsToRemove(slots, outcomes, surplus)) {
      for (const t of slots.get(slot) ?? []) plan.setDesired(t, 'remove');
      outcomes.delete(slot);
    }
    surplus = 0;
  }
  for (const [slot, outcome] of outcomes)
    if (outcome === 'vacant') plan.createTask(serviceId, service, { Slot: slot });
  let next = 1;
  for (let missing = want - outcomes.size; missing > 0; missing--) {
    while (outcomes.has(next)) next++;
    plan.createTask(serviceId, service, { Slot: next });
    outcomes.set(next, 'live');
  }
}

/** A placed task stays on its node unless the node is drained or no longer meets its constraints. */
export function taskFits(task: StoredTask, node: StoredNode): boolean {
  return (node.Spec?.Availability ?? 'active') !== 'drain' && constraintsFit(task.Spec.Placement, node);
}

/** The service's tasks by slot, leaving out those being removed. */
export function groupBySlot(tasks: readonly StoredTask[]): Map<number, StoredTask[]> {
  const slots = new Map<number, StoredTask[]>();
  for (const t of tasks) {
    if (t.DesiredState === 'remove' || t.Slot === undefined) continue;
    slots.set(t.Slot, [...(slots.get(t.Slot) ?? []), t]);
  }
  return new Map([...slots].sort((a, b) => a[0] - b[0]));
}

function slotsToRemove(
  slots: Map<number, StoredTask[]>,
  outcomes: Map<number, SlotOutcome>,
  count: number,
): number[] {
  const nodeOf = (slot: number): string | undefined =>
    (slots.get(slot) ?? []).find((t) => isLive(t) && t.Status.State === 'running')?.NodeID;
  const perNode = new Map<string, number>();
  for (const slot of outcomes.keys()) {
    const n = nodeOf(slot);
    if (n) perNode.set(n, (perNode.get(n) ?? 0) + 1);
  }
  const left = new Set(outcomes.keys());
  const chosen: number[] = [];
  for (let i = 0; i < count; i++) {
    const best = [...left].sort((a, b) => {
      const na = nodeOf(a);
      const nb = nodeOf(b);
      return (
        (na ? 1 : 0) - (nb ? 1 : 0) ||
        (nb ? (perNode.get(nb) ?? 0) : 0) - (na ? (perNode.get(na) ?? 0) : 0) ||
        b - a
      );
    })[0];
    if (best === undefined) break;
    left.delete(best);
    chosen.push(best);
    const n = nodeOf(best);
    if (n) perNode.set(n, (perNode.get(n) ?? 1) - 1);
  }
  return chosen;
}
