import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { errnoCode, unavailable } from '../../common/errors.js';

/** Is a process with this pid alive (a zombie counts as gone)? */
async function alive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return errnoCode(err) === 'EPERM';
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/**
 * Run `fn` holding a lock shared by every engine on the host (a file created exclusively, holding
 * the owner's pid; a dead owner's lock is taken over). Engines hold it while they pick an address
 * block and give it to their bridge, so that two engines starting together never pick the same.
 */
export async function withHostLock<T>(path: string, fn: () => Promise<T>, timeoutMs = 30_000): Promise<T> {
  await mkdir(dirname(path), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await writeFile(path, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
    const owner = Number((await readFile(path, 'utf8').catch(() => '')).trim());
    if (owner > 0 && owner !== process.pid && !(await alive(owner))) {
      // take over a dead owner's lock, unless another engine just did
      const again = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      if (again === owner) await rm(path, { force: true });
      continue;
    }
    if (Date.now() > deadline)
      throw unavailable(`timed out waiting for the host network lock ${path} (pid ${owner})`);
    await sleep(20);
  }
  try {
    return await fn();
  } finally {
    await rm(path, { force: true });
  }
}
