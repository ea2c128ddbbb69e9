import { isAttachment, isTerminal, type StoredTask, stateRank } from '../tasks/task.types.js';
import type { Plan } from './plan.js';
import { endedAt, isLive, isPlaced, modeOf } from './task-life.js';

/**
 * The task reaper: a task goes from the store when
 * - its service is gone (one still running is first told `remove`; the agent stops it and
 *   reports, then it goes), or it was told `remove` (scale down) and holds nothing any more;
 * - its node was removed from the swarm and it is not to run (a network attachment: at all);
 * - it is history beyond `TaskHistoryRetentionLimit` tasks per slot (per node for global
 *   services), oldest first; a negative limit keeps all.
 */
export function reap(plan: Plan): void {
  for (const t of [...plan.tasks.values()]) {
    // a container's network attachment has no service: its node releases it, or it goes with the node
    if (isAttachment(t)) {
      if (t.NodeID && !plan.snap.nodes.has(t.NodeID)) plan.deleteTask(t.ID);
      continue;
    }
    const serviceGone = !plan.services.has(t.ServiceID);
    if (serviceGone) plan.setDesired(t, 'remove');
    if (t.DesiredState === 'remove' && holdsNothing(t, plan)) plan.deleteTask(t.ID);
    else if (!isLive(t) && t.NodeID && !plan.snap.nodes.has(t.NodeID)) plan.deleteTask(t.ID);
  }
  const limit = plan.snap.taskHistoryLimit;
  if (limit < 0) return;
  const groups = new Map<string, StoredTask[]>();
  for (const t of plan.tasks.values()) {
    const service = plan.services.get(t.ServiceID);
    if (!service) continue;
    const kind = modeOf(service.Spec.Mode);
    const key =
      kind === 'global' || kind === 'global-job'
        ? `${t.ServiceID}/n/${t.NodeID ?? ''}`
        : `${t.ServiceID}/s/${t.Slot ?? 0}`;
    groups.set(key, [...(groups.get(key) ?? []), t]);
  }
  for (const tasks of groups.values()) {
    if (tasks.length <= limit) continue;
    const history = tasks
      .filter((t) => !isLive(t) && (isTerminal(t.Status.State) || !isPlaced(t)))
      .sort((a, b) => endedAt(a, plan) - endedAt(b, plan) || (a.ID < b.ID ? -1 : 1));
    let excess = tasks.length - limit;
    for (const t of history) {
      if (excess <= 0) break;
      plan.deleteTask(t.ID);
      excess--;
    }
  }
}

/** Never placed, over, or on a node that is down or gone: nothing left to stop. */
function holdsNothing(t: StoredTask, plan: Plan): boolean {
  return (
    isTerminal(t.Status.State) ||
    stateRank(t.Status.State) < stateRank('assigned') ||
    !t.NodeID ||
    !plan.nodeUp(t.NodeID)
  );
}
