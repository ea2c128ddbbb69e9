import { errorMessage } from '../../common/errors.js';
import { type Container, type Internals, rootfsPath } from './container.js';
import { isMounted, mountRootfs } from './run.js';

/**
 * The container's root filesystem on the host, for reading it (export, archive): a running
 * container's mounted rootfs as it is; a stopped one mounted under the container's lock (a start
 * waits) until `release`, then unmounted.
 */
export async function borrowRootfs(ix: Internals, c: Container): Promise<{ dir: string; release(): void }> {
  let release: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    release = resolve;
  });
  const dir = await new Promise<string>((resolve, reject) => {
    void c.lock
      .run(async () => {
        const target = await rootfsPath(ix, c.id);
        if (c.isRunningProcess && (await isMounted(target))) {
          resolve(target);
          release();
          return;
        }
        await mountRootfs(ix, c);
        resolve(target);
        await finished;
        await ix.images.snapshotter
          .unmount(target)
          .catch((err) =>
            ix.log.warn('unmount after reading the rootfs failed', { id: c.id, error: errorMessage(err) }),
          );
        c.rootfsMounted = false;
      })
      .catch(reject);
  });
  return { dir, release };
}
