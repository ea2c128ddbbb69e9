import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { errnoCode, systemError } from '../../../common/errors.js';
import { runTool } from '../../../common/host/run-tool.js';
import { unmountWithRetry } from '../../../common/host/unmount.js';

/**
 * Persistent network namespaces: a new namespace bind-mounted on a file (an nsfs mount, as
 * `ip netns add` makes them), so that it outlives every process in it and the engine. Unit tests
 * substitute a fake; the engine uses util-linux's unshare and umount.
 */
export interface NetnsOps {
  /** A new network namespace bound at `path` (the directory is created). */
  create(path: string): Promise<void>;
  /** Unbind and delete `path`; a path that is gone or not mounted is no error. */
  remove(path: string): Promise<void>;
  /** The file names in `dir` ([] when it does not exist). */
  list(dir: string): Promise<string[]>;
}

export class HostNetnsOps implements NetnsOps {
  private readonly made = new Set<string>();

  async create(path: string): Promise<void> {
    const dir = dirname(path);
    if (!this.made.has(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      this.made.add(dir);
    }
    await writeFile(path, '', { mode: 0o444 });
    // unshare(1) binds /proc/<child>/ns/net on the file from the parent, then the child exits.
    const r = await runTool('unshare', [`--net=${path}`, 'true']);
    if (r.code !== 0) {
      await rm(path, { force: true }).catch(() => undefined);
      throw systemError(`cannot create the network namespace ${path}: ${r.stderr}`);
    }
  }

  async remove(path: string): Promise<void> {
    await unmountWithRetry(path);
    await rm(path, { force: true });
  }

  async list(dir: string): Promise<string[]> {
    try {
      return await readdir(dir);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
  }
}
