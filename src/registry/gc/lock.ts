import { constants } from 'node:fs';
import { mkdir, open, readFile, rm, stat, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { BerthError } from '../../common/errors.js';
import type { StorageDriver } from '../storage/driver.js';
import { FilesystemDriver } from '../storage/filesystem.driver.js';

/** The lock file of garbage collection in the storage (outside the reference registry's tree). */
export const GC_LOCK = '/berth/gc.lock';
/** A lock not refreshed for this long belongs to a process that died: it is taken over. */
export const GC_LOCK_STALE_MS = 60_000;
const REFRESH_MS = 10_000;

export interface GcLock {
  release(): Promise<void>;
}

/**
 * Take the storage's garbage-collection lock, so that two collections (two registry processes on
 * one root, `berth registry gc` beside a serving registry) never run at once: a file created
 * exclusively, its mtime refreshed while the run goes on. A lock left by a killed process is
 * taken over once stale. A busy lock is a Conflict error naming its holder. Drivers other than
 * the filesystem have no lock (runs are not coordinated).
 */
export async function acquireGcLock(driver: StorageDriver): Promise<GcLock> {
  if (!(driver instanceof FilesystemDriver)) return { release: async () => {} };
  const path = driver.fullPath(GC_LOCK);
  await mkdir(dirname(path), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o644);
      await handle.writeFile(
        JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString() }),
      );
      await handle.close();
      const timer = setInterval(() => {
        const now = new Date();
        utimes(path, now, now).catch(() => undefined);
      }, REFRESH_MS);
      timer.unref();
      return {
        release: async () => {
          clearInterval(timer);
          await rm(path, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const st = await stat(path).catch(() => undefined);
      if (st && Date.now() - st.mtimeMs > GC_LOCK_STALE_MS) {
        await rm(path, { force: true });
        continue;
      }
      const holder = await readFile(path, 'utf8').catch(() => '');
      throw new BerthError(
        'Conflict',
        `a garbage collection is already running on this storage ${holder}`.trim(),
      );
    }
  }
  throw new BerthError('Conflict', 'a garbage collection is already running on this storage');
}
