import { invalidParameter } from '../../common/errors.js';
import { parseBool } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import {
  buildCacheSummary,
  containerSummary,
  DISK_USAGE_TYPES,
  type DiskUsage,
  type DiskUsageReport,
  type DiskUsageType,
  imageSummary,
  type UsageSummary,
  volumeSummary,
} from '../system/disk-usage.js';
import { shapeListItem } from './containers.versions.js';
import type { ApiRouter } from './context.js';
import { shapeImageSummary } from './images.versions.js';
import { gates, versionBefore } from './versions.js';
import { shapeVolume } from './volumes.routes.js';

/** The kinds a request asks for: all before API 1.42 or without `type`, else the named ones. */
function requestedTypes(query: URLSearchParams, version: string): Set<DiskUsageType> {
  const named = query.getAll('type');
  if (versionBefore(version, gates.diskUsageType) || named.length === 0) return new Set(DISK_USAGE_TYPES);
  const out = new Set<DiskUsageType>();
  for (const t of named) {
    if (!(DISK_USAGE_TYPES as readonly string[]).includes(t))
      throw invalidParameter(`unknown object type: ${t}`);
    out.add(t as DiskUsageType);
  }
  return out;
}

/** The lists of a report, each row as the request's version shows it; null where not asked for. */
function shapedLists(r: DiskUsageReport, version: string) {
  return {
    images: r.images?.map((i) => shapeImageSummary(i, version)) ?? null,
    containers: r.containers?.map((c) => shapeListItem(c, version)) ?? null,
    volumes: r.volumes?.map(shapeVolume) ?? null,
    buildCache: r.buildCache,
  };
}

/** moby's {ActiveCount, Items, Reclaimable, TotalCount, TotalSize}, every field omitempty. */
export function summaryJson(s: UsageSummary, items: readonly unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (s.activeCount) out.ActiveCount = s.activeCount;
  if (items.length) out.Items = items;
  if (s.reclaimable) out.Reclaimable = s.reclaimable;
  if (s.totalCount) out.TotalCount = s.totalCount;
  if (s.totalSize) out.TotalSize = s.totalSize;
  return out;
}

/** Below 1.52: dockerd 20.10's {LayersSize, Images, Containers, Volumes, BuildCache}. */
function legacyReport(r: DiskUsageReport, version: string): Record<string, unknown> {
  const lists = shapedLists(r, version);
  const out: Record<string, unknown> = {};
  // dockerd leaves LayersSize out when it is 0 (omitempty)
  if (r.layersSize) out.LayersSize = r.layersSize;
  out.Images = lists.images;
  out.Containers = lists.containers;
  out.Volumes = lists.volumes;
  // dockerd 20.10 answers an empty build cache as null, and BuilderSize (its sum) below 1.42
  out.BuildCache = lists.buildCache?.length ? lists.buildCache : null;
  if (versionBefore(version, gates.diskUsageType)) out.BuilderSize = 0;
  return out;
}

/**
 * From 1.52: a summary per kind asked for (`ImageUsage`, `ContainerUsage`, `VolumeUsage`,
 * `BuildCacheUsage`, with the rows as `Items`), after the legacy lists unless `verbose` (a client
 * that says so knows the new form; dockerd keeps both for the others). The legacy lists are left
 * out for kinds not asked for and [] when empty, as moby's router has them from 1.52.
 */
function summaryReport(r: DiskUsageReport, version: string, verbose: boolean): Record<string, unknown> {
  const lists = shapedLists(r, version);
  const out: Record<string, unknown> = {};
  if (!verbose) {
    if (r.layersSize) out.LayersSize = r.layersSize;
    if (lists.images) out.Images = lists.images;
    if (lists.containers) out.Containers = lists.containers;
    if (lists.volumes) out.Volumes = lists.volumes;
    if (lists.buildCache) out.BuildCache = lists.buildCache;
  }
  if (r.images && lists.images)
    out.ImageUsage = summaryJson(imageSummary(r.images, r.layersSize), lists.images);
  if (r.containers && lists.containers)
    out.ContainerUsage = summaryJson(containerSummary(r.containers), lists.containers);
  if (r.volumes && lists.volumes) out.VolumeUsage = summaryJson(volumeSummary(r.volumes), lists.volumes);
  if (r.buildCache) out.BuildCacheUsage = summaryJson(buildCacheSummary(r.buildCache), r.buildCache);
  return out;
}

/** GET /system/df. */
export type DiskUsageBackend = Pick<DiskUsage, 'report'>;

export function registerDiskUsageRoutes(router: ApiRouter, usage: DiskUsageBackend): void {
  router.get('/system/df', async (ctx) => {
    const r = await usage.report(requestedTypes(ctx.query, ctx.version));
    const body = versionBefore(ctx.version, gates.diskUsageSummaries)
      ? legacyReport(r, ctx.version)
      : summaryReport(r, ctx.version, parseBool(ctx.query.get('verbose')));
    sendJson(ctx.res, 200, body);
  });
}
