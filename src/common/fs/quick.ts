import {
  type BigIntStats,
  type Dirent,
  lstatSync,
  type MakeDirectoryOptions,
  type Mode,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  rmSync,
  type Stats,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { rm as rmAsync } from 'node:fs/promises';

/**
 * Small file-system operations done at once, with node:fs/promises' signatures.
 *
 * An operation of node:fs/promises goes through libuv's thread pool: the request is queued, a
 * worker wakes, does the system call and wakes the event loop back. On this kind of machine that
 * round trip costs 20–30 µs of CPU (two thread switches and their futexes) for a system call of
 * 1–2 µs. The run cycle of a container makes a few hundred such calls (records, bundle files,
 * cgroup and directory removals), so the engine's hot paths use these instead: each is the
 * synchronous call, as long as a metadata operation on a local file system or a read of a small
 * file takes. Not for anything that waits on the disk (fsync) or walks a tree (a recursive `rm`
 * stays asynchronous), nor for files of unbounded size.
 */
const settle = <T>(fn: () => T): Promise<T> => {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
};

export function mkdir(
  path: string,
  options?: Mode | (MakeDirectoryOptions & { recursive?: boolean }),
): Promise<string | undefined> {
  return settle(() => mkdirSync(path, options));
}

export function readFile(path: string): Promise<Buffer>;
export function readFile(path: string, encoding: BufferEncoding): Promise<string>;
export function readFile(path: string, encoding?: BufferEncoding): Promise<string | Buffer> {
  return settle(() => (encoding ? readFileSync(path, encoding) : readFileSync(path)));
}

export function writeFile(
  path: string,
  data: string | Uint8Array,
  options?: { mode?: Mode; flag?: string },
): Promise<void> {
  return settle(() => writeFileSync(path, data, options));
}

export function readdir(path: string): Promise<string[]>;
export function readdir(path: string, options: { withFileTypes: true }): Promise<Dirent[]>;
export function readdir(path: string, options?: { withFileTypes: true }): Promise<string[] | Dirent[]> {
  return settle(() => (options ? readdirSync(path, options) : readdirSync(path)));
}

export function stat(path: string): Promise<Stats>;
export function stat(path: string, options: { bigint: true }): Promise<BigIntStats>;
export function stat(path: string, options?: { bigint: true }): Promise<Stats | BigIntStats> {
  return settle(() => (options ? statSync(path, options) : statSync(path)));
}

export function lstat(path: string): Promise<Stats>;
export function lstat(path: string, options: { bigint: true }): Promise<BigIntStats>;
export function lstat(path: string, options?: { bigint: true }): Promise<Stats | BigIntStats> {
  return settle(() => (options ? lstatSync(path, options) : lstatSync(path)));
}

export function rename(from: string, to: string): Promise<void> {
  return settle(() => renameSync(from, to));
}

export function unlink(path: string): Promise<void> {
  return settle(() => unlinkSync(path));
}

export function rmdir(path: string): Promise<void> {
  return settle(() => rmdirSync(path));
}

export function symlink(target: string, path: string): Promise<void> {
  return settle(() => symlinkSync(target, path));
}

export function readlink(path: string): Promise<string> {
  return settle(() => readlinkSync(path, 'utf8'));
}

/**
 * `rm`: a file (or nothing, with `force`) at once, one unlink(2) (Node's rmSync stats the path
 * first, twice when it is missing); a directory without `recursive` is refused as rmSync refuses
 * it; a recursive removal in the thread pool.
 */
export function rm(path: string, options?: { force?: boolean; recursive?: boolean }): Promise<void> {
  if (options?.recursive) return rmAsync(path, options);
  try {
    unlinkSync(path);
    return Promise.resolve();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options?.force) return Promise.resolve();
    // a directory (EISDIR) or anything unusual: rmSync's own answer
    return settle(() => rmSync(path, options));
  }
}

/**
 * `rm -rf` of a tree known to be small (a few files: a runtime's state, a bundle, a container's
 * directory) at once: one readdir per directory (the entries' types from getdents), one unlink per
 * file and one rmdir per directory, nothing else. (Node's recursive rmSync stats every entry,
 * twice for files, and tries rmdir on each directory before reading it.)
 */
export function rmSmallTree(path: string): Promise<void> {
  return settle(() => removeTree(path));
}

function removeTree(path: string): void {
  let entries: Dirent[];
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    if (code !== 'ENOTDIR') throw err;
    unlinkMissingOk(path);
    return;
  }
  for (const e of entries) {
    const child = `${path}/${e.name}`;
    if (e.isDirectory()) removeTree(child);
    else unlinkMissingOk(child);
  }
  try {
    rmdirSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

function unlinkMissingOk(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
