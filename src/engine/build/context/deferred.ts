import {
  type BigIntStats,
  fchmodSync,
  fstatSync,
  ftruncateSync,
  futimesSync,
  linkSync,
  rmSync,
} from 'node:fs';
import { link, lstat, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { KnownDigest } from '../build.types.js';
import { HeldFiles } from './held.thread.js';
import type { LargeFile, LocalSources } from './local-sources.js';
import { StoredComparison } from './stored-compare.js';

/** Files from this size up may have their content held rather than written as they arrive. */
export const DEFER_FROM = 1024 * 1024;
/** The most content held for all the builds of the engine at once (beyond it, files are written). */
const BUDGET = 64 * 1024 * 1024;
let held = 0;

/** A file whose content is held: its place in the context is a sparse file of its size. */
interface Held {
  /** Its number on the held-contents thread. */
  id: number;
  /** The placeholder's inode (`<dev>:<ino>`), as the digests know it. */
  key: string;
  size: number;
  mode: number;
  mtime: Date;
  /** The placeholder's time as the file system keeps it. */
  mtimeNs: bigint;
  /** Known once the extraction is settled. */
  sha256?: string;
}

const keyOf = (st: { dev: bigint; ino: bigint }): string => `${st.dev}:${st.ino}`;

/**
 * A context's large files kept in the engine's store (LocalSources) once its build is done: a
 * held content is written there by the thread (unless the store has it), a file on disk whose
 * digest the extraction took (its inode, size and time unchanged) is linked there. Files that
 * changed or went are left out.
 */
export async function keepSources(
  sources: LocalSources,
  root: string,
  large: LargeFile[],
  digests: ReadonlyMap<string, KnownDigest>,
  deferred: DeferredContents | undefined,
): Promise<void> {
  for (const { rel, size } of large) {
    const at = join(root, rel);
    const st = await lstat(at, { bigint: true }).catch(() => undefined);
    if (!st?.isFile() || st.size !== BigInt(size)) continue;
    if (await deferred?.keepHeld(rel, st, size)) continue;
    const d = digests.get(keyOf(st));
    if (!d || d.size !== size || d.mtimeNs !== st.mtimeNs) continue;
    await sources.keep(rel, size, d.sha256, (path) => link(at, path));
  }
}

/**
 * The contents a context's extraction held instead of writing them: a build whose steps all
 * come from the cache never needs them on disk (its COPY checksums are the digests taken as the
 * bytes arrived), so the bytes are written only when something reads the context's files (a COPY
 * or ADD that runs, a RUN bind mount of the context, a Dockerfile that is one of them). Until then
 * each such file is a sparse file of its size, mode and time, whose digest is known by its inode.
 * Writing one out makes a new file beside the root and renames it over the placeholder (its
 * digest known by the new inode first), so a checksum taken meanwhile sees one complete file or
 * the other, never a half-written one.
 *
 * The contents are held and hashed on the engine's held-contents thread (held.thread.ts): the
 * request's chunks are handed over whole, not copied, when they are the request's own (`lend`);
 * other sources' pieces are copied. What all builds hold together is bounded; past the bound files
 * are written as they arrive, so a context larger than memory still streams.
 */
export class DeferredContents {
  private readonly files = new Map<string, Held>();
  /** Every file held during the extraction, by number (their digests come once it is settled). */
  private readonly placed = new Map<number, Held>();
  private readonly thread = new HeldFiles();
  /** Writes into placeholders asked during the extraction (hard links to held files). */
  private readonly inPlace: Array<Promise<unknown>> = [];
  private bytes = 0;
  /** Held files whose share of the bound went back (equal to a stored content: nothing held). */
  private readonly light = new Set<number>();
  private nextId = 0;
  private settled = false;
  private writing: Promise<void> | undefined;
  private count = 0;

  /**
   * `root`: the context's files; `staging`: a directory of the engine's on the same file system,
   * outside the root; `digests`: the context's digests by inode (kept up to date here).
   */
  /** The held files compared with a stored content (by number; `path`: its link in the staging directory). */
  private readonly comparing = new Map<
    number,
    { rel: string; size: number; sha256: string; path: string; cmp: StoredComparison }
  >();

  constructor(
    private readonly root: string,
    private readonly staging: string,
    private readonly digests: Map<string, KnownDigest>,
    private readonly sources?: LocalSources,
  ) {}

  /**
   * Held file `id` (a member at `rel` of `size` bytes) is compared, byte by byte as it arrives,
   * with the engine's stored content of that path and size (LocalSources), when there is one: the
   * comparison answered is fed the member's pieces instead of `data`. Every byte equal
   * (`storedEnd`), its digest is the stored one and the thread keeps none of its bytes (it writes
   * the file out from the stored one); at the first byte that differs (`storedDiffers`) the bytes
   * equal so far are read back from the stored content and the file is hashed and held as any
   * other. The stored file is linked into the staging directory first, so a content evicted or
   * pruned meanwhile stays readable.
   */
  compareStored(id: number, rel: string, size: number): StoredComparison | undefined {
    const s = this.sources?.candidate(rel, size);
    if (!s) return undefined;
    const path = join(this.staging, `.source-${++this.count}`);
    let cmp: StoredComparison;
    try {
      linkSync(s.path, path);
      cmp = new StoredComparison(path, size);
    } catch {
      // gone meanwhile (evicted, pruned): hashed as any file
      rmSync(path, { force: true });
      return undefined;
    }
    this.comparing.set(id, { rel, size, sha256: s.sha256, path, cmp });
    return cmp;
  }

  /**
   * Held file `id`'s comparison found a difference: the bytes equal so far go to the thread (read
   * back from the stored content), then the file's pieces as any held file's.
   */
  storedDiffers(id: number): void {
    const c = this.comparing.get(id);
    if (!c) return;
    this.comparing.delete(id);
    try {
      c.cmp.replay((piece) => this.thread.data(id, piece, true));
    } finally {
      rmSync(c.path, { force: true });
    }
  }

  /** Held file `id` has all its bytes: equal to the stored content, that content is its own. */
  storedEnd(id: number): void {
    const c = this.comparing.get(id);
    if (!c) return;
    if (!c.cmp.whole) {
      this.storedDiffers(id);
      return;
    }
    c.cmp.close();
    this.thread.stored(id, c.path, c.sha256);
    // nothing of it is held: its share of the bound goes back at once
    held -= c.size;
    this.bytes -= c.size;
    this.light.add(id);
  }

  /**
   * Whether a file of `size` bytes is held rather than written (it takes its share of the
   * budget): its number for `data` and `hold`, or undefined.
   */
  take(size: number): number | undefined {
    if (size < DEFER_FROM || held + size > BUDGET) return undefined;
    held += size;
    this.bytes += size;
    return ++this.nextId;
  }

  /** A piece of held file `id`'s content (`owned`: its whole buffer may be handed over). */
  data(id: number, piece: Buffer, owned: boolean): void {
    this.thread.data(id, piece, owned);
  }

  /** Between two chunks of the archive: what was batched goes to the thread when it is time. */
  between(): void {
    this.thread.flushIfFull();
  }

  /** Gives back a share taken for a file that is not held after all (the archive stopped in it). */
  giveBack(id: number, size: number): void {
    this.comparing.get(id)?.cmp.close();
    this.comparing.delete(id);
    this.unweigh(id, size);
    this.thread.drop(id);
  }

  /**
   * The file at `rel` (open as `fd`, empty) is held: it becomes a sparse file of the content's
   * size with its mode and time; its digest is known once the extraction is settled. Closes
   * nothing.
   */
  hold(rel: string, fd: number, id: number, c: { size: number; mode: number; mtime: Date }): void {
    ftruncateSync(fd, c.size);
    fchmodSync(fd, c.mode);
    futimesSync(fd, c.mtime, c.mtime);
    const st = fstatSync(fd, { bigint: true });
    const f: Held = { ...c, id, key: keyOf(st), mtimeNs: st.mtimeNs };
    this.thread.end(id);
    this.files.set(rel, f);
    this.placed.set(id, f);
  }

  /**
   * The archive is read: every held file's digest (taken on the thread), and the placeholders
   * written in meanwhile.
   */
  async settle(): Promise<void> {
    const sums = await this.thread.digests();
    await Promise.all(this.inPlace);
    const stillHeld = new Set([...this.files.values()].map((f) => f.id));
    for (const [id, f] of this.placed) {
      const sum = sums.get(id);
      const sha256 = sum?.sha256;
      if (sum?.same) {
        const c = this.comparing.get(id);
        if (c) this.sources?.used(c.rel, c.size, sum.sha256);
      }
      if (sha256 !== undefined) {
        f.sha256 = sha256;
        this.digests.set(f.key, { size: f.size, mtimeNs: f.mtimeNs, sha256 });
      } else if (stillHeld.has(id)) {
        // never a placeholder without its digest (a checksum would read its zeros)
        throw new Error("the build context's held contents were lost");
      }
      // written in place meanwhile: its content is the file's now
      if (!stillHeld.has(id)) this.thread.drop(id);
    }
    this.placed.clear();
    this.settled = true;
    this.thread.flush();
  }

  /** A member replaced `rel` (and what was below it): their contents are no longer wanted. */
  forget(rel: string): void {
    for (const [name, f] of this.files) {
      if (name === rel || name.startsWith(`${rel}/`)) this.drop(name, f);
    }
  }

  /**
   * A hard link to `rel` is about to be made: the content goes into the placeholder itself (both
   * names then share it; written by the thread before the extraction is settled), its time put
   * back.
   */
  writeInPlace(rel: string): void {
    const f = this.files.get(rel);
    if (!f) return;
    const at = join(this.root, rel);
    this.inPlace.push(
      this.thread.write(f.id, { path: at, create: false, mode: f.mode, mtime: f.mtime }, false).then((st) => {
        f.mtimeNs = st.mtimeNs;
      }),
    );
    // no longer held: its content is the file's (the thread drops it once its digest is told)
    this.files.delete(rel);
    this.unweigh(f.id, f.size);
  }

  /**
   * A held content of the file at `rel` (lstat'd as `st`) kept in the engine's store of context
   * sources, written there by the thread unless the store has it. False when the file is not a
   * placeholder of this context's.
   */
  async keepHeld(rel: string, st: BigIntStats, size: number): Promise<boolean> {
    const f = this.files.get(rel);
    if (!f || f.key !== keyOf(st) || f.sha256 === undefined) return false;
    const { id, mtime } = f;
    await this.sources?.keep(rel, size, f.sha256, async (path) => {
      await this.thread.write(id, { path, create: true, mode: 0o600, mtime });
    });
    return true;
  }

  /** Whether a file (lstat'd or stat'd with bigint) is a placeholder whose content is held. */
  holds(st: BigIntStats): boolean {
    const key = keyOf(st);
    for (const f of this.files.values()) if (f.key === key) return true;
    return false;
  }

  get empty(): boolean {
    return this.files.size === 0;
  }

  /** Every held content written into its file (once: later calls share the first). */
  writeOut(): Promise<void> {
    if (this.files.size === 0) return this.writing ?? Promise.resolve();
    this.writing ??= this.writeAll();
    return this.writing;
  }

  /** The contents are not wanted any more (the context is going). */
  release(): void {
    for (const c of this.comparing.values()) c.cmp.close();
    for (const [name, f] of this.files) this.drop(name, f);
    this.thread.drop(undefined, true);
  }

  /** A held file's share of the bound goes back (unless it went back already: `light`). */
  private unweigh(id: number, size: number): void {
    if (this.light.delete(id)) return;
    held -= size;
    this.bytes -= size;
  }

  private drop(rel: string, f: Held): void {
    // dropped already (a release while it was being written out)
    if (this.files.get(rel) !== f) return;
    this.files.delete(rel);
    this.unweigh(f.id, f.size);
    // during the extraction, with the next batch (never inside a chunk)
    this.thread.drop(f.id, this.settled);
  }

  private async writeAll(): Promise<void> {
    for (const [rel, f] of [...this.files]) {
      if (this.files.get(rel) !== f) continue;
      await this.writeOne(rel, f);
      this.drop(rel, f);
    }
    this.writing = undefined;
  }

  private async writeOne(rel: string, f: Held): Promise<void> {
    const tmp = join(this.staging, `.held-${++this.count}`);
    const st = await this.thread.write(f.id, { path: tmp, create: true, mode: f.mode, mtime: f.mtime });
    const key = keyOf(st);
    this.digests.set(key, { size: st.size, mtimeNs: st.mtimeNs, sha256: f.sha256 as string });
    const at = join(this.root, rel);
    const now = await lstat(at, { bigint: true }).catch(() => undefined);
    if (!now || keyOf(now) !== f.key) {
      // the placeholder went (a .dockerignore'd file): so does its content
      this.digests.delete(key);
      await rm(tmp, { force: true });
      return;
    }
    await rename(tmp, at);
    this.digests.delete(f.key);
  }
}
