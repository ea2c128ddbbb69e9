import { invalidParameter } from '../../common/errors.js';
import { sendJson } from '../../http/server.js';
import { DISK_USAGE_TYPES, type DiskUsage, type DiskUsageType } from '../system/disk-usage.js';
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

export function registerDiskUsageRoutes(router: ApiRouter, usage: DiskUsage): void {
  router.get('/system/df', async (ctx) => {
    const r = await usage.report(requestedTypes(ctx.query, ctx.version));
    const out: Record<string, unknown> = {};
    // dockerd leaves LayersSize out when it is 0 (omitempty)
    if (r.layersSize) out.LayersSize = r.layersSize;
    out.Images = r.images?.map((i) => shapeImageSummary(i, ctx.version)) ?? null;
    out.Containers = r.containers?.map((c) => shapeListItem(c, ctx.version)) ?? null;
    out.Volumes = r.volumes?.map(shapeVolume) ?? null;
    // dockerd 20.10 answers an empty build cache as null, and BuilderSize (its sum) below 1.42
    out.BuildCache = r.buildCache?.length ? r.buildCache : null;
    if (versionBefore(ctx.version, gates.diskUsageType)) out.BuilderSize = 0;
    sendJson(ctx.res, 200, out);
  });
}
