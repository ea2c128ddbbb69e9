import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** fsync a directory so a rename inside it survives a crash. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
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
): Promise<string> {
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(tmp, 'w', mode);
  try {
    await handle.writeFile(data);
    if (sync) await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await handle.close();
  return tmp;
}

/**
 * Write a file atomically: temp file in the same directory, fsync, rename, fsync the directory
 * (as far as `durability` asks). A reader sees the old content or the new, never a torn file.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
  durability: Durability = 'full',
): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = await writeTempFile(path, data, mode, durability !== 'none');
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  if (durability === 'full') await fsyncDir(dir);
}

export async function writeJsonAtomic(
  path: string,
  value: unknown,
  durability: Durability = 'full',
): Promise<void> {
  await writeFileAtomic(path, JSON.stringify(value), 0o644, durability);
}
