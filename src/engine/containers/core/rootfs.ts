import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { errorMessage, isKind } from '../../../common/errors.js';
import { readdir, rmdir, unlink } from '../../../common/fs/quick.js';
import type { Logger } from '../../../common/log.js';
import type { Container } from './container.js';
import type { ContainerSnapshots } from './ports.js';

/**
 * Is a file system mounted at `target`? The targets asked about are overlay mounts (a container's
 * rootfs, an image mount), whose root directory has the overlay's own device number: a mount is
 * there when `target`'s device differs from its parent's (two stats, where reading
 * /proc/self/mountinfo costs a parse of every mount on the host). A missing `target` is not one.
 */
export async function isMounted(target: string): Promise<boolean> {
  const st = statSync(target, { throwIfNoEntry: false });
  const parent = st && statSync(dirname(target), { throwIfNoEntry: false });
  return st !== undefined && parent !== undefined && st.dev !== parent.dev;
}

/**
 * A container's root filesystem: its writable snapshot mounted at the snapshot's merged directory
 * (so that inspect's GraphDriver.Data.MergedDir is the real mount), and the per-container
 * directories under the exec root (the runtime bundle).
 */
export class Rootfs {
  constructor(
    private readonly snapshots: ContainerSnapshots,
    private readonly execRoot: string,
    private readonly log: Logger,
  ) {}

  /** Where the container's rootfs is mounted. */
  async path(id: string): Promise<string> {
    return (await this.snapshots.paths(id)).MergedDir;
  }

  bundlePath(id: string): string {
    return join(this.execRoot, 'containers', id, 'bundle');
  }

  async mount(c: Container): Promise<string> {
    const target = await this.path(c.id);
    // the snapshot's mount makes the directory (a missing one is not mounted)
    if (!(await isMounted(target))) await this.snapshots.mount(c.id, target);
    c.rootfsMounted = true;
    return target;
  }

  async unmount(c: Container): Promise<void> {
    // no snapshot (a removal cut short after it went, a create before it was made): nothing mounted
    const target = await this.path(c.id).catch((err) => {
      if (isKind(err, 'NotFound')) return undefined;
      throw err;
    });
    if (target && (await isMounted(target))) await this.snapshots.unmount(target);
    c.rootfsMounted = false;
  }

  /**
   * The root filesystem on the host, for reading or writing files in it (export, archive): a
   * running container's mounted rootfs as it is; a stopped one mounted under the container's lock
   * (a start waits) until `release`, then unmounted.
   */
  async borrow(c: Container): Promise<{ dir: string; release(): void }> {
    let release: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => {
      release = resolve;
    });
    const dir = await new Promise<string>((resolve, reject) => {
      void c.lock
        .run(async () => {
          const target = await this.path(c.id);
          if (c.isRunningProcess && (await isMounted(target))) {
            resolve(target);
            release();
            return;
          }
          // the last run's unmount done first
          if (c.cleanup) await c.cleanup;
          await this.mount(c);
          resolve(target);
          await finished;
          await this.snapshots.unmount(target).catch((err) =>
            this.log.warn('unmount after reading the rootfs failed', {
              id: c.id,
              error: errorMessage(err),
            }),
          );
          c.rootfsMounted = false;
        })
        .catch(reject);
    });
    return { dir, release };
  }

  /**
   * Remove a removed container's directory under the exec root. Non-recursive on purpose: the
   * files directly in it and its `rootfs` and `bundle` go (what the runtime left in the bundle
   * when a crash cut a start short: its config.json), but no directory below them, so nothing
   * still mounted there can be reached.
   */
  async removeExecDir(id: string): Promise<void> {
    const dir = join(this.execRoot, 'containers', id);
    if (!existsSync(dir)) return;
    // one readdir: the subdirectories there (most often none: the driver removed its bundle)
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => null);
    if (!entries) return;
    for (const e of entries) {
      if (!e.isDirectory() || (e.name !== 'rootfs' && e.name !== 'bundle')) continue;
      await removeFilesIn(join(dir, e.name));
      await rmdir(join(dir, e.name)).catch(() => undefined);
    }
    await rmdir(dir).catch(() => undefined);
  }
}

/** The entries of `dir` that are not directories (a missing `dir` has none). */
async function removeFilesIn(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isDirectory()) await unlink(join(dir, e.name)).catch(() => undefined);
  }
}
