import { createHash, randomBytes } from 'node:crypto';
import { chown, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { writeJsonAtomic } from '../../common/fs/atomic.js';
import { diskUsage } from '../../common/fs/disk-usage.js';
import { KeyedMutex } from '../../common/mutex.js';

/** A `RUN --mount=type=cache` directory: persistent, per id, shared between builds. */
export interface CacheMountRecord {
  /** The record's ID (prune and df). */
  id: string;
  /** The mount's `id` (its target by default). */
  cacheId: string;
  createdAt: string;
  lastUsedAt: string;
  usageCount: number;
}

const keyOf = (cacheId: string): string => createHash('sha256').update(cacheId).digest('hex');

/**
 * The cache mounts under `<data-root>/build/cache-mounts/<sha256(id)>/` (`data/` the directory a
 * RUN sees, `record.json` what df and prune show). Sharing as buildkit's: `shared` (default) is
 * the same directory for every user at once, `locked` one user at a time, `private` a fresh
 * directory when another user has it.
 */
export class CacheMounts {
  private readonly dir: string;
  private readonly locks = new KeyedMutex();
  private readonly busy = new Map<string, number>();

  constructor(dataRoot: string) {
    this.dir = join(dataRoot, 'build', 'cache-mounts');
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    // private copies of a build that ended with the engine are of no use
    for (const name of await readdir(this.dir)) {
      if (name.startsWith('private-')) await rm(join(this.dir, name), { recursive: true, force: true });
    }
  }

  /**
   * Hold the cache directory `cacheId` for one RUN: resolves to the host directory and a release.
   * The directory is made with `mode`/`uid`/`gid` the first time.
   */
  async acquire(
    cacheId: string,
    sharing: 'shared' | 'private' | 'locked',
    perms: { mode?: number; uid?: number; gid?: number },
  ): Promise<{ path: string; release(): Promise<void> }> {
    const key = keyOf(cacheId);
    if (sharing === 'private' && (this.busy.get(key) ?? 0) > 0) {
      const path = join(this.dir, `private-${randomBytes(8).toString('hex')}`);
      await this.makeDir(path, perms);
      return { path, release: () => rm(path, { recursive: true, force: true }) };
    }
    let unlock: () => void = () => undefined;
    if (sharing === 'locked') {
      const held = new Promise<void>((resolve) => {
        unlock = resolve;
      });
      let acquired: () => void = () => undefined;
      const got = new Promise<void>((resolve) => {
        acquired = resolve;
      });
      void this.locks.run(key, async () => {
        acquired();
        await held;
      });
      await got;
    }
    this.busy.set(key, (this.busy.get(key) ?? 0) + 1);
    const path = join(this.dir, key, 'data');
    await this.makeDir(path, perms);
    await this.touch(key, cacheId);
    return {
      path,
      release: async () => {
        this.busy.set(key, (this.busy.get(key) ?? 1) - 1);
        unlock();
      },
    };
  }

  private async makeDir(path: string, perms: { mode?: number; uid?: number; gid?: number }): Promise<void> {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    try {
      await mkdir(path, { mode: perms.mode ?? 0o755 });
    } catch (err) {
      // made already (by an earlier build, or a RUN of this one at the same time)
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
      throw err;
    }
    if (perms.uid !== undefined || perms.gid !== undefined) await chown(path, perms.uid ?? 0, perms.gid ?? 0);
  }

  private async touch(key: string, cacheId: string): Promise<void> {
    const file = join(this.dir, key, 'record.json');
    const now = new Date().toISOString();
    const old = await this.read(key);
    const r: CacheMountRecord = old
      ? { ...old, lastUsedAt: now, usageCount: old.usageCount + 1 }
      : { id: key.slice(0, 25), cacheId, createdAt: now, lastUsedAt: now, usageCount: 1 };
    await writeJsonAtomic(file, r);
  }

  private async read(key: string): Promise<CacheMountRecord | undefined> {
    try {
      return JSON.parse(await readFile(join(this.dir, key, 'record.json'), 'utf8')) as CacheMountRecord;
    } catch {
      return undefined;
    }
  }

  /** Every cache mount with its size and whether a RUN holds it now. */
  async list(): Promise<Array<CacheMountRecord & { key: string; size: number; inUse: boolean }>> {
    const out: Array<CacheMountRecord & { key: string; size: number; inUse: boolean }> = [];
    for (const key of await readdir(this.dir).catch(() => [] as string[])) {
      if (key.startsWith('private-')) continue;
      const r = await this.read(key);
      if (!r) continue;
      const size = await diskUsage(join(this.dir, key, 'data')).catch(() => 0);
      out.push({ ...r, key, size, inUse: (this.busy.get(key) ?? 0) > 0 });
    }
    return out;
  }

  /** Delete a cache mount that nobody holds; false when in use. */
  async remove(key: string): Promise<boolean> {
    if ((this.busy.get(key) ?? 0) > 0) return false;
    await rm(join(this.dir, key), { recursive: true, force: true });
    return true;
  }
}
