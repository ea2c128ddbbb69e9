import type { Filters } from '../../common/filters.js';
import { parseGoDuration } from '../images/dockerfile/go-text.js';
import type { BuildCacheStore, CacheRecord } from './build-cache.js';
import type { BuildImagePort } from './builder.ports.js';
import type { CacheMounts } from './cache-mounts.js';
import type { LocalSources } from './context/index.js';

/** One build cache record as GET /system/df lists it (moby's types.BuildCache). */
export interface CacheItem {
  ID: string;
  Parent: string;
  Parents: string[] | null;
  Type: 'regular' | 'exec.cachemount' | 'source.local';
  Description: string;
  InUse: boolean;
  Shared: boolean;
  Size: number;
  CreatedAt: string;
  LastUsedAt: string | null;
  UsageCount: number;
}

export interface PruneOptions {
  all: boolean;
  filters: Filters;
  /** Keep at least this much cache (bytes; 0: no such limit). */
  reservedSpace: number;
  /** Prune down to this much cache at most (0: no such limit). */
  maxUsedSpace: number;
}

interface CacheDeps {
  cache: BuildCacheStore;
  cacheMounts: CacheMounts;
  sources: LocalSources;
  images: BuildImagePort;
}

/** A stored context file's item ID (BuildKit's are 25 characters). */
const sourceId = (sha256: string) => sha256.slice(0, 25);

/** What a step record holds: its image's own layer (the image's size less its parent's). */
async function recordSize(images: BuildImagePort, r: CacheRecord): Promise<number> {
  const img = await images.get(r.imageId);
  if (!img) return 0;
  const parent = r.parent ? await images.get(r.parent) : undefined;
  return Math.max(0, img.size - (parent?.size ?? 0));
}

/** Every record and cache mount, in df's form (records whose image is gone are dropped). */
export async function cacheItems(d: CacheDeps): Promise<CacheItem[]> {
  const out: CacheItem[] = [];
  const byImage = new Map(d.cache.list().map((r) => [r.imageId, r.id]));
  for (const r of d.cache.list()) {
    if (!(await d.images.get(r.imageId))) {
      await d.cache.remove(r.key);
      continue;
    }
    const parent = byImage.get(r.parent) ?? '';
    out.push({
      ID: r.id,
      Parent: parent,
      Parents: parent ? [parent] : null,
      Type: 'regular',
      Description: r.description,
      InUse: false,
      Shared: false,
      Size: await recordSize(d.images, r),
      CreatedAt: r.createdAt,
      LastUsedAt: r.lastUsedAt,
      UsageCount: r.usageCount,
    });
  }
  for (const m of await d.cacheMounts.list()) {
    out.push({
      ID: m.id,
      Parent: '',
      Parents: null,
      Type: 'exec.cachemount',
      Description: `cached mount ${m.cacheId}`,
      InUse: m.inUse,
      Shared: false,
      Size: m.size,
      CreatedAt: m.createdAt,
      LastUsedAt: m.lastUsedAt,
      UsageCount: m.usageCount,
    });
  }
  for (const s of d.sources.list()) {
    out.push({
      ID: sourceId(s.sha256),
      Parent: '',
      Parents: null,
      Type: 'source.local',
      Description: 'local source for context',
      InUse: false,
      Shared: false,
      Size: s.size,
      CreatedAt: new Date(s.createdAt).toISOString(),
      LastUsedAt: new Date(s.lastUsedAt).toISOString(),
      UsageCount: s.usageCount,
    });
  }
  return out;
}

