import { notFound } from '../../common/errors.js';
import { familiarMatch } from '../../common/reference.js';
import { checkFilterKeys, danglingFilter, labelMatches, parseTimestamp } from './filters.js';
import type { ImageStore } from './image.store.js';
import type { ImageListItem, ImageListOptions, ImageUsers } from './images.types.js';
import { digestStrings, type ReferenceStore, tagStrings } from './references.js';
import type { ImageViews } from './views.js';

const LIST_FILTERS = ['dangling', 'label', 'before', 'since', 'reference', 'until'];

/** GET /images/json (filters, shared sizes, container counts) and the layers' size for /system/df. */
export class ImageLister {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'overlay' | 'get' | 'ids' | 'all' | 'parentIds' | 'layersInUse'>;
      refs: Pick<ReferenceStore, 'refsOf' | 'lookup'>;
      views: Pick<ImageViews, 'record'>;
      users: ImageUsers;
    },
  ) {}

  async listImages(opts: ImageListOptions = {}): Promise<ImageListItem[]> {
    const { store, refs: references, views } = this.deps;
    const filters = opts.filters ?? new Map<string, string[]>();
    checkFilterKeys(filters, LIST_FILTERS);
    const dangling = filters.get('dangling');
    const danglingOnly = danglingFilter(dangling, false);
    const timeOf = (name: string): number => {
      const r = references.lookup(name);
      if (!r.id) throw notFound(`No such image: ${r.notFoundName}`);
      return Date.parse(store.get(r.id)?.config.created ?? '') || 0;
    };
    const before = (filters.get('before') ?? []).map(timeOf);
    const since = (filters.get('since') ?? []).map(timeOf);
    const until = (filters.get('until') ?? []).map((v) => parseTimestamp(v));
    const labels = filters.get('label') ?? [];
    const patterns = filters.get('reference') ?? [];
    const children = store.parentIds();

    const out: ImageListItem[] = [];
    for (const id of store.ids()) {
      const rec = views.record(id);
      const created = Date.parse(rec.created) || 0;
      if (before.length && !before.every((t) => created < t)) continue;
      if (since.length && !since.every((t) => created > t)) continue;
      if (until.length && !until.every((t) => created < t)) continue;
      if (labels.length) {
        const have = rec.config.config?.Labels ?? {};
        if (!labels.every((l) => labelMatches(have, l))) continue;
      }
      let refs = references.refsOf(id);
      if (patterns.length) refs = refs.filter((r) => patterns.some((p) => familiarMatch(p, r)));
      const repoTags = tagStrings(refs);
      const repoDigests = digestStrings(refs);
      if (repoTags.length === 0 && repoDigests.length === 0) {
        if (!opts.all && children.has(id)) continue;
        if (dangling?.length && !danglingOnly) continue;
        if (patterns.length) continue;
        if (references.refsOf(id).length > 0) continue; // tagged, but no reference matched
      } else if (danglingOnly && repoTags.length > 0) continue;
      out.push({ record: rec, repoTags, repoDigests });
    }
    out.sort((a, b) => (Date.parse(b.record.created) || 0) - (Date.parse(a.record.created) || 0));
    if (opts.sharedSize) await this.addSharedSizes(out);
    if (opts.containers)
      for (const item of out) item.containers = this.deps.users.containersUsing(item.record.id).length;
    return out;
  }

  /** dockerd's LayersSize: the unpacked size of every layer some image is built on, each once. */
  async layersSize(): Promise<number> {
    const used = this.deps.store.layersInUse();
    let total = 0;
    for (const l of await this.deps.store.overlay.listLayers()) if (used.has(l.chainId)) total += l.size;
    return total;
  }

  /** dockerd's SharedSize: the sizes of an image's layers that more than one image has. */
  private async addSharedSizes(items: ImageListItem[]): Promise<void> {
    const { store } = this.deps;
    const users = new Map<string, number>();
    for (const img of store.all())
      for (const chainId of new Set(img.chain)) users.set(chainId, (users.get(chainId) ?? 0) + 1);
    const sizes = new Map<string, number>();
    for (const l of await store.overlay.listLayers()) sizes.set(l.chainId, l.size);
    for (const item of items) {
      const chain = store.get(item.record.id)?.chain ?? [];
      item.sharedSize = [...new Set(chain)]
        .filter((c) => (users.get(c) ?? 0) > 1)
        .reduce((sum, c) => sum + (sizes.get(c) ?? 0), 0);
    }
  }
}
