import { lstat, readlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { errnoCode, invalidParameter } from '../../../common/errors.js';

const MAX_LINKS = 255;

/**
 * A path below `root`, every symbolic link on it followed as if `root` were `/` (moby's
 * FollowSymlinkInScope): `..` and absolute links never climb above `root`. Returns the path
 * relative to `root` ('' for the root itself). Missing components are kept as written.
 */
export async function resolveInScope(root: string, path: string, followLast = true): Promise<string> {
  const queue = path.split('/');
  const done: string[] = [];
  let links = 0;
  while (queue.length) {
    const name = queue.shift() as string;
    if (name === '' || name === '.') continue;
    if (name === '..') {
      done.pop();
      continue;
    }
    const last = queue.every((q) => q === '' || q === '.');
    const rel = [...done, name].join('/');
    if (last && !followLast) {
      done.push(name);
      break;
    }
    let target: string | undefined;
    try {
      const st = await lstat(join(root, rel));
      if (st.isSymbolicLink()) target = await readlink(join(root, rel));
    } catch (err) {
      const code = errnoCode(err);
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
    }
    if (target === undefined) {
      done.push(name);
      continue;
    }
    if (++links > MAX_LINKS) throw invalidParameter(`too many links in ${JSON.stringify(path)}`);
    if (target.startsWith('/')) done.length = 0;
    queue.unshift(...target.split('/'));
  }
  return posix.join(...(done.length ? done : ['.'])).replace(/^\.$/, '');
}
