import { randomBytes } from 'node:crypto';
import { chmod, mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** The most the store keeps (bytes); beyond it the least recently used contents go. */
const DEFAULT_BUDGET = 512 * 1024 * 1024;
/** The most (path, size) names the index keeps. */
const INDEX_LIMIT = 4096;

/** A large regular file of a context (from DEFER_FROM bytes), as its member said. */
export interface LargeFile {
  rel: string;
  size: number;
}

/** One content of the store. */
export interface LocalSource {
  sha256: string;
  size: number;
  /** Where it is (a file of the store; never written after it is put there). */
  path: string;
  createdAt: number;
  lastUsedAt: number;
  usageCount: number;
}

const nameOf = (rel: string, size: number) => `${size}:${rel}`;

/**
 * The engine's store of the large files of earlier build contexts (BuildKit keeps the local
 * sources it synced likewise), one file per content under `<data-root>/build/sources`, named by
 * its sha256, and an index of the (path, size) each was last received as. A context member of
 * that path and size is then compared, byte by byte as it arrives, with the stored content the
 * index names (context-tar.ts): when every byte is equal, its digest is the stored one and its
 * bytes need neither be hashed, held nor written (a step that reads it gets a copy of the stored
 * file); at the first byte that differs it is hashed and written as any other file. The index is
 * only a guess of which content to compare with: no digest is ever taken from a file's name, size
 * or time. A stored file is put in place whole (renamed) and never written after; a context
 * reading it links it first, so a content that goes (evicted, pruned) stays readable to a build
 * that uses it. The store starts empty with the engine (its index is in memory) and keeps at most
 * `budget` bytes, the least recently used going first.
 */
export class LocalSources {
  private readonly byDigest = new Map<string, LocalSource>();
  private readonly index = new Map<string, string>();
  private bytes = 0;

  constructor(
    readonly dir: string,
    private readonly budget = DEFAULT_BUDGET,
  ) {}

  /** An empty store (what an earlier run left is not indexed: it goes). */
  async init(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /** The stored content a context member at `rel` of `size` bytes was last, if it is still kept. */
  candidate(rel: string, size: number): LocalSource | undefined {
    const sha256 = this.index.get(nameOf(rel, size));
    const s = sha256 === undefined ? undefined : this.byDigest.get(sha256);
    return s && s.size === size ? s : undefined;
  }

  /** A member at `rel` of `size` bytes had this stored content (every byte compared): a use. */
  used(rel: string, size: number, sha256: string): void {
    const s = this.byDigest.get(sha256);
    if (!s || s.size !== size) return;
    s.lastUsedAt = Date.now();
    s.usageCount++;
    this.name(rel, size, sha256);
  }

  /**
   * A context member at `rel` whose content (`size` bytes, `sha256`, taken as it arrived) is to
   * be kept: unless the store has it, `put` makes the file at the path it is given (a new name in
   * the store's directory: a hard link to the context's file, or its content written out), which
   * becomes the stored content.
   */
  async keep(rel: string, size: number, sha256: string, put: (path: string) => Promise<void>): Promise<void> {
    if (size > this.budget) return;
    if (!this.byDigest.has(sha256)) {
      const tmp = join(this.dir, `.new-${randomBytes(8).toString('hex')}`);
      try {
        await put(tmp);
        // read-only from now on (a link shares the context's inode, which goes with its build)
        await chmod(tmp, 0o400);
        const st = await stat(tmp);
        if (st.size !== size) throw new Error('the stored content is not whole');
        const path = join(this.dir, sha256);
        await rename(tmp, path);
        if (!this.byDigest.has(sha256)) {
          const now = Date.now();
          this.byDigest.set(sha256, { sha256, size, path, createdAt: now, lastUsedAt: now, usageCount: 0 });
          this.bytes += size;
        }
      } catch (err) {
        await rm(tmp, { force: true });
        throw err;
      }
    }
    this.name(rel, size, sha256);
    await this.evict();
  }

  /** Every stored content. */
  list(): LocalSource[] {
    return [...this.byDigest.values()];
  }

  /** A content goes (a prune): whether it was there. */
  async remove(sha256: string): Promise<boolean> {
    const s = this.byDigest.get(sha256);
    if (!s) return false;
    this.byDigest.delete(sha256);
    this.bytes -= s.size;
    for (const [name, d] of this.index) if (d === sha256) this.index.delete(name);
    await rm(s.path, { force: true });
    return true;
  }

  private name(rel: string, size: number, sha256: string): void {
    const name = nameOf(rel, size);
    this.index.delete(name);
    this.index.set(name, sha256);
    // the oldest names go first (a Map keeps its insertion order)
    for (const oldest of this.index.keys()) {
      if (this.index.size <= INDEX_LIMIT) break;
      this.index.delete(oldest);
    }
  }

  private async evict(): Promise<void> {
    if (this.bytes <= this.budget) return;
    const byUse = [...this.byDigest.values()].sort((a, b) => a.lastUsedAt - b.lastUsedAt);
    for (const s of byUse) {
      if (this.bytes <= this.budget) break;
      await this.remove(s.sha256);
    }
  }
}
