import { readdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { errorMessage } from '../../common/errors.js';
import { tarDirectory } from '../storage/adapters/host.ops.js';
import { type Container, emit, type Internals, rootfsPath } from './container.js';
import { isMounted, mountRootfs } from './run.js';

/**
 * docker export: the container's filesystem (image and writable layer, no volumes or binds) as an
 * uncompressed tar, member names without `./` as dockerd's. A running container's mounted rootfs
 * is read as it is; a stopped one is mounted for the export, under its lock (a start waits), and
 * unmounted after. Emits `export`.
 */
export async function exportContainer(
  ix: Internals,
  c: Container,
): Promise<{ stream: Readable; done: Promise<void>; cancel(): void }> {
  let release: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    release = resolve;
  });
  const target = await new Promise<{ dir: string; ownMount: boolean }>((resolve, reject) => {
    void c.lock
      .run(async () => {
        const dir = await rootfsPath(ix, c.id);
        if (c.isRunningProcess && (await isMounted(dir))) {
          resolve({ dir, ownMount: false });
          return;
        }
        await mountRootfs(ix, c);
        resolve({ dir, ownMount: true });
        await finished;
        // a start may have wanted it meanwhile: it waited for this lock, so the mount is ours
        await ix.images.snapshotter
          .unmount(dir)
          .catch((err) => ix.log.warn('export: unmount failed', { id: c.id, error: errorMessage(err) }));
        c.rootfsMounted = false;
      })
      .catch(reject);
  });
  if (!target.ownMount) release();
  let tar: ReturnType<typeof tarDirectory>;
  try {
    const members = (await readdir(target.dir)).sort();
    tar = tarDirectory(target.dir, members.length ? members : ['.']);
  } catch (err) {
    release();
    throw err;
  }
  tar.done.then(release, release);
  tar.stdout.on('close', release);
  emit(ix, c, 'export');
  return { stream: tar.stdout, done: tar.done, cancel: () => tar.kill() };
}
