import { randomBytes } from 'node:crypto';
import { closeSync, constants, fsync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';

/**
 * The one part of a write that waits on the disk goes to the thread pool; opening, writing into
 * the page cache, closing and renaming are done at once (see quick.ts: a thread-pool round trip
 * costs more CPU than such a system call).
 */
const fsyncFd = promisify(fsync);

/** fsync a directory so a rename inside it survives a crash. */
export async function fsyncDir(dir: string): Promise<void> {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/** Temp names: unique per process (a random prefix) and per write (a counter), without a random draw each. */
const tempPrefix = randomBytes(4).toString('hex');
let tempSeq = 0;

function writeAll(fd: number, data: string | Uint8Array): void {
  const buf = typeof data === 'string' ? Buffer.from(data) : data;
  for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
}

/**
 * How far an atomic write goes towards the disk. Every level is atomic (a reader, also after a
 * kill -9, sees the old content or the new: the page cache outlives the process):
 * - `full`: the file and the directory fsynced; the new content survives a power loss.
 * - `file`: the file fsynced, not the directory (one fsync, as dockerd's AtomicWriteFile): after a
 *   power loss the old content or the new, never a torn or empty file (the rename reaches the disk
 *   with the journal's next commit, after the data). For state that is written at every change.
 * - `none`: no fsync. For files made again before they are used after a reboot (a container's
 *   hosts and resolv.conf, written at every start).
 */
export type Durability = 'full' | 'file' | 'none';

/** `data` in a new temp file beside `path` (fsynced unless `sync` is false): the first half of an atomic write. */
export async function writeTempFile(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
  sync = true,
  dirMode?: number,
): Promise<string> {
  const tmp = `${path}.${tempPrefix}${(++tempSeq).toString(36)}.tmp`;
  let fd: number;
  try {
    fd = openSync(tmp, 'w', mode);
  } catch (err) {
    // the directory is made on the first write into it (not checked before every write)
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    mkdirSync(dirname(path), { recursive: true, ...(dirMode === undefined ? {} : { mode: dirMode }) });
    fd = openSync(tmp, 'w', mode);
  }
  try {
    writeAll(fd, data);
    if (sync) await fsyncFd(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  return tmp;
}

/**
 * Write a file atomically: temp file in the same directory, fsync, rename, fsync the directory
 * (as far as `durability` asks). A reader sees the old content or the new, never a torn file. The
 * directory (`dirMode`, default 0777 less the umask) is made when missing.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
  durability: Durability = 'full',
  dirMode?: number,
): Promise<void> {
  const tmp = await writeTempFile(path, data, mode, durability !== 'none', dirMode);
  try {
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  if (durability === 'full') await fsyncDir(dirname(path));
}

export async function writeJsonAtomic(
  path: string,
  value: unknown,
  durability: Durability = 'full',
): Promise<void> {
  await writeFileAtomic(path, JSON.stringify(value), 0o644, durability);
}
