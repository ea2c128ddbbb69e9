import { readJsonObject } from '../../http/body.js';
import { parseBool, parseFilters } from '../../http/query.js';
import { sendEmpty, sendJson } from '../../http/server.js';
import type { CreateVolumeRequest, VolumeInfo, VolumeService } from '../volumes/volumes.types.js';
import { type ApiRouter, atLeast } from './context.js';
import { gates, versionAtLeast } from './versions.js';

/** A volume as dockerd 20.10 answers it: keys in its order, empty maps as null, fields by version. */
export function shapeVolume(v: VolumeInfo, version: string): Record<string, unknown> {
  const at = (min: string) => versionAtLeast(version, min);
  const out: Record<string, unknown> = {};
  if (at(gates.volumeCreatedAt)) out.CreatedAt = v.CreatedAt;
  out.Driver = v.Driver;
  out.Labels = Object.keys(v.Labels).length ? v.Labels : null;
  out.Mountpoint = v.Mountpoint;
  out.Name = v.Name;
  if (at(gates.volumeOptions)) out.Options = Object.keys(v.Options).length ? v.Options : null;
  out.Scope = v.Scope;
  return out;
}

export function registerVolumeRoutes(router: ApiRouter, volumes: VolumeService): void {
  router.get('/volumes', async (ctx) => {
    const r = await volumes.list(parseFilters(ctx.query.get('filters')));
    sendJson(ctx.res, 200, {
      Volumes: r.Volumes.map((v) => shapeVolume(v, ctx.version)),
      Warnings: r.Warnings,
    });
  });

  router.post('/volumes/create', async (ctx) => {
    const body = (await readJsonObject(ctx.req)) as CreateVolumeRequest;
    const v = await volumes.create(body);
    sendJson(ctx.res, 201, shapeVolume(v, ctx.version));
  });

  router.post('/volumes/prune', async (ctx) => {
    const filters = parseFilters(ctx.query.get('filters'));
    const report = await volumes.prune(filters, { allNamed: !atLeast(ctx, gates.volumePruneAnonymousOnly) });
    sendJson(ctx.res, 200, report);
  });

  router.get('/volumes/{name}', async (ctx) => {
    sendJson(ctx.res, 200, shapeVolume(await volumes.inspect(ctx.params.name ?? ''), ctx.version));
  });

  router.delete('/volumes/{name}', async (ctx) => {
    const force = atLeast(ctx, gates.volumeRemoveForce) && parseBool(ctx.query.get('force'));
    await volumes.remove(ctx.params.name ?? '', { force });
    sendEmpty(ctx.res, 204);
  });
}
