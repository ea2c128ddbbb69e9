import { isDeepStrictEqual } from 'node:util';
import { parseTimestampMs } from '../../../common/time.js';
import type { ServiceSpec, StoredService, UpdateConfig } from '../services/service.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { Plan } from './plan.js';
import { byNewest, createdAt, endedAt, hasStopped, isDirty, isLive, modeOf, nsToMs } from './task-life.js';

/**
 * The rolling updater (swarmkit's update.Updater). When a service's spec changes so that its
 * tasks are out of date (`_.specVersion`), its slots are replaced in batches of `Parallelism`
 * (0: all at once), `Delay` apart once a new task runs; `stop-first` stops the old task before
 * its successor is made, `start-first` makes the successor first and stops the old task once it
 * runs. A new task that fails or exits before running or within `Monitor` of it counts as a
 * failure; past `MaxFailureRatio` of the slots, `FailureAction` applies: `pause`, `continue`, or
 * `rollback` to PreviousSpec with RollbackConfig. UpdateStatus carries swarmkit's states and
 * words. What a pass cannot read back from the store (when a task was first seen running, which
 * spec a pause was for) lives in UpdaterMemory, for as long as this manager leads.
 */
export class UpdaterMemory {
  readonly runs = new Map<string, Run>();
  readonly runningSince = new Map<string, number>();
  readonly seen = new Map<string, { specVersion: number; previous?: ServiceSpec }>();
  readonly pausedAt = new Map<string, number>();

  /** Notes when tasks were first seen running; forgets what the store no longer holds. */
  observe(plan: Plan): void {
    for (const t of plan.tasks.values()) {
      if (t.Status.State !== 'running' || this.runningSince.has(t.ID)) continue;
      const at = parseTimestampMs(t.Status.Timestamp);
      this.runningSince.set(t.ID, Number.isFinite(at) ? Math.min(at, plan.now) : plan.now);
    }
    for (const id of this.runningSince.keys()) if (!plan.tasks.has(id)) this.runningSince.delete(id);
    for (const map of [this.runs, this.seen, this.pausedAt])
      for (const id of map.keys()) if (!plan.services.has(id)) map.delete(id);
  }
}

interface Run {
  specVersion: number;
  startedAt: number;
  rollback: boolean;
}

interface Effective {
  parallelism: number;
  delayMs: number;
  monitorMs: number;
  failureAction: 'pause' | 'continue' | 'rollback';
  maxFailureRatio: number;
  order: 'stop-first' | 'start-first';
}

const DEFAULT_MONITOR_NS = 5e9;

function effective(cfg: UpdateConfig | undefined): Effective {
  return {
    parallelism: cfg ? Math.max(0, cfg.Parallelism ?? 0) : 1,
    delayMs: nsToMs(cfg?.Delay),
    monitorMs: nsToMs(cfg?.Monitor || DEFAULT_MONITOR_NS),
    failureAction: cfg?.FailureAction ?? 'pause',
    maxFailureRatio: cfg?.MaxFailureRatio ?? 0,
    order: cfg?.Order ?? 'stop-first',
  };
}

const FAILED_STATES = new Set(['failed', 'rejected', 'complete', 'orphaned']);

