import type { CacheItem } from '../build/cache-prune.js';
import type { ContainerSummary } from '../containers/core/views.types.js';
import type { ListOptions } from '../containers/service.types.js';
import type { ImageListItem, ImageListOptions } from '../images/images.types.js';
import type { VolumeUsage } from '../volumes/volumes.types.js';

/** The kinds of object GET /system/df reports on (its `type` parameter, API 1.42+). */
export const DISK_USAGE_TYPES = ['container', 'image', 'volume', 'build-cache'] as const;
export type DiskUsageType = (typeof DISK_USAGE_TYPES)[number];

/** What the disk usage report reads from the other services. */
export interface DiskUsageSources {
  images: {
    listImages(opts: ImageListOptions): Promise<ImageListItem[]>;
    layersSize(): Promise<number>;
  };
  containers: { list(opts: ListOptions): Promise<ContainerSummary[]> };
  volumes: { usage(): Promise<VolumeUsage[]> };
  /** The builder's cache records and cache mounts. */
  buildCache?: { items(): Promise<CacheItem[]> };
}

/** Each part is there when its type was asked for, null otherwise (as dockerd's nil slices). */
export interface DiskUsageReport {
  layersSize: number;
  images: ImageListItem[] | null;
  containers: ContainerSummary[] | null;
  volumes: VolumeUsage[] | null;
  /** The build cache's records and cache mounts. */
  buildCache: CacheItem[] | null;
}

/**
 * `docker system df`: the top-level images with their shared sizes and container counts (and the
 * size of every layer they use), every container with its sizes, the local volumes with theirs.
 * dockerd refuses a second report while one is under way; here a request made meanwhile shares
 * the running report of the same kinds instead.
 */
export class DiskUsage {
  private readonly running = new Map<string, Promise<DiskUsageReport>>();

  constructor(private readonly sources: DiskUsageSources) {}

  report(types: ReadonlySet<DiskUsageType>): Promise<DiskUsageReport> {
    const key = DISK_USAGE_TYPES.filter((t) => types.has(t)).join(',');
    let pending = this.running.get(key);
    if (!pending) {
      pending = this.compute(types).finally(() => this.running.delete(key));
      this.running.set(key, pending);
    }
    return pending;
  }

  private async compute(types: ReadonlySet<DiskUsageType>): Promise<DiskUsageReport> {
    const { images, containers, volumes, buildCache } = this.sources;
    const [imageRows, layersSize, containerRows, volumeRows, cacheRows] = await Promise.all([
      types.has('image') ? images.listImages({ sharedSize: true, containers: true }) : null,
      types.has('image') ? images.layersSize() : 0,
      types.has('container') ? containers.list({ all: true, size: true }) : null,
      types.has('volume') ? volumes.usage() : null,
      types.has('build-cache') ? (buildCache?.items() ?? []) : null,
    ]);
    return {
      layersSize,
      images: imageRows,
      containers: containerRows,
      volumes: volumeRows,
      buildCache: cacheRows,
    };
  }
}

/** One kind's totals, as moby's DiskUsage summaries (API 1.52 `ImageUsage` and the others). */
export interface UsageSummary {
  /** Objects in use: images some container uses, running/paused/restarting containers, referenced volumes. */
  activeCount: number;
  totalCount: number;
  /** Bytes that removing the unused objects would free. */
  reclaimable: number;
  totalSize: number;
}

/**
 * moby's imageDiskUsage: every top-level image; its size is the layers' (LayersSize); an image no
 * container uses could free what it does not share with others.
 */
export function imageSummary(images: readonly ImageListItem[], layersSize: number): UsageSummary {
  const s: UsageSummary = {
    activeCount: 0,
    totalCount: images.length,
    reclaimable: 0,
    totalSize: layersSize,
  };
  for (const img of images) {
    const users = img.containers ?? -1;
    if (users > 0) s.activeCount++;
    else if (users === 0 && img.sharedSize !== undefined && img.sharedSize !== -1 && img.record.size !== -1)
      s.reclaimable += img.record.size - img.sharedSize;
  }
  return s;
}

const ACTIVE_STATES = new Set(['running', 'paused', 'restarting']);

/** moby's containerDiskUsage: the writable layers; those of containers not running are reclaimable. */
export function containerSummary(containers: readonly ContainerSummary[]): UsageSummary {
  const s: UsageSummary = { activeCount: 0, totalCount: containers.length, reclaimable: 0, totalSize: 0 };
  for (const c of containers) {
    const size = c.SizeRw ?? 0;
    s.totalSize += size;
    if (ACTIVE_STATES.has(c.State)) s.activeCount++;
    else s.reclaimable += size;
  }
  return s;
}

/** moby's localVolumesSize: sized volumes no container references are reclaimable (and inactive). */
export function volumeSummary(volumes: readonly VolumeUsage[]): UsageSummary {
  const s: UsageSummary = {
    activeCount: volumes.length,
    totalCount: volumes.length,
    reclaimable: 0,
    totalSize: 0,
  };
  for (const v of volumes) {
    if (v.UsageData.Size === -1) continue;
    s.totalSize += v.UsageData.Size;
    if (v.UsageData.RefCount === 0) {
      s.reclaimable += v.UsageData.Size;
      s.activeCount--;
    }
  }
  return s;
}

/** The build cache's totals (moby's: what is not in use is reclaimable). */
export function buildCacheSummary(records: readonly CacheItem[]): UsageSummary {
  const s: UsageSummary = { activeCount: 0, totalCount: records.length, reclaimable: 0, totalSize: 0 };
  for (const r of records) {
    s.totalSize += r.Size;
    if (r.InUse) s.activeCount++;
    else if (!r.Shared) s.reclaimable += r.Size;
  }
  return s;
}
