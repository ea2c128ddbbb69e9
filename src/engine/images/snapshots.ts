import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { OverlaySnapshotter } from '../storage/overlay.snapshotter.js';
import type { Snapshotter, SnapshotterExtras } from '../storage/snapshotter.types.js';

/**
 * The containers' writable snapshots (ImageService.snapshotter): the overlay snapshotter's, but
 * removing one collects the layers it held when no image uses them any more (the layers of an
 * image deleted while a container used it).
 */
export function containerSnapshotter(deps: {
  overlay: OverlaySnapshotter;
  usesLayer(chainId: string): boolean;
  collectGarbage(): Promise<unknown>;
  log: Logger;
}): Snapshotter & SnapshotterExtras {
  const { overlay } = deps;
  return {
    prepare: (key, parent, o) => overlay.prepare(key, parent, o),
    mount: (key, target, o) => overlay.mount(key, target, o),
    unmount: (target) => overlay.unmount(target),
    remove: async (key) => {
      const parent = (await overlay.listActive()).find((a) => a.key === key)?.parent ?? null;
      await overlay.remove(key);
      // Layers an image still uses stay anyway; collect only when the container held the last use.
      if (parent === null || deps.usesLayer(parent)) return;
      await deps
        .collectGarbage()
        .catch((err) => deps.log.warn('layer garbage collection failed', { error: errorMessage(err) }));
    },
    usage: (key) => overlay.usage(key),
    paths: (key) => overlay.paths(key),
    exists: (key) => overlay.exists(key),
    listActive: () => overlay.listActive(),
    diff: (key) => overlay.diff(key),
  };
}