export function updateService(
  plan: Plan,
  mem: UpdaterMemory,
  serviceId: string,
  service: StoredService,
): void {
  const kind = modeOf(service.Spec.Mode);
  if (kind === 'replicated-job' || kind === 'global-job') return;
  const version = service._.specVersion;
  const seen = mem.seen.get(serviceId);
  let manualRollback = false;
  if (seen && seen.specVersion !== version) {
    manualRollback = seen.previous !== undefined && isDeepStrictEqual(service.Spec, seen.previous);
    mem.runs.delete(serviceId);
    mem.pausedAt.delete(serviceId);
  }
  mem.seen.set(serviceId, { specVersion: version, previous: service.PreviousSpec });

  const slotOf = (t: StoredTask) => (kind === 'global' ? (t.NodeID ?? '') : String(t.Slot ?? 0));
  const slots = new Map<string, StoredTask[]>();
  for (const t of plan.tasksOf(serviceId)) {
    if (t.DesiredState === 'remove') continue;
    slots.set(slotOf(t), [...(slots.get(slotOf(t)) ?? []), t]);
  }
  const stopping = (tasks: StoredTask[]) => {
    const newest = [...tasks].sort(byNewest)[0];
    return !tasks.some(isLive) && !!newest && isDirty(newest, service) && !hasStopped(newest, plan);
  };
  const outdated = [...slots.values()].some(
    (tasks) => tasks.some((t) => isLive(t) && isDirty(t, service)) || stopping(tasks),
  );

  let run = mem.runs.get(serviceId);
  const state = service.UpdateStatus?.State;
  if (!run) {
    if ((state === 'paused' || state === 'rollback_paused') && !mem.pausedAt.has(serviceId) && !seen)
      mem.pausedAt.set(serviceId, version);
    if (mem.pausedAt.get(serviceId) === version) return;
    if (state === 'updating' || state === 'rollback_started') {
      const started = parseTimestampMs(service.UpdateStatus?.StartedAt ?? '');
      run = {
        specVersion: version,
        startedAt: Number.isFinite(started) ? started : plan.now,
        rollback: state === 'rollback_started',
      };
    } else if (outdated) {
      run = { specVersion: version, startedAt: plan.now, rollback: manualRollback };
      service.UpdateStatus = {
        State: manualRollback ? 'rollback_started' : 'updating',
        StartedAt: plan.timestamp,
        Message: manualRollback ? 'manually requested rollback' : 'update in progress',
      };
    } else return;
    mem.runs.set(serviceId, run);
  }
  const cfg = effective(run.rollback ? service.Spec.RollbackConfig : service.Spec.UpdateConfig);
  if (run.rollback) adoptUnchanged(plan, serviceId, service);

  let inFlight = 0;
  let delayed = 0;
  let monitorEnd = 0;
  const failures: StoredTask[] = [];
  const remaining: [string, StoredTask[]][] = [];
  let touched = 0;
  for (const [key, tasks] of slots) {
    const updated = tasks.filter((t) => !isDirty(t, service) && createdAt(t) >= run.startedAt);
    const dirtyLive = tasks.filter((t) => isLive(t) && isDirty(t, service));
    if (updated.length > 0 || dirtyLive.length > 0 || stopping(tasks)) touched++;
    if (stopping(tasks)) inFlight++;
    for (const u of updated) {
      const ranAt = mem.runningSince.get(u.ID);
      if (FAILED_STATES.has(u.Status.State) || (u.Status.State === 'shutdown' && isLive(u))) {
        if (ranAt === undefined || endedAt(u, plan) <= ranAt + cfg.monitorMs) failures.push(u);
        continue;
      }
      if (!isLive(u)) continue;
      if (ranAt === undefined) inFlight++;
      else {
        monitorEnd = Math.max(monitorEnd, ranAt + cfg.monitorMs);
        if (ranAt + cfg.delayMs > plan.now) {
          delayed++;
          plan.wakeAt(ranAt + cfg.delayMs);
        }
      }
    }
    // a global service's node that is down waits for it to come back; it does not hold the update
    const nodeDown = kind === 'global' && !plan.nodeUp(key);
    if (dirtyLive.length > 0 && !nodeDown && !tasks.some((t) => isLive(t) && !isDirty(t, service)))
      remaining.push([key, dirtyLive]);
  }

  if (
    failures.length > 0 &&
    cfg.failureAction !== 'continue' &&
    failures.length / Math.max(1, touched) > cfg.maxFailureRatio
  ) {
    // the failure that crossed the ratio: the latest to end
    const failed = failures.sort((a, b) => endedAt(b, plan) - endedAt(a, plan))[0] as StoredTask;
    if (cfg.failureAction === 'rollback' && !run.rollback && service.PreviousSpec) {
      rollBack(
        plan,
        mem,
        serviceId,
        service,
        `update rolled back due to failure or early termination of task ${failed.ID}`,
      );
      return;
    }
    service.UpdateStatus = {
      ...service.UpdateStatus,
      State: run.rollback ? 'rollback_paused' : 'paused',
      Message: `${run.rollback ? 'rollback' : 'update'} paused due to failure or early termination of task ${failed.ID}`,
    };
    mem.runs.delete(serviceId);
    mem.pausedAt.set(serviceId, version);
    return;
  }

  let available = cfg.parallelism === 0 ? Number.POSITIVE_INFINITY : cfg.parallelism - inFlight - delayed;
  remaining.sort((a, b) => (kind === 'global' ? (a[0] < b[0] ? -1 : 1) : Number(a[0]) - Number(b[0])));
  for (const [key, dirtyLive] of remaining) {
    if (available <= 0) break;
    available--;
    inFlight++;
    if (cfg.order === 'start-first') {
      plan.createTask(serviceId, service, kind === 'global' ? { NodeID: key } : { Slot: Number(key) });
    } else for (const t of dirtyLive) plan.setDesired(t, 'shutdown');
  }
  if (remaining.length > 0 || inFlight > 0) return;
  if (plan.now < monitorEnd) {
    plan.wakeAt(monitorEnd);
    return;
  }
  service.UpdateStatus = {
    State: run.rollback ? 'rollback_completed' : 'completed',
    StartedAt: service.UpdateStatus?.StartedAt ?? plan.timestamp,
    CompletedAt: plan.timestamp,
    Message: run.rollback ? 'rollback completed' : 'update completed',
  };
  mem.runs.delete(serviceId);
}

/**
 * A rollback leaves alone the tasks the update had not reached yet: a task made from an older
 * spec version whose TaskTemplate is the one rolled back to is brought up to date in place, as
 * swarmkit compares specs rather than versions.
 */
function adoptUnchanged(plan: Plan, serviceId: string, service: StoredService): void {
  const template = service.Spec.TaskTemplate ?? {};
  for (const t of plan.tasksOf(serviceId)) {
    if (isLive(t) && isDirty(t, service) && isDeepStrictEqual(t.Spec, template))
      t._ = { ...t._, specVersion: service._.specVersion };
  }
}

/** FailureAction rollback: back to PreviousSpec (the two swapped), rolled with RollbackConfig. */
function rollBack(
  plan: Plan,
  mem: UpdaterMemory,
  serviceId: string,
  service: StoredService,
  message: string,
): void {
  const previous = service.PreviousSpec as ServiceSpec;
  service.PreviousSpec = service.Spec;
  service.Spec = previous;
  service._.specVersion += 1;
  service.UpdatedAt = plan.timestamp;
  service.UpdateStatus = { State: 'rollback_started', StartedAt: plan.timestamp, Message: message };
  mem.runs.set(serviceId, { specVersion: service._.specVersion, startedAt: plan.now, rollback: true });
  mem.seen.set(serviceId, { specVersion: service._.specVersion, previous: service.PreviousSpec });
}
