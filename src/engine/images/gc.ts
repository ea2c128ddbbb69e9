import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { ImageStore } from './image.store.js';

/** What garbage collection reads of the store. */
export type CollectedStore = Pick<
  ImageStore,
  'content' | 'overlay' | 'locked' | 'ids' | 'layersInUse' | 'pinnedLayers' | 'isPinned'
>;

/**
 * Layer garbage collection: layers that neither an image, a writable snapshot nor a pin uses
 * go (with their blobs when no kept layer shares them), deepest first.
 */
export class LayerCollector {
  constructor(
    private readonly store: CollectedStore,
    private readonly log: Logger,
  ) {}

  /** Collect under the lock; returns the removed layers' chain IDs. */
  collect(): Promise<string[]> {
    return this.store.locked(() => this.collectLocked());
  }

  /** collect() for a caller holding the lock (image delete). */
  async collectLocked(): Promise<string[]> {
    const { overlay, content } = this.store;
    const keep = new Set<string>(this.store.pinnedLayers());
    for (const c of this.store.layersInUse()) keep.add(c);
    for (const a of await overlay.listActive()) {
      if (a.parent === null) continue;
      try {
        for (const l of await overlay.chain(a.parent)) keep.add(l.chainId);
      } catch {
        keep.add(a.parent);
      }
    }
    const layers = await overlay.listLayers();
    const depth = new Map<string, number>();
    const byId = new Map(layers.map((l) => [l.chainId, l]));
    const depthOf = (c: string): number => {
      const known = depth.get(c);
      if (known !== undefined) return known;
      let d = 0;
      let cur = byId.get(c)?.parent ?? null;
      while (cur !== null && d < 1000) {
        d++;
        cur = byId.get(cur)?.parent ?? null;
      }
      depth.set(c, d);
      return d;
    };
    // A kept layer keeps its parents.
    for (const c of [...keep]) {
      let cur = byId.get(c)?.parent ?? null;
      while (cur !== null && !keep.has(cur)) {
        keep.add(cur);
        cur = byId.get(cur)?.parent ?? null;
      }
    }
    const doomed = layers
      .filter((l) => !keep.has(l.chainId))
      .sort((a, b) => depthOf(b.chainId) - depthOf(a.chainId));
    const removed: string[] = [];
    const blobsInUse = new Set(
      layers.filter((l) => keep.has(l.chainId) && l.blob).map((l) => l.blob?.digest),
    );
    for (const l of doomed) {
      try {
        if (!(await overlay.removeLayer(l.chainId, () => this.store.isPinned(l.chainId)))) continue;
        removed.push(l.chainId);
        if (l.blob && !blobsInUse.has(l.blob.digest)) await content.delete(l.blob.digest);
      } catch (err) {
        this.log.warn('cannot remove layer', { chainId: l.chainId, error: errorMessage(err) });
      }
    }
    return removed;
  }

  /** At start-up: blobs no image or layer refers to (configs of imports a crash interrupted). */
  async collectBlobs(): Promise<void> {
    const { overlay, content } = this.store;
    const keep = new Set<string>(this.store.ids());
    for (const l of await overlay.listLayers()) if (l.blob) keep.add(l.blob.digest);
    for (const d of await content.list()) if (!keep.has(d)) await content.delete(d);
  }
}
