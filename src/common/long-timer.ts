/** setTimeout's limit: a longer delay fires at once (with a TimeoutOverflowWarning). */
const MAX_DELAY = 2 ** 31 - 1;

/** A timer that may run longer than setTimeout allows (about 24.8 days). */
export interface LongTimer {
  clear(): void;
}

/**
 * Run `fn` after `ms` milliseconds, however long (health-check intervals of 720h, `until` a month
 * away): setTimeout's own limit is chained over. `unref`: the timer does not keep Node alive.
 */
export function setLongTimeout(fn: () => void, ms: number, opts: { unref?: boolean } = {}): LongTimer {
  let timer: NodeJS.Timeout | undefined;
  const due = Date.now() + Math.max(0, ms);
  const arm = (): void => {
    const left = due - Date.now();
    timer = setTimeout(left > MAX_DELAY ? arm : fn, Math.min(Math.max(left, 0), MAX_DELAY));
    if (opts.unref) timer.unref();
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}
