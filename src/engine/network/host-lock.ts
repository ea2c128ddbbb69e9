import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { unavailable } from '../../common/errors.js';
import { tryLockFile } from '../../common/fs/file-lock.js';

/** The lock every engine on the host shares for its address blocks. */
export const DEFAULT_LOCK_PATH = '/run/lock/berth-network.lock';

/** A host lock as the network's adapters take it: `fn` run holding the lock at `path`. */
export type HostLock = <T>(fn: () => Promise<T>) => Promise<T>;

/** The lock at `path` (withHostLock) as a HostLock. */
export function hostLockAt(path = DEFAULT_LOCK_PATH): HostLock {
  return (fn) => withHostLock(path, fn);
}

/**
 * Run `fn` holding a lock shared by every engine on the host: an flock on `path` (file-lock.ts),
 * which the kernel drops with its holder however it ends, so a killed engine never blocks the next
 * and no pid is trusted. Engines hold it while they pick an address block and give it to their
 * bridge, so that two engines starting together never pick the same.
 */
export async function withHostLock<T>(path: string, fn: () => Promise<T>, timeoutMs = 30_000): Promise<T> {
  await mkdir(dirname(path), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lock = await tryLockFile(path);
    if (lock) {
      try {
        await lock.write(`${process.pid}\n`);
        return await fn();
      } finally {
        await lock.release();
      }
    }
    if (Date.now() > deadline) throw unavailable(`timed out waiting for the host network lock ${path}`);
    await sleep(20);
  }
}
