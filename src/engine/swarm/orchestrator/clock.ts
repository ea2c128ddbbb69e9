/** The orchestrator's time: read it, and be woken later (a fake in unit tests). */
export interface Clock {
  now(): number;
  /** Runs `fn` after `ms` milliseconds; returns what cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, Math.min(Math.max(0, ms), 2 ** 31 - 1));
    timer.unref();
    return () => clearTimeout(timer);
  },
};
