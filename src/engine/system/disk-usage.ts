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
}

/** Each part is there when its type was asked for, null otherwise (as dockerd's nil slices). */
export interface DiskUsageReport {
  layersSize: number;
  images: ImageListItem[] | null;
  containers: ContainerSummary[] | null;
  volumes: VolumeUsage[] | null;
  /** berth has no build cache yet: an empty list when asked for. */
  buildCache: never[] | null;
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
    const { images, containers, volumes } = this.sources;
    const [imageRows, layersSize, containerRows, volumeRows] = await Promise.all([
      types.has('image') ? images.listImages({ sharedSize: true, containers: true }) : null,
      types.has('image') ? images.layersSize() : 0,
      types.has('container') ? containers.list({ all: true, size: true }) : null,
      types.has('volume') ? volumes.usage() : null,
    ]);
    return {
      layersSize,
      images: imageRows,
      containers: containerRows,
      volumes: volumeRows,
      buildCache: types.has('build-cache') ? [] : null,
    };
  }
}
