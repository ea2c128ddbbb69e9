import { BerthError } from '../../common/errors.js';
import { referenceString } from '../../common/reference.js';
import type { ImageDeleter } from './delete.js';
import { checkFilterKeys, danglingFilter, labelMatches, parseTimestamp } from './filters.js';
import type { ImageEvents } from './image.events.js';
import { hex, type ImageStore } from './image.store.js';
import type { ImageDeleteItem } from './images.types.js';
import { hasDigest, type ReferenceStore } from './references.js';

const PRUNE_FILTERS = ['dangling', 'label', 'label!', 'until'];

/**
 * POST /images/prune as moby's ImagesPrune: dangling images by default, all unused ones with
 * dangling=false; label, label!, until; each candidate removed as docker rmi would (without
 * force), so images containers use stay.
 */
export class ImagePruner {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'overlay' | 'all' | 'parentIds'>;
      refs: Pick<ReferenceStore, 'refsOf'>;
      deleter: Pick<ImageDeleter, 'remove'>;
      events: ImageEvents;
    },
  ) {}

  async prune(
    filters: Map<string, string[]> = new Map(),
  ): Promise<{ ImagesDeleted: ImageDeleteItem[] | null; SpaceReclaimed: number }> {
    const { store, refs: references, deleter } = this.deps;
    checkFilterKeys(filters, PRUNE_FILTERS);
    const danglingOnly = danglingFilter(filters.get('dangling'), true);
    const until = (filters.get('until') ?? []).map((v) => parseTimestamp(v));
    const labels = filters.get('label') ?? [];
    const notLabels = filters.get('label!') ?? [];
    const children = store.parentIds();
    const layerSizes = new Map<string, number>();
    for (const l of await store.overlay.listLayers()) layerSizes.set(l.chainId, l.size);
    const deleted: ImageDeleteItem[] = [];
    for (const img of store.all()) {
      const id = img.meta.id;
      if (danglingOnly && children.has(id)) continue;
      const refs = references.refsOf(id);
      if (refs.length === 0 && children.has(id)) continue;
      const created = Date.parse(img.config.created ?? '') || 0;
      if (until.length && !until.every((t) => created < t)) continue;
      const have = img.config.config?.Labels ?? {};
      if (!labels.every((l) => labelMatches(have, l))) continue;
      if (notLabels.some((l) => labelMatches(have, l))) continue;
      const names: string[] = [];
      if (refs.length > 0) {
        if (danglingOnly && refs.some((r) => r.tag !== undefined && !hasDigest(r))) continue;
        names.push(...refs.map(referenceString));
      } else names.push(hex(id));
      for (const name of names) {
        try {
          deleted.push(...(await deleter.remove(name, { force: false, prune: true })));
        } catch (err) {
          if (!(err instanceof BerthError) || (err.kind !== 'Conflict' && err.kind !== 'NotFound')) throw err;
        }
      }
    }
    let reclaimed = 0;
    for (const d of deleted) if ('Deleted' in d) reclaimed += layerSizes.get(d.Deleted) ?? 0;
    this.deps.events.pruned(reclaimed);
    return { ImagesDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed };
  }
}