/** Whether an item passes the prune filters (buildkit's: until, unused-for, id, type, description, inuse, shared, private). */
function matches(item: CacheItem, filters: Filters, now: number): boolean {
  for (const [name, values] of filters) {
    if (values.length === 0) continue;
    const any = (pred: (v: string) => boolean) => values.some(pred);
    switch (name) {
      case 'until':
        if (!any((v) => Date.parse(item.CreatedAt) < now - parseGoDuration(v) / 1e6)) return false;
        break;
      case 'unused-for':
        if (!any((v) => Date.parse(item.LastUsedAt ?? item.CreatedAt) < now - parseGoDuration(v) / 1e6))
          return false;
        break;
      case 'id':
        if (!any((v) => item.ID.startsWith(v))) return false;
        break;
      case 'parent':
        if (!any((v) => item.Parent.startsWith(v))) return false;
        break;
      case 'type':
        if (!any((v) => item.Type === v)) return false;
        break;
      case 'description':
        if (!any((v) => item.Description.includes(v))) return false;
        break;
      case 'inuse':
        if (!item.InUse) return false;
        break;
      case 'shared':
        if (!item.Shared) return false;
        break;
      case 'private':
        if (item.Shared) return false;
        break;
    }
  }
  return true;
}

/**
 * POST /build/prune: the records and cache mounts that pass the filters and are not in use go,
 * oldest use first, until the space limits are met; without `all`, records whose image is tagged
 * stay (buildkit keeps what is referenced unless asked for all). The intermediate images that
 * only the records kept (untagged, no children, no container) are deleted with them.
 */
export async function pruneCache(
  d: CacheDeps,
  o: PruneOptions,
): Promise<{ CachesDeleted: string[] | null; SpaceReclaimed: number }> {
  const now = Date.now();
  const items = await cacheItems(d);
  const records = new Map(d.cache.list().map((r) => [r.id, r]));
  const mounts = new Map((await d.cacheMounts.list()).map((m) => [m.id, m]));
  const sources = new Map(d.sources.list().map((s) => [sourceId(s.sha256), s]));
  let total = items.reduce((n, i) => n + i.Size, 0);
  const candidates: CacheItem[] = [];
  for (const item of items) {
    if (item.InUse || !matches(item, o.filters, now)) continue;
    if (!o.all && item.Type === 'regular') {
      const r = records.get(item.ID);
      const img = r ? await d.images.get(r.imageId) : undefined;
      if (img?.repoTags.length) continue;
    }
    candidates.push(item);
  }
  candidates.sort(
    (a, b) => Date.parse(a.LastUsedAt ?? a.CreatedAt) - Date.parse(b.LastUsedAt ?? b.CreatedAt),
  );
  const deleted: string[] = [];
  let reclaimed = 0;
  const freedImages: string[] = [];
  for (const item of candidates) {
    if (o.reservedSpace && total <= o.reservedSpace) break;
    if (o.maxUsedSpace && !o.reservedSpace && total <= o.maxUsedSpace) break;
    if (item.Type === 'regular') {
      const r = records.get(item.ID);
      if (!r) continue;
      await d.cache.remove(r.key);
      freedImages.push(r.imageId);
    } else if (item.Type === 'source.local') {
      const s = sources.get(item.ID);
      if (!s || !(await d.sources.remove(s.sha256))) continue;
    } else {
      const m = mounts.get(item.ID);
      if (!m || !(await d.cacheMounts.remove(m.key))) continue;
    }
    deleted.push(item.ID);
    reclaimed += item.Size;
    total -= item.Size;
  }
  await removeIntermediates(d, freedImages);
  return { CachesDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed };
}

/**
 * Delete the images only the pruned records kept: untagged, no other record's, no child image,
 * no container (the image service refuses those); children first, so that a chain goes whole.
 */
async function removeIntermediates(d: CacheDeps, ids: string[]): Promise<void> {
  const still = new Set(d.cache.list().map((r) => r.imageId));
  let pending = ids.filter((id) => !still.has(id));
  for (let round = 0; round < 64 && pending.length; round++) {
    const all = await d.images.list();
    const parents = new Set(all.map((i) => i.parent).filter(Boolean));
    const next: string[] = [];
    let progress = false;
    for (const id of pending) {
      const img = all.find((i) => i.id === id);
      if (!img || img.repoTags.length || img.repoDigests.length) continue;
      if (parents.has(id)) {
        next.push(id);
        continue;
      }
      await d.images.remove(id, { force: false, prune: false }).then(
        () => {
          progress = true;
        },
        () => undefined,
      );
    }
    if (!progress) break;
    pending = next;
  }
}
