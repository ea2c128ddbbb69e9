import {
  type BigIntStats,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  ftruncateSync,
  futimesSync,
  openSync,
  writeSync,
} from 'node:fs';
import { type FileHandle, lstat, open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { KnownDigest } from '../build.types.js';

/** Files from this size up may have their content held rather than written as they arrive. */
export const DEFER_FROM = 1024 * 1024;
/** The most content held for all the builds of the engine at once (beyond it, files are written). */
const BUDGET = 64 * 1024 * 1024;
let held = 0;

/** The batches a content is written in (below the system's IOV_MAX). */
const IOV_BATCH = 512;

/** A file whose content is held: its place in the context is a sparse file of its size. */
interface Held {
  /** The placeholder's inode (`<dev>:<ino>`), as the digests know it. */
  key: string;
  chunks: Buffer[];
  size: number;
  mode: number;
  mtime: Date;
  sha256: string;
}

const keyOf = (st: BigIntStats): string => `${st.dev}:${st.ino}`;

/**
 * The contents a context's extraction held in memory instead of writing them: a build whose
 * steps all come from the cache never needs them on disk (its COPY checksums are the digests
 * taken as the bytes arrived), so the bytes are written only when something reads the context's
 * files (a COPY or ADD that runs, a RUN bind mount of the context, a Dockerfile that is one of
 * them). Until then each such file is a sparse file of its size, mode and time, whose digest is
 * known by its inode. Writing one out makes a new file beside the root and renames it over the
 * placeholder (its digest known by the new inode first), so a checksum taken meanwhile sees one
 * complete file or the other, never a half-written one.
 *
 * The chunks held are those the source gave (the request's own buffers: a context's sources
 * never reuse them). What all builds hold together is bounded; past the bound files are written
 * as they arrive, so a context larger than memory still streams.
 */
export class DeferredContents {
  private readonly files = new Map<string, Held>();
  private bytes = 0;
  private writing: Promise<void> | undefined;
  private count = 0;

  /**
   * `root`: the context's files; `staging`: a directory of the engine's on the same file system,
   * outside the root; `digests`: the context's digests by inode (kept up to date here).
   */
  constructor(
    private readonly root: string,
    private readonly staging: string,
    private readonly digests: Map<string, KnownDigest>,
  ) {}

  /** Whether a file of `size` bytes is held rather than written (it takes its share of the budget). */
  take(size: number): boolean {
    if (size < DEFER_FROM || held + size > BUDGET) return false;
    held += size;
    this.bytes += size;
    return true;
  }

  /** Gives back a share taken for a file that is not held after all. */
  giveBack(size: number): void {
    held -= size;
    this.bytes -= size;
  }

  /**
   * The file at `rel` (open as `fd`, empty) is held: it becomes a sparse file of the content's
   * size with its mode and time, whose digest is `sha256`. Closes nothing.
   */
  hold(rel: string, fd: number, c: Omit<Held, 'key'>): KnownDigest {
    ftruncateSync(fd, c.size);
    fchmodSync(fd, c.mode);
    futimesSync(fd, c.mtime, c.mtime);
    const st = fstatSync(fd, { bigint: true });
    const key = keyOf(st);
    const known = { size: Number(st.size), mtimeNs: st.mtimeNs, sha256: c.sha256 };
    this.digests.set(key, known);
    this.files.set(rel, { ...c, key });
    return known;
  }

  /** A member replaced `rel` (and what was below it): their contents are no longer wanted. */
  forget(rel: string): void {
    for (const [name, f] of this.files) {
      if (name === rel || name.startsWith(`${rel}/`)) this.drop(name, f);
    }
  }

  /**
   * A hard link to `rel` is about to be made: the content goes into the placeholder itself now
   * (both names then share it), its time put back.
   */
  writeInPlace(rel: string): void {
    const f = this.files.get(rel);
    if (!f) return;
    const at = join(this.root, rel);
    const fs = openSync(at, constants.O_WRONLY | constants.O_NOFOLLOW);
    try {
      let pos = 0;
      for (const c of f.chunks) {
        for (let done = 0; done < c.length; ) done += writeSync(fs, c, done, c.length - done, pos + done);
        pos += c.length;
      }
      futimesSync(fs, f.mtime, f.mtime);
      const st = fstatSync(fs, { bigint: true });
      this.digests.delete(f.key);
      this.digests.set(keyOf(st), { size: Number(st.size), mtimeNs: st.mtimeNs, sha256: f.sha256 });
    } finally {
      closeSync(fs);
    }
    this.drop(rel, f);
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
    for (const [name, f] of this.files) this.drop(name, f);
  }

  private drop(rel: string, f: Held): void {
    // dropped already (a release while it was being written out)
    if (this.files.get(rel) !== f) return;
    this.files.delete(rel);
    f.chunks = [];
    held -= f.size;
    this.bytes -= f.size;
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
    const fh = await open(
      tmp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    let key: string;
    try {
      await writeChunks(fh, f.chunks);
      await fh.chmod(f.mode);
      await fh.utimes(f.mtime, f.mtime);
      const st = await fh.stat({ bigint: true });
      key = keyOf(st);
      this.digests.set(key, { size: Number(st.size), mtimeNs: st.mtimeNs, sha256: f.sha256 });
    } finally {
      await fh.close();
    }
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

/** All of `chunks` written from the start of the file, a batch of buffers per call. */
async function writeChunks(fh: FileHandle, chunks: Buffer[]): Promise<void> {
  for (let i = 0; i < chunks.length; i += IOV_BATCH) {
    let batch = chunks.slice(i, i + IOV_BATCH);
    let left = batch.reduce((n, c) => n + c.length, 0);
    while (left > 0) {
      const { bytesWritten } = await fh.writev(batch);
      left -= bytesWritten;
      if (left === 0) break;
      // a short write: go on from where it stopped
      let skip = bytesWritten;
      const rest: Buffer[] = [];
      for (const c of batch) {
        if (skip >= c.length) {
          skip -= c.length;
          continue;
        }
        rest.push(skip ? c.subarray(skip) : c);
        skip = 0;
      }
      batch = rest;
    }
  }
}
