import type { StoredService } from '../services/service.types.js';
import { reconcileGlobal } from './global.js';
import type { Plan } from './plan.js';
import { groupBySlot, taskFits } from './replicated.js';
import { settleSlot } from './slots.js';
import { isLive, iterationOf } from './task-life.js';

/**
 * Jobs. A job runs in iterations (`JobStatus.JobIteration`): the first when the service is made,
 * a new one when its spec changes (`docker service update --force`), with `LastExecution` its
 * start; tasks of an older iteration still running are stopped.
 * - ReplicatedJob: `TotalCompletions` successful tasks (default `MaxConcurrent`, itself 1 by
 *   default), at most `MaxConcurrent` at once, in slots 1..TotalCompletions; a completed task is
 *   never restarted, a failed one as its restart policy says.
 * - GlobalJob: one successful task per eligible node.
 */
export function reconcileJob(plan: Plan, serviceId: string, service: StoredService, revision: number): void {
  const iteration = jobIteration(plan, serviceId, service, revision);
  for (const t of plan.tasksOf(serviceId)) {
    if (isLive(t) && iterationOf(t.JobIteration) !== iterationOf(iteration)) plan.setDesired(t, 'shutdown');
  }
  if (service.Spec.Mode?.GlobalJob) {
    reconcileGlobal(plan, serviceId, service, { iteration });
    return;
  }
  const mode = service.Spec.Mode?.ReplicatedJob ?? {};
  const maxConcurrent = Math.max(1, mode.MaxConcurrent ?? 1);
  const total = Math.max(0, mode.TotalCompletions ?? maxConcurrent);
  const slots = groupBySlot(
    plan.tasksOf(serviceId).filter((t) => iterationOf(t.JobIteration) === iterationOf(iteration)),
  );
  let running = 0;
  const vacant: number[] = [];
  const busy = new Set<number>();
  for (const [slot, tasks] of slots) {
    const outcome = settleSlot({ plan, service, isJob: true, fits: taskFits }, tasks);
    busy.add(slot);
    if (outcome === 'live' || outcome === 'waiting') running++;
    else if (outcome === 'vacant') vacant.push(slot);
  }
  for (let slot = 1; slot <= total; slot++) if (!busy.has(slot)) vacant.push(slot);
  vacant.sort((a, b) => a - b);
  for (const slot of vacant) {
    if (running >= maxConcurrent) break;
    plan.createTask(serviceId, service, { Slot: slot, JobIteration: iteration });
    running++;
  }
}

/**
 * The job's current iteration: set when missing; a new one (the service's revision) when every
 * task of the current one was made from an older spec (the service was updated since).
 */
function jobIteration(
  plan: Plan,
  serviceId: string,
  service: StoredService,
  revision: number,
): { Index: number } {
  const status = service.JobStatus;
  const current = status?.JobIteration;
  if (current) {
    const mine = plan.tasksOf(serviceId).filter((t) => iterationOf(t.JobIteration) === iterationOf(current));
    const outdated = mine.length > 0 && mine.every((t) => t._.specVersion < service._.specVersion);
    if (!outdated) return current;
  }
  const next = { Index: Math.max(revision, iterationOf(current) + 1) };
  service.JobStatus = { JobIteration: next, LastExecution: plan.timestamp };
  return next;
}
