import type { StoredService } from '../services/service.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { StoredNode } from './cluster-view.js';
import type { Plan } from './plan.js';
import { restartDelayMs, shouldRestart } from './restart-policy.js';
import { byNewest, endedAt, hasEnded, hasStopped, isDirty, isLive, isPlaced } from './task-life.js';

/**
 * One slot's tasks (a replicated slot number, or a global service's node), settled: live tasks
 * that ended are told to stop (the restart supervisor), placed tasks that no longer fit their
 * node are evicted (the constraint enforcer), surplus live tasks stopped (a start-first update
 * that got its new task running, or a duplicate). Then what the slot needs:
 * - `live`: it has its task;
 * - `waiting`: its old task is still stopping (stop-first update) or its restart delay runs;
 * - `done`: its last task ended and is not to be replaced (restart policy, a completed job);
 * - `vacant`: it needs a new task now.
 */
export type SlotOutcome = 'live' | 'waiting' | 'done' | 'vacant';

export interface SlotContext {
  plan: Plan;
  service: StoredService;
  isJob: boolean;
  /** Whether a placed task may stay on its (up) node; an evicted task is replaced at once. */
  fits(task: StoredTask, node: StoredNode): boolean;
}

export function settleSlot(ctx: SlotContext, tasks: readonly StoredTask[]): SlotOutcome {
  const { plan, service, isJob } = ctx;
  for (const t of tasks) {
    if (!isLive(t)) continue;
    if (hasEnded(t, plan)) {
      plan.setDesired(t, isJob && t.Status.State === 'complete' ? 'complete' : 'shutdown');
      continue;
    }
    const node = plan.node(t.NodeID);
    if (isPlaced(t) && node && plan.nodeUp(t.NodeID) && !ctx.fits(t, node)) plan.setDesired(t, 'shutdown');
  }
  const live = tasks.filter(isLive);
  if (live.length > 0) {
    if (live.length > 1) stopSurplus(plan, service, live);
    return 'live';
  }
  const newest = [...tasks].sort(byNewest)[0];
  if (!newest) return 'vacant';
  if (isDirty(newest, service)) return hasStopped(newest, plan) ? 'vacant' : 'waiting';
  if (!hasEnded(newest, plan)) return 'vacant'; // evicted, still stopping: its replacement starts now
  if (isJob && newest.Status.State === 'complete') return 'done';
  if (!shouldRestart(service.Spec.TaskTemplate?.RestartPolicy, newest, tasks, plan, isJob)) return 'done';
  const due = endedAt(newest, plan) + restartDelayMs(service.Spec.TaskTemplate?.RestartPolicy);
  if (plan.now >= due) return 'vacant';
  plan.wakeAt(due);
  return 'waiting';
}

/**
 * Several live tasks in one slot: the newest current one is kept (a running one first); the
 * out-of-date ones go once a current one runs (start-first), or all but the newest when there is
 * no current one.
 */
function stopSurplus(plan: Plan, service: StoredService, live: StoredTask[]): void {
  const current = live.filter((t) => !isDirty(t, service)).sort(byNewest);
  const dirty = live.filter((t) => isDirty(t, service)).sort(byNewest);
  const keep = current.find((t) => t.Status.State === 'running') ?? current[0];
  for (const t of current) if (t !== keep) plan.setDesired(t, 'shutdown');
  if (!keep) {
    for (const t of dirty.slice(1)) plan.setDesired(t, 'shutdown');
    return;
  }
  if (keep.Status.State === 'running') for (const t of dirty) plan.setDesired(t, 'shutdown');
}
