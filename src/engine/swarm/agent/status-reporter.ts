import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { StatusAnswer, StatusCall } from '../cluster-api/assignments.types.js';
import { stateRank, type TaskStatus } from '../tasks/task.types.js';

/**
 * The agent's task state reports on their way to a manager: batched (whatever came while a call
 * was under way goes in the next), the latest state per task only, never one behind what is
 * already queued, and kept and retried (every `retryMs`) while no manager takes them. A task whose
 * container turned unhealthy is said so with its report (until a manager took it).
 */
export class StatusReporter {
  private readonly pending = new Map<string, TaskStatus>();
  /** Tasks whose container turned unhealthy, to say with their next report; who waits for a manager to take it. */
  private readonly unhealthy = new Map<string, Array<() => void>>();
  private sending = false;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly send: (call: StatusCall) => Promise<StatusAnswer>,
    private readonly log: Logger,
    private readonly retryMs = 1000,
  ) {}

  report(taskId: string, status: TaskStatus): void {
    const queued = this.pending.get(taskId);
    if (queued && stateRank(queued.State) > stateRank(status.State)) return;
    this.pending.set(taskId, status);
    this.kick(0);
  }

  /**
   * The task's container turned unhealthy: said with its status (it leaves the VIPs at once).
   * Resolves once a manager took the report (or the reporter stopped).
   */
  reportUnhealthy(taskId: string, status: TaskStatus): Promise<void> {
    const taken = new Promise<void>((resolve) => {
      this.unhealthy.set(taskId, [...(this.unhealthy.get(taskId) ?? []), resolve]);
    });
    const queued = this.pending.get(taskId);
    if (!queued || stateRank(queued.State) <= stateRank(status.State)) this.pending.set(taskId, status);
    this.kick(0);
    return taken;
  }

  /** Sends what is pending now (a reconnect). */
  flush(): void {
    this.kick(0);
  }

  /** Reports still waiting for a manager. */
  get waiting(): number {
    return this.pending.size;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    // nobody waits on a stopped reporter (the flags stay, for a start again)
    for (const [id, waiters] of this.unhealthy) {
      for (const resolve of waiters) resolve();
      this.unhealthy.set(id, []);
    }
  }

  start(): void {
    this.stopped = false;
    if (this.pending.size > 0) this.kick(0);
  }

  private kick(ms: number): void {
    if (this.stopped || this.sending || this.pending.size === 0) return;
    if (this.timer) {
      if (ms > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.sendPending();
    }, ms);
    this.timer.unref();
  }

  private async sendPending(): Promise<void> {
    if (this.stopped || this.sending || this.pending.size === 0) return;
    this.sending = true;
    const batch = [...this.pending.entries()];
    this.pending.clear();
    const unhealthy = batch.filter(([id]) => this.unhealthy.has(id)).map(([id]) => id);
    let ok = false;
    try {
      await this.send({
        Updates: batch.map(([TaskID, Status]) => ({
          TaskID,
          Status,
          ...(this.unhealthy.has(TaskID) ? { Unhealthy: true } : {}),
        })),
      });
      for (const id of unhealthy) {
        for (const resolve of this.unhealthy.get(id) ?? []) resolve();
        this.unhealthy.delete(id);
      }
      ok = true;
    } catch (err) {
      this.log.debug('task status report failed; kept for the next try', { error: errorMessage(err) });
      // back in the queue unless a newer one came meanwhile
      for (const [id, status] of batch) {
        const newer = this.pending.get(id);
        if (!newer || stateRank(newer.State) < stateRank(status.State)) this.pending.set(id, status);
      }
    } finally {
      this.sending = false;
    }
    this.kick(ok ? 0 : this.retryMs);
  }
}
