import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { type FileHandle, open, stat, unlink } from 'node:fs/promises';

/**
 * An exclusive lock on a file that lasts as long as this process keeps it, and that the kernel
 * drops when the process ends, however it ends (SIGKILL included; a zombie holds no files): an
 * flock(2) on the file's open file description. Node has no flock, so util-linux's flock(1)
 * takes it on this process's own descriptor (passed to it as its fd 3) and exits at once: the
 * lock belongs to the open file description, which only this process holds from then on (Node
 * opens files close-on-exec, so no child started later inherits it). Nothing depends on pids, so
 * a dead holder or a pid reused by another process blocks nothing.
 */
export interface FileLock {
  readonly path: string;
  /** Replace the file's content (the holder's pid, say). */
  write(text: string): Promise<void>;
  /** Remove the file, then release the lock. */
  release(): Promise<void>;
}

/** flock(1)'s exit status when another holds the lock (its `--conflict-exit-code`). */
const CONFLICT = 100;
/** Strong references: a FileHandle that is garbage-collected is closed, and the lock with it. */
const held = new Set<FileHandle>();

/** flock(1) on the handle's descriptor: true when locked, false when another holds it. */
function flock(handle: FileHandle, path: string, command: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      command,
      ['--exclusive', '--nonblock', '--conflict-exit-code', String(CONFLICT), '3'],
      {
        stdio: ['ignore', 'ignore', 'pipe', handle.fd],
      },
    );
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString('utf8');
    });
    child.on('error', (err) =>
      reject(new Error(`cannot lock ${path}: flock(1) (util-linux) cannot run: ${err.message}`)),
    );
    child.on('close', (code) => {
      if (code === 0) resolve(true);
      else if (code === CONFLICT) resolve(false);
      else reject(new Error(`cannot lock ${path}: flock(1) exited with ${code}: ${stderr.trim()}`));
    });
  });
}

/**
 * Lock `path` (created when missing) for this process; undefined when another process holds it.
 * `flockCommand` is the flock(1) to run (tests).
 */
export async function tryLockFile(path: string, flockCommand = 'flock'): Promise<FileLock | undefined> {
  // a holder releasing removes the file before it lets go: a lock taken on the file it removed is
  // taken again on the file the path names now (a few times at most)
  for (let attempt = 0; attempt < 5; attempt++) {
    const handle = await open(path, constants.O_RDWR | constants.O_CREAT, 0o644);
    let keep = false;
    try {
      if (!(await flock(handle, path, flockCommand))) return undefined;
      const [mine, named] = await Promise.all([handle.stat(), stat(path).catch(() => undefined)]);
      if (!named || named.ino !== mine.ino || named.dev !== mine.dev) continue;
      keep = true;
      held.add(handle);
      return {
        path,
        async write(text) {
          await handle.truncate(0);
          await handle.write(text, 0);
        },
        async release() {
          if (!held.delete(handle)) return;
          await unlink(path).catch(() => undefined);
          await handle.close();
        },
      };
    } finally {
      if (!keep) await handle.close();
    }
  }
  throw new Error(`cannot lock ${path}: the file keeps being replaced`);
}
