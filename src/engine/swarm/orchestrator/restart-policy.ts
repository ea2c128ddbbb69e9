import type { RestartPolicy } from '../services/service.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { Plan } from './plan.js';
import { endedAt, nsToMs } from './task-life.js';

/**
 * The restart supervisor's decisions (swarmkit's restart.Supervisor): whether an ended task is
 * replaced in its slot, and when. `Condition` any (the default) always, `on-failure` unless the
 * task completed (exit 0), `none` never; a job's completed task never. `MaxAttempts` caps the
 * replacements counted within `Window` (all of them without one) since the spec last changed
 * (RestartHistory below).
 * The replacement waits `Delay` (5 s by default) from when the task ended.
 */

const DEFAULT_DELAY_NS = 5e9;

export function restartDelayMs(policy: RestartPolicy | undefined): number {
  return nsToMs(policy?.Delay ?? DEFAULT_DELAY_NS);
}

/**
 * `ended` is the slot's newest task, which ended by itself; `slot` every task of the slot (its
 * history, as the reaper left it).
 */
export function shouldRestart(
  policy: RestartPolicy | undefined,
  ended: StoredTask,
  slot: readonly StoredTask[],
  plan: Plan,
  isJob: boolean,
): boolean {
  const condition = policy?.Condition ?? 'any';
  if (condition === 'none') return false;
  const completed = ended.Status.State === 'complete';
  if (completed && (isJob || condition === 'on-failure')) return false;
  for (const t of slot) if (endedByItself(t, plan)) plan.restarts.note(t, endedAt(t, plan));
  const max = policy?.MaxAttempts ?? 0;
  if (max <= 0) return true;
  const windowMs = nsToMs(policy?.Window);
  const since = windowMs > 0 ? plan.now - windowMs : Number.NEGATIVE_INFINITY;
  return plan.restarts.count(ended, since) <= max;
}

/** Ended on its own (exit, failure, rejection, its node lost), not because it was told to stop. */
function endedByItself(t: StoredTask, plan: Plan): boolean {
  const s = t.Status.State;
  if (s === 'failed' || s === 'rejected' || s === 'complete' || s === 'orphaned') return true;
  // still running (or so it was last seen) on a node that went down
  return s !== 'shutdown' && s !== 'remove' && !!t.NodeID && !plan.nodeUp(t.NodeID);
}
