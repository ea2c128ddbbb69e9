import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonAtomic } from '../../common/fs/atomic.js';
import { KeyedMutex } from '../../common/mutex.js';

/** How long the uses of cache records wait to be written together. */
const USE_WRITE_DELAY_MS = 250;

/** One cached step: the image a step made from a parent, found again by the step's key. */
export interface CacheRecord {
  /** The record's own ID (what `docker builder prune` and `docker system df -v` show). */
  id: string;
  /** sha256 of the step's parent, instruction and (COPY/ADD) sources' checksum. */
  key: string;
  imageId: string;
  parent: string;
  /** The step as `docker system df -v` describes it. */
  description: string;
  createdAt: string;
  lastUsedAt: string;
  usageCount: number;
}

/** What makes a step's key: every part that must match for the step's image to be reused. */
export interface StepKey {
  parent: string;
  /** The step's container config Cmd (the expanded instruction, build args for RUN). */
  cmd: string[];
  /** The resulting image config, as JSON text. */
  config: string;
  /** COPY/ADD: the sources' checksum; RUN: bind-mount sources. */
  sources?: string;
}

export function stepKey(k: StepKey): string {
  return createHash('sha256')
    .update(JSON.stringify([k.parent, k.cmd, k.config, k.sources ?? '']))
    .digest('hex');
}

/**
 * The build cache's records, one JSON file each under `<data-root>/build/cache` (they survive
 * restarts). A record answers only while its image exists; the images themselves are the image
 * store's (untagged intermediate images, as dockerd's classic builder keeps).
 */
export class BuildCacheStore {
  private readonly dir: string;
  private records = new Map<string, CacheRecord>();
  /** The latest write of each record's file under way. */
  private readonly writes = new KeyedMutex();
  /** Records used since their files were last written, and the write to come. */
  private readonly used = new Set<CacheRecord>();
  private flushing: Promise<void> | undefined;

  constructor(dataRoot: string) {
    this.dir = join(dataRoot, 'build', 'cache');
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.dir)) {
      if (name.endsWith('.tmp')) await rm(join(this.dir, name), { force: true });
      if (!name.endsWith('.json')) continue;
      try {
        const r = JSON.parse(await readFile(join(this.dir, name), 'utf8')) as CacheRecord;
        if (r.key && r.imageId) this.records.set(r.key, r);
      } catch {
        await rm(join(this.dir, name), { force: true });
      }
    }
  }

  get(key: string): CacheRecord | undefined {
    return this.records.get(key);
  }

  list(): CacheRecord[] {
    return [...this.records.values()];
  }

  /**
   * A hit: the record's use is counted and dated at once; its file is written a moment later
   * with the other uses of that moment (after the answer of the build that used it), whole (a
   * temp file renamed) but not synced: a crash may lose the latest uses, never the
   * record. Resolves once written.
   */
  touch(r: CacheRecord): Promise<void> {
    r.lastUsedAt = new Date().toISOString();
    r.usageCount++;
    this.used.add(r);
    this.flushing ??= new Promise<void>((resolve) => {
      setTimeout(() => {
        this.flushing = undefined;
        resolve(this.writeUses());
      }, USE_WRITE_DELAY_MS);
    });
    return this.flushing;
  }

  private async writeUses(): Promise<void> {
    const used = [...this.used];
    this.used.clear();
    await Promise.all(
      used.map((r) =>
        this.inOrder(r.key, async () => {
          // pruned or replaced meanwhile: nothing to write
          if (this.records.get(r.key) !== r) return;
          const path = join(this.dir, `${r.key}.json`);
          const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
          await writeFile(tmp, JSON.stringify(r));
          await rename(tmp, path);
        }),
      ),
    );
  }

  async put(key: string, imageId: string, parent: string, description: string): Promise<CacheRecord> {
    const now = new Date().toISOString();
    const r: CacheRecord = {
      id: randomBytes(13).toString('hex').slice(0, 25),
      key,
      imageId,
      parent,
      description,
      createdAt: now,
      lastUsedAt: now,
      usageCount: 1,
    };
    this.records.set(key, r);
    await this.inOrder(key, () => writeJsonAtomic(join(this.dir, `${key}.json`), r));
    return r;
  }

  async remove(key: string): Promise<void> {
    this.records.delete(key);
    await this.inOrder(key, () => rm(join(this.dir, `${key}.json`), { force: true }));
  }

  /** A record's file writes one after another (a use written late never undoes a removal). */
  private inOrder(key: string, work: () => Promise<void>): Promise<void> {
    return this.writes.run(key, work);
  }
}
