import { constants, createReadStream, statSync } from 'node:fs';
import {
  type FileHandle,
  lstat,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { errnoCode } from '../../common/errors.js';
import { fsyncDir, writeFileAtomic } from '../../common/fs/atomic.js';
import {
  checkStoragePath,
  type FileInfo,
  type FileWriter,
  PathNotFoundError,
  type StorageDriver,
} from './driver.js';
import { ROOT } from './paths.js';

const WRITE_BATCH = 1024 * 1024;

/** Temporary files of atomic writes (`<name>.<12 hex>.tmp`), hidden from list and walk. */
const TEMP_NAME = /\.[0-9a-f]{12}\.tmp$/;

export function isTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/**
 * The deepest directory of a storage path (its parts below ROOT) a sweep keeps even when empty:
 * the `blobs/<alg>/<xx>` fan-out, a repository's `_uploads`, `_manifests/tags`, and the
 * algorithm directories of `_layers`, `_manifests/revisions` and `_manifests/referrers`. A
 * repository name ends at its first part starting with `_` (name components never do).
 * Elsewhere everything is kept.
 */
function keepDepth(parts: string[]): number {
  if (parts[0] === 'blobs') return 2;
  if (parts[0] !== 'repositories') return parts.length;
  const i = parts.findIndex((p, n) => n > 0 && p.startsWith('_'));
  if (i < 0) return parts.length;
  if (parts[i] === '_uploads') return i;
  if (parts[i] === '_layers') return i + 1;
  if (parts[i] !== '_manifests') return parts.length;
  if (parts[i + 1] === 'tags') return i + 1;
  if (parts[i + 1] === 'revisions' || parts[i + 1] === 'referrers') return i + 2;
  return parts.length;
}

/**
 * The filesystem driver: storage paths below a root directory, exactly as distribution's
 * filesystem driver lays them out, so either registry can serve the other's directory.
 */
export class FilesystemDriver implements StorageDriver {
  readonly name = 'filesystem';

  constructor(readonly root: string) {}

  /** The local file of a storage path. */
  fullPath(path: string): string {
    checkStoragePath(path);
    return join(this.root, path);
  }

  async getContent(path: string): Promise<Buffer> {
    try {
      return await readFile(this.fullPath(path));
    } catch (err) {
      throw mapError(err, path);
    }
  }

  async putContent(path: string, content: string | Uint8Array): Promise<void> {
    await writeFileAtomic(this.fullPath(path), content);
  }

  async reader(path: string, offset = 0, end?: number): Promise<Readable> {
    const full = this.fullPath(path);
    let handle: FileHandle;
    try {
      handle = await open(full, 'r');
    } catch (err) {
      throw mapError(err, path);
    }
    return createReadStream(full, { fd: handle, start: offset, end, highWaterMark: 1024 * 1024 });
  }

  async writer(path: string, append: boolean): Promise<FileWriter> {
    const full = this.fullPath(path);
    await mkdir(dirname(full), { recursive: true });
    const handle = await open(
      full,
      append ? constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND : 'w',
    );
    const size = append ? (await handle.stat()).size : 0;
    return new FsWriter(handle, full, size);
  }

  /**
   * On the event loop (statSync): a stat of a local file is a few microseconds, while a hop through
   * the threadpool costs two thread wake-ups; every manifest GET and blob HEAD makes two stats (the
   * link and the data), and doing them here gave 20-130 % more manifest GETs per second on the
   * 2-CPU test machine (bench/README.md). The blob sender reads a blob's first chunk likewise.
   */
  async stat(path: string): Promise<FileInfo> {
    try {
      const st = statSync(this.fullPath(path));
      return {
        path,
        size: st.size,
        modTime: st.mtime,
        isDir: st.isDirectory(),
        version: `${st.dev}:${st.ino}:${st.mtimeMs}:${st.size}`,
      };
    } catch (err) {
      throw mapError(err, path);
    }
  }

  async list(path: string): Promise<string[]> {
    try {
      const names = await readdir(this.fullPath(path));
      const base = path === '/' ? '' : path;
      return names.filter((n) => !isTempName(n)).map((n) => `${base}/${n}`);
    } catch (err) {
      throw mapError(err, path);
    }
  }

  async move(source: string, dest: string): Promise<void> {
    const from = this.fullPath(source);
    const to = this.fullPath(dest);
    await mkdir(dirname(to), { recursive: true });
    try {
      await rename(from, to);
    } catch (err) {
      throw mapError(err, source);
    }
    await fsyncDir(dirname(to));
  }

  async delete(path: string): Promise<void> {
    const full = this.fullPath(path);
    try {
      await stat(full);
    } catch (err) {
      throw mapError(err, path);
    }
    await rm(full, { recursive: true, force: true });
  }

  // biome-ignore lint/suspicious/noConfusingVoidType: callbacks that return nothing are the common case.
  async walk(path: string, fn: (info: FileInfo) => Promise<void | 'skip'> | void | 'skip'): Promise<void> {
    const full = this.fullPath(path);
    let entries: import('node:fs').Dirent[];
    try {
      entries = await readdir(full, { withFileTypes: true });
    } catch (err) {
      throw mapError(err, path);
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const base = path === '/' ? '' : path;
    for (const entry of entries) {
      if (isTempName(entry.name)) continue;
      const child = `${base}/${entry.name}`;
      const isDir = entry.isDirectory();
      let info: FileInfo = { path: child, size: 0, modTime: new Date(0), isDir };
      if (!isDir) {
        try {
          const st = await stat(join(full, entry.name));
          info = { path: child, size: st.size, modTime: st.mtime, isDir: false };
        } catch {
          continue;
        }
      }
      const result = await fn(info);
      if (isDir && result !== 'skip') {
        try {
          await this.walk(child, fn);
        } catch (err) {
          if (!(err instanceof PathNotFoundError)) throw err;
        }
      }
    }
  }

  async sweepTemporary(before: number, dryRun = false, signal?: AbortSignal): Promise<string[]> {
    const swept: string[] = [];
    const pending = [ROOT];
    while (pending.length > 0 && !signal?.aborted) {
      const dir = pending.pop() as string;
      let entries: import('node:fs').Dirent[];
      try {
        entries = await readdir(this.fullPath(dir), { withFileTypes: true });
      } catch (err) {
        if (mapError(err, dir) instanceof PathNotFoundError) continue;
        throw err;
      }
      for (const entry of entries) {
        const path = `${dir}/${entry.name}`;
        if (entry.isDirectory()) {
          pending.push(path);
          continue;
        }
        if (!entry.isFile() || !isTempName(entry.name)) continue;
        const st = await lstat(this.fullPath(path)).catch(() => undefined);
        if (!st || st.mtimeMs >= before) continue;
        swept.push(path);
        if (dryRun) continue;
        await rm(this.fullPath(path), { force: true });
        await this.removeEmptyDirs(dir);
      }
    }
    return swept.sort();
  }

  /** Remove `dir` and its parents while they are empty, down to their collection. */
  private async removeEmptyDirs(dir: string): Promise<void> {
    if (!dir.startsWith(`${ROOT}/`)) return;
    const parts = dir.slice(ROOT.length + 1).split('/');
    const keep = keepDepth(parts);
    for (let depth = parts.length - 1; depth > keep; depth--) {
      try {
        await rmdir(join(this.root, ROOT, ...parts.slice(0, depth + 1)));
      } catch {
        return; // not empty (or gone): stop here
      }
    }
  }
}

class FsWriter implements FileWriter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private closed = false;
  /** The batch being written while the next one accumulates (at most one in flight). */
  private inflight: Promise<void> | undefined;

  constructor(
    private readonly handle: FileHandle,
    private readonly full: string,
    public size: number,
  ) {}

  async write(chunk: Uint8Array): Promise<void> {
    if (this.closed) throw new Error('writer is closed');
    this.pending.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.pendingBytes += chunk.byteLength;
    this.size += chunk.byteLength;
    if (this.pendingBytes >= WRITE_BATCH) {
      // Overlap: the previous batch goes to disk while this one was received and hashed.
      await this.settle();
      const batch = this.take();
      const p = this.writeAll(batch);
      p.catch(() => {});
      this.inflight = p;
    }
  }

  private take(): Buffer[] {
    const batch = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    return batch;
  }

  private async settle(): Promise<void> {
    const p = this.inflight;
    this.inflight = undefined;
    if (p) await p;
  }

  private async writeAll(buffers: Buffer[]): Promise<void> {
    let remaining = buffers;
    while (remaining.length > 0) {
      const { bytesWritten } = await this.handle.writev(remaining);
      remaining = skipBytes(remaining, bytesWritten);
    }
  }

  private async flush(): Promise<void> {
    await this.settle();
    if (this.pending.length > 0) await this.writeAll(this.take());
  }

  async commit(): Promise<void> {
    await this.flush();
    await this.handle.sync();
    await this.doClose();
  }

  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      await this.doClose();
    }
  }

  async cancel(): Promise<void> {
    this.pending = [];
    await this.settle().catch(() => {});
    await this.doClose();
    await rm(this.full, { force: true });
  }

  private async doClose(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }
}

function skipBytes(buffers: Buffer[], n: number): Buffer[] {
  let left = n;
  const out: Buffer[] = [];
  for (const b of buffers) {
    if (left >= b.length) {
      left -= b.length;
      continue;
    }
    out.push(left > 0 ? b.subarray(left) : b);
    left = 0;
  }
  return out;
}

function mapError(err: unknown, path: string): unknown {
  const code = errnoCode(err);
  if (code === 'ENOENT' || code === 'ENOTDIR') return new PathNotFoundError(path);
  return err;
}
