import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode } from '../errors.js';

/**
 * Bytes of regular files and symlinks below `dir`, each inode counted once (du --apparent-size,
 * moby's directory.Size). A tree that is not there is 0 bytes; entries vanishing during the walk
 * are skipped.
 */
export async function diskUsage(dir: string): Promise<number> {
  const seen = new Set<number>();
  let total = 0;
  const stack = [dir];
  while (stack.length) {
    const cur = stack.pop() as string;
    let names: string[];
    try {
      names = await readdir(cur);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') continue;
      throw err;
    }
    for (const name of names) {
      const p = join(cur, name);
      const st = await lstat(p).catch(() => undefined);
      if (!st) continue;
      if (st.isDirectory()) stack.push(p);
      else if (!seen.has(st.ino)) {
        seen.add(st.ino);
        if (st.isFile() || st.isSymbolicLink()) total += st.size;
      }
    }
  }
  return total;
}
