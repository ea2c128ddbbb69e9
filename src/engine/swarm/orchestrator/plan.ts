import { isDeepStrictEqual } from 'node:util';
import { rfc3339Nano } from '../../../common/time.js';
import type { IpamOwner } from '../networks/network.types.js';
import type { StoredService } from '../services/service.types.js';
import { type StoredTask, stateRank, type TaskState } from '../tasks/task.types.js';
import type { ClusterSnapshot, StoredNode, Versioned } from './cluster-view.js';
import { RestartHistory } from './restart-history.js';

/**
 * One reconcile pass's working copy of the cluster: the loops change tasks and services here,
 * and the writer turns the difference from the snapshot into guarded transactions. A pass also
 * collects when it wants to run again (a restart delay, an update's delay or monitor ending).
 */
export class Plan {
  readonly tasks = new Map<string, StoredTask>();
  readonly services = new Map<string, StoredService>();
  private wake?: number;
  readonly timestamp: string;
  /**
   * Addresses claimed in this pass (`<networkID>/<ip>` → its owner), written in the same
   * transaction as the task or service that holds them (create-if-absent).
   */
  readonly ipamClaims = new Map<string, IpamOwner>();
  /** Tasks that need addresses the allocator could not give (the scheduler leaves them waiting). */
  readonly unallocated = new Set<string>();
  /** Claims to delete (`<networkID>/<ip>`): their holder is gone. */
  readonly ipamReleases = new Set<string>();

  constructor(
    readonly snap: ClusterSnapshot,
    readonly now: number,
    private readonly newId: () => string,
    /** The restart supervisor's memory of failures (it outlives the reaped history). */
    readonly restarts: RestartHistory = new RestartHistory(),
  ) {
    for (const [id, t] of snap.tasks) this.tasks.set(id, structuredClone(t.value));
    for (const [id, s] of snap.services) this.services.set(id, structuredClone(s.value));
    this.timestamp = rfc3339Nano(now);
  }

  /** Asks for another pass at `ms` (the earliest asked wins). */
  wakeAt(ms: number): void {
    if (this.wake === undefined || ms < this.wake) this.wake = ms;
  }

  get wakeTime(): number | undefined {
    return this.wake;
  }

  node(id: string | undefined): StoredNode | undefined {
    return id ? this.snap.nodes.get(id)?.value : undefined;
  }

  /** The node exists and its liveness key is there. */
  nodeUp(id: string | undefined): boolean {
    return id !== undefined && id !== '' && this.snap.nodes.has(id) && this.snap.live.has(id);
  }

  tasksOf(serviceId: string): StoredTask[] {
    return [...this.tasks.values()].filter((t) => t.ServiceID === serviceId);
  }

  /** A new task of the service (state `new`, desired `running`), in the plan. */
  createTask(
    serviceId: string,
    service: StoredService,
    where: { Slot?: number; NodeID?: string; JobIteration?: { Index: number } },
  ): StoredTask {
    const ts = this.timestamp;
    const task: StoredTask = {
      ID: this.newId(),
      CreatedAt: ts,
      UpdatedAt: ts,
      Labels: {},
      Spec: structuredClone(service.Spec.TaskTemplate ?? {}),
      ServiceID: serviceId,
      ...(where.Slot !== undefined ? { Slot: where.Slot } : {}),
      ...(where.NodeID !== undefined ? { NodeID: where.NodeID } : {}),
      Status: { Timestamp: ts, State: 'new', Message: 'created' },
      DesiredState: 'running',
      ...(where.JobIteration ? { JobIteration: { ...where.JobIteration } } : {}),
      _: { specVersion: service._.specVersion, serviceName: service.Spec.Name ?? '' },
    };
    this.tasks.set(task.ID, task);
    return task;
  }

  /** Raises a task's desired state (never lowers it). */
  setDesired(task: StoredTask, state: TaskState): void {
    if (stateRank(task.DesiredState) >= stateRank(state)) return;
    task.DesiredState = state;
    task.UpdatedAt = this.timestamp;
  }

  /** Sets the observed state as the manager moves it (new → pending → assigned); only forward. */
  setStatus(task: StoredTask, state: TaskState, message: string, err?: string): void {
    const s = task.Status;
    if (stateRank(state) < stateRank(s.State)) return;
    if (s.State === state && s.Message === message && s.Err === err) return;
    task.Status = { ...s, State: state, Message: message, Timestamp: this.timestamp };
    if (err === undefined) delete task.Status.Err;
    else task.Status.Err = err;
    task.UpdatedAt = this.timestamp;
  }

  deleteTask(id: string): void {
    this.tasks.delete(id);
  }

  /** What changed since the snapshot: [key id, before (with its revision), after]. */
  taskChanges(): Change<StoredTask>[] {
    return changes(this.snap.tasks, this.tasks);
  }

  serviceChanges(): Change<StoredService>[] {
    return changes(this.snap.services, this.services).filter((c) => c.after !== undefined);
  }
}

export interface Change<T> {
  id: string;
  before?: Versioned<T>;
  after?: T;
}

function changes<T>(before: ReadonlyMap<string, Versioned<T>>, after: Map<string, T>): Change<T>[] {
  const out: Change<T>[] = [];
  for (const [id, value] of after) {
    const b = before.get(id);
    if (!b || !isDeepStrictEqual(b.value, value)) out.push({ id, before: b, after: value });
  }
  for (const [id, b] of before) if (!after.has(id)) out.push({ id, before: b });
  return out;
}
