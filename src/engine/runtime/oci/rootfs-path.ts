import { join, posix } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import { lstat, mkdir, readlink } from '../../../common/fs/quick.js';

/**
 * Resolve `path` inside `root` as if `root` were `/`: symlinks (absolute or relative) never lead
 * outside it, `..` stops at the root (what moby's symlink.FollowSymlinkInScope does). Components
 * that do not exist are kept as they are. Returns the host path.
 */
export async function resolveInRoot(root: string, path: string): Promise<string> {
  const pending = posix.normalize(`/${path}`).split('/').filter(Boolean);
  const done: string[] = [];
  let links = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const host = join(root, ...done, part);
    let isLink = false;
    try {
      isLink = (await lstat(host)).isSymbolicLink();
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT' && errnoCode(err) !== 'ENOTDIR') throw err;
    }
    if (!isLink) {
      done.push(part);
      continue;
    }
    if (++links > 255) throw new Error(`too many levels of symbolic links resolving ${path}`);
    const target = await readlink(host);
    if (target.startsWith('/')) done.length = 0;
    pending.unshift(...target.split('/').filter(Boolean));
  }
  return join(root, ...done);
}

/** mkdir -p of `path` inside `root` (symlinks resolved inside root); owned by root, mode 0755. */
export async function mkdirInRoot(root: string, path: string): Promise<string> {
  const host = await resolveInRoot(root, path);
  try {
    await mkdir(host, { recursive: true, mode: 0o755 });
  } catch (err) {
    if (errnoCode(err) === 'EEXIST' || errnoCode(err) === 'ENOTDIR') {
      throw new Error(`Cannot mkdir: ${path} is not a directory`);
    }
    throw err;
  }
  const st = await lstat(host);
  if (!st.isDirectory()) throw new Error(`Cannot mkdir: ${path} is not a directory`);
  return host;
}
