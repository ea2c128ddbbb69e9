import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { errnoCode, errorMessage, systemError } from '../../../common/errors.js';
import { runTool } from '../../../common/host/run-tool.js';
import { type SysHelper, sysHelper } from '../../../common/host/sys-helper.js';
import { unmountWithRetry } from '../../../common/host/unmount.js';

/**
 * Persistent network namespaces: a new namespace bind-mounted on a file (an nsfs mount, as
 * `ip netns add` makes them), so that it outlives every process in it and the engine. Unit tests
 * substitute a fake; the engine makes them through berth-sys (unshare, bind mount, setns back: no
 * process), or with util-linux's unshare and umount when it was not built.
 */
export interface NetnsOps {
  /** A new network namespace bound at `path`, its `lo` up (the directory is created). */
  create(path: string): Promise<void>;
  /** Unbind and delete `path`; a path that is gone or not mounted is no error. */
  remove(path: string): Promise<void>;
  /** The file names in `dir` ([] when it does not exist). */
  list(dir: string): Promise<string[]>;
  /** Whether some process lives in the namespace bound at `path` (a container the engine lost). */
  inUse(path: string): Promise<boolean>;
}

export class HostNetnsOps implements NetnsOps {
  private readonly made = new Set<string>();

  /** `sys`: the helper (default: the process's; null: unshare(1) and umount(8)). */
  constructor(private readonly sys: SysHelper | null = sysHelper()) {}

  async create(path: string): Promise<void> {
    const dir = dirname(path);
    if (!this.made.has(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      this.made.add(dir);
    }
    await writeFile(path, '', { mode: 0o444 });
    if (this.sys) {
      try {
        await this.sys.netns(path);
      } catch (err) {
        await rm(path, { force: true }).catch(() => undefined);
        throw systemError(`cannot create the network namespace ${path}: ${errorMessage(err)}`);
      }
      return;
    }
    // unshare(1) binds /proc/<child>/ns/net on the file from the parent; the child brings `lo` up
    // (what CNI's loopback plugin does, without a Go program of its own per start) and exits
    const r = await runTool('unshare', [`--net=${path}`, 'ip', 'link', 'set', 'lo', 'up']);
    if (r.code !== 0) {
      await rm(path, { force: true }).catch(() => undefined);
      throw systemError(`cannot create the network namespace ${path}: ${r.stderr}`);
    }
  }

  async remove(path: string): Promise<void> {
    await unmountWithRetry(path, this.sys);
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

  async inUse(path: string): Promise<boolean> {
    let ns: { dev: number; ino: number };
    try {
      ns = await stat(path);
    } catch {
      return false;
    }
    // the bound file is the namespace's nsfs inode: any /proc/<pid>/ns/net that is the same one
    for (const pid of await readdir('/proc').catch(() => [])) {
      if (!/^\d+$/.test(pid)) continue;
      const p = await stat(`/proc/${pid}/ns/net`).catch(() => undefined);
      if (p && p.ino === ns.ino && p.dev === ns.dev) return true;
    }
    return false;
  }
}
