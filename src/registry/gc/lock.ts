import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BerthError } from '../../common/errors.js';
import type { StorageDriver } from '../storage/driver.js';
import { FilesystemDriver } from '../storage/filesystem.driver.js';
import { type Lease, tryLease } from '../storage/lease.js';

/** The lock file of garbage collection in the storage (outside the reference registry's tree). */
export const GC_LOCK = '/berth/gc.lock';

/**
 * Take the storage's garbage-collection lock, so that two collections (two registry processes on
 * one root, `berth registry gc` beside a serving registry) never run at once: a lease file
 * (storage/lease.ts) taken over when its holder died. A busy lock is a Conflict error naming its
 * holder. Drivers other than the filesystem have no lock (runs are not coordinated).
 */
export async function acquireGcLock(driver: StorageDriver): Promise<Lease> {
  if (!(driver instanceof FilesystemDriver)) return { release: async () => {} };
  const path = driver.fullPath(GC_LOCK);
  await mkdir(dirname(path), { recursive: true });
  const lease = await tryLease(path);
  if (lease === 'missing') throw new Error(`cannot create ${path}`);
  if ('busy' in lease) {
    const h = lease.busy;
    throw new BerthError(
      'Conflict',
      `a garbage collection is already running on this storage (pid ${h.pid} on ${h.host || 'unknown host'} since ${h.since || '?'})`,
    );
  }
  return lease;
}
