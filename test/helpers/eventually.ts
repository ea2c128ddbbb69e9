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
