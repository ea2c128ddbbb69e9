import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Snapshotter } from '../storage/snapshotter.types.js';

/**
 * Images' filesystems mounted read-only for a build (COPY --from, RUN --mount=type=bind,from=,
 * the passwd and group files --chown reads): one snapshot and mount per image, under the build's
 * work directory, all undone by release().
 */
export class ImageRoots {
  private readonly mounted = new Map<string, Promise<string>>();
  private readonly undo: Array<() => Promise<void>> = [];

  constructor(
    private readonly snapshotter: Pick<Snapshotter, 'prepare' | 'mount' | 'unmount' | 'remove'>,
    private readonly workDir: string,
  ) {}

  /** The directory of an image's filesystem (its top chain ID; null: an empty directory). */
  root(chainId: string | null): Promise<string> {
    const id = chainId ?? 'scratch';
    let p = this.mounted.get(id);
    if (!p) {
      p = this.mount(chainId);
      this.mounted.set(id, p);
    }
    return p;
  }

  private async mount(chainId: string | null): Promise<string> {
    const dir = join(this.workDir, `root-${randomBytes(6).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    this.undo.push(() => rm(dir, { recursive: true, force: true }));
    if (!chainId) return dir;
    const key = `build-${randomBytes(16).toString('hex')}`;
    await this.snapshotter.prepare(key, chainId);
    this.undo.push(() => this.snapshotter.remove(key));
    await this.snapshotter.mount(key, dir, { readonly: true });
    this.undo.push(() => this.snapshotter.unmount(dir));
    return dir;
  }

  async release(): Promise<void> {
    this.mounted.clear();
    while (this.undo.length) {
      const step = this.undo.pop() as () => Promise<void>;
      await step().catch(() => undefined);
    }
  }
}
