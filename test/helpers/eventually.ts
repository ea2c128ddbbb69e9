import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Wait until `check` holds, asking again every `intervalMs` (default 20), failing with `what` after
 * `timeoutMs` (default 10 s): for what a test cannot await directly (a process exiting, a file
 * being written by another process). Bounded: it always ends.
 */
export async function eventually(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  intervalMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/**
 * Read until `ok` holds for what `read` gives, and return that value; failing with `what` and the
 * last value seen after `timeoutMs` (default 30 s). Bounded: it always ends.
 */
export async function eventuallyValue<T>(
  what: string,
  read: () => Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await read();
    if (ok(last)) return last;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last seen ${JSON.stringify(last)}`,
      );
    await sleep(intervalMs);
  }
}

/**
 * Ask `get` until it gives a value (not `undefined`); a throw counts as "not yet" and is kept for
 * the failure message, failing with `what` after `timeoutMs`. Bounded: it always ends.
 */
export async function until<T>(
  what: string,
  timeoutMs: number,
  get: () => Promise<T | undefined>,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await get();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await sleep(intervalMs);
  }
  throw new Error(`${what}: not within ${timeoutMs} ms ${last ? String(last) : ''}`);
}
