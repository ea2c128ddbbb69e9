import { parseTimestampMs } from '../../../common/time.js';
import type { ServiceMode, StoredService } from '../services/service.types.js';
import { isTerminal, type StoredTask, stateRank } from '../tasks/task.types.js';
import type { Plan } from './plan.js';

/** What the loops ask of a task and of a service, in one place. */

/** Desired to run (not yet told to stop). */
export function isLive(t: StoredTask): boolean {
  return stateRank(t.DesiredState) <= stateRank('running');
}

/** Made from an older version of its service's spec (the rolling updater replaces it). */
export function isDirty(t: StoredTask, service: StoredService): boolean {
  return t._.specVersion !== service._.specVersion;
}

/** Placed on a node (assigned or beyond). */
export function isPlaced(t: StoredTask): boolean {
  return !!t.NodeID && stateRank(t.Status.State) >= stateRank('assigned');
}

/** The task runs no more: it reached a final state, or its node is down or gone. */
export function hasEnded(t: StoredTask, plan: Plan): boolean {
  return isTerminal(t.Status.State) || (isPlaced(t) && !plan.nodeUp(t.NodeID));
}

/** The task holds nothing any more: final, never placed, or on a node that is down or gone. */
export function hasStopped(t: StoredTask, plan: Plan): boolean {
  return isTerminal(t.Status.State) || !isPlaced(t) || !plan.nodeUp(t.NodeID);
}

/** When the task ended: its last report, or when its node went down. */
export function endedAt(t: StoredTask, plan: Plan): number {
  if (!isTerminal(t.Status.State) && t.NodeID) {
    const down = plan.snap.downSince.get(t.NodeID);
    if (down !== undefined) return down;
  }
  const at = parseTimestampMs(t.Status.Timestamp);
  return Number.isFinite(at) ? at : plan.now;
}

export function createdAt(t: StoredTask): number {
  const at = parseTimestampMs(t.CreatedAt);
  return Number.isFinite(at) ? at : 0;
}

/** Newest first (creation time, then ID for a stable order). */
export function byNewest(a: StoredTask, b: StoredTask): number {
  return createdAt(b) - createdAt(a) || (a.ID < b.ID ? 1 : -1);
}

export type ModeKind = 'replicated' | 'global' | 'replicated-job' | 'global-job';

export function modeOf(mode: ServiceMode | undefined): ModeKind {
  if (mode?.Global) return 'global';
  if (mode?.ReplicatedJob) return 'replicated-job';
  if (mode?.GlobalJob) return 'global-job';
  return 'replicated';
}

/** A job iteration's index; the first is 0, which the API shows as `{}` (Go's omitempty). */
export function iterationOf(v: { Index?: number } | undefined): number {
  return v?.Index ?? 0;
}

/** Nanoseconds (the API's durations) to milliseconds. */
export function nsToMs(ns: number | undefined): number {
  return ns ? Math.floor(ns / 1e6) : 0;
}
