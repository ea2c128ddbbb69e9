import { randomBytes } from 'node:crypto';
import { link, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';

/** A lease not refreshed for this long belongs to a process that died: it is taken over. */
export const LEASE_STALE_MS = 60_000;
const REFRESH_MS = 10_000;

export interface Lease {
  release(): Promise<void>;
}

interface Holder {
  pid: number;
  host: string;
  since: string;
}

/**
 * What a lease file holds when it is busy, or undefined when it is free or stale (its mtime not
 * refreshed for LEASE_STALE_MS, or its holder a process of this host that is gone).
 */
async function liveHolder(path: string): Promise<Holder | undefined> {
  const st = await stat(path).catch(() => undefined);
  if (!st) return undefined;
  let holder: Holder | undefined;
  try {
    holder = JSON.parse(await readFile(path, 'utf8')) as Holder;
  } catch {
    holder = undefined;
  }
  // Lease files are written whole (tryLease): one that does not parse is not a live lease.
  if (!holder || Date.now() - st.mtimeMs > LEASE_STALE_MS) return undefined;
  if (holder.host === hostname() && holder.pid !== process.pid) {
    try {
      process.kill(holder.pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    }
  }
  return holder;
}

/**
 * Take a lease on a file path shared by the processes on one storage: the file is created
 * exclusively (its directory must exist), its mtime refreshed every 10 s while held, removed on
 * release. A stale lease (see liveHolder) is taken over. Resolves with the lease, or with the
 * live holder when another process has it. `missing` when the directory does not exist.
 */
export async function tryLease(path: string): Promise<Lease | { busy: Holder } | 'missing'> {
  for (let attempt = 0; attempt < 2; attempt++) {
    // Written whole under a temporary name, then linked into place (link fails if the lease
    // exists): a lease file is never seen half written, even after a kill -9.
    const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await writeFile(
        tmp,
        JSON.stringify({
          pid: process.pid,
          host: hostname(),
          since: new Date().toISOString(),
        } satisfies Holder),
        { flag: 'wx' },
      );
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
      throw err;
    }
    try {
      await link(tmp, path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return 'missing';
      if (code !== 'EEXIST') throw err;
      const holder = await liveHolder(path);
      if (holder) return { busy: holder };
      await rm(path, { force: true });
      continue;
    } finally {
      await rm(tmp, { force: true });
    }
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
  }
  const holder = await liveHolder(path);
  return { busy: holder ?? { pid: 0, host: '', since: '' } };
}
