import type { RestartPolicy } from '../../../common/docker-types.js';

export const BACKOFF_START_MS = 100;
export const BACKOFF_MAX_MS = 60_000;
/** A run at least this long resets the backoff, as dockerd does. */
export const BACKOFF_RESET_AFTER_MS = 10_000;

/**
 * Decides whether a container that exited restarts, and after what delay: the delay starts at
 * 100 ms and doubles at every restart up to one minute; a run of 10 s or more resets it.
 */
export class RestartManager {
  private timeoutMs = 0;
  private cancelled = false;

  constructor(public policy: RestartPolicy) {}

  /** Forget cancellation and backoff (a manual start). */
  reset(): void {
    this.cancelled = false;
    this.timeoutMs = 0;
  }

  /** A manual stop: no restart for the current run. */
  cancel(): void {
    this.cancelled = true;
  }

  get isCancelled(): boolean {
    return this.cancelled;
  }

  shouldRestart(
    exitCode: number,
    opts: { manuallyStopped: boolean; restartCount: number; runMs: number },
  ): { restart: boolean; delayMs: number } {
    const name = this.policy.Name ?? '';
    if (name === '' || name === 'no' || this.cancelled) return { restart: false, delayMs: 0 };
    if (opts.runMs >= BACKOFF_RESET_AFTER_MS) this.timeoutMs = 0;
    if (this.timeoutMs === 0) this.timeoutMs = BACKOFF_START_MS;
    else if (this.timeoutMs < BACKOFF_MAX_MS) this.timeoutMs *= 2;
    if (this.timeoutMs > BACKOFF_MAX_MS) this.timeoutMs = BACKOFF_MAX_MS;
    let restart = false;
    if (name === 'always') restart = true;
    else if (name === 'unless-stopped') restart = !opts.manuallyStopped;
    else if (name === 'on-failure') {
      const max = this.policy.MaximumRetryCount ?? 0;
      if (max === 0 || opts.restartCount < max) restart = exitCode !== 0;
    }
    return { restart, delayMs: restart ? this.timeoutMs : 0 };
  }
}

/** Whether the daemon starts this container when it starts (policy always/unless-stopped). */
export function startsWithDaemon(policy: RestartPolicy, manuallyStopped: boolean): boolean {
  const name = policy.Name ?? '';
  if (name === 'always') return true;
  if (name === 'unless-stopped') return !manuallyStopped;
  return false;
}
