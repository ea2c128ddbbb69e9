import type { IncomingMessage } from 'node:http';
import { invalidParameter } from '../../common/errors.js';
import { sortedMap } from '../../common/sorted-map.js';
import { readBody } from '../../http/body.js';
import { parseBool, parseFilters } from '../../http/query.js';
import { sendEmpty, sendJson } from '../../http/server.js';
import type {
  CreateVolumeRequest,
  VolumeInfo,
  VolumeService,
  VolumeUsage,
} from '../volumes/volumes.types.js';
import { type ApiRouter, atLeast } from './context.js';
import { decodeVolumeCreateJson } from './schema/volumes.schema.js';
import { gates } from './versions.js';

/**
 * A volume as dockerd 20.10 answers it at every API version: keys in its order, `Labels` and
 * `Options` with sorted keys (Go maps), empty maps as null.
 */
export function shapeVolume(v: VolumeInfo | VolumeUsage): Record<string, unknown> {
  const out: Record<string, unknown> = {
    CreatedAt: v.CreatedAt,
    Driver: v.Driver,
    Labels: Object.keys(v.Labels).length ? sortedMap(v.Labels) : null,
    Mountpoint: v.Mountpoint,
    Name: v.Name,
    Options: Object.keys(v.Options).length ? sortedMap(v.Options) : null,
    Scope: v.Scope,
  };
  if ('UsageData' in v) out.UsageData = { RefCount: v.UsageData.RefCount, Size: v.UsageData.Size };
  return out;
}

/** A volume create body (schema/volumes.schema.ts); kept under this name for its callers. */
export const decodeCreateBody = decodeVolumeCreateJson;

/**
 * POST /volumes/create's body as dockerd reads it: a Content-Type other than JSON is refused
 * (even with no body), an empty body is `got EOF while reading request body`.
 */
async function readCreateBody(req: IncomingMessage): Promise<CreateVolumeRequest> {
  const type = req.headers['content-type'];
  if (type !== undefined && type.split(';')[0]?.trim().toLowerCase() !== 'application/json') {
    throw invalidParameter(`Content-Type specified (${type}) must be 'application/json'`);
  }
  const text = (await readBody(req, 16 * 1024 * 1024)).toString('utf8');
  if (text.trim() === '') throw invalidParameter('got EOF while reading request body');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    // A body that ends too soon is Go's `unexpected EOF`; other syntax errors keep the parser's words.
    const message = (err as Error).message;
    const at = /at position (\d+)/.exec(message)?.[1];
    const atEnd =
      /end of JSON input/i.test(message) || (at !== undefined && Number(at) >= text.trimEnd().length);
    throw invalidParameter(atEnd ? 'unexpected EOF' : `invalid JSON body: ${message}`);
  }
  return decodeCreateBody(value);
}

/** /volumes: what the routes ask of the volumes service (the rest is the containers service's). */
export type VolumesBackend = Pick<VolumeService, 'create' | 'list' | 'inspect' | 'remove' | 'prune'>;

export function registerVolumeRoutes(router: ApiRouter, volumes: VolumesBackend): void {
  router.get('/volumes', async (ctx) => {
    const r = await volumes.list(parseFilters(ctx.query.get('filters')));
    sendJson(ctx.res, 200, { Volumes: r.Volumes.map(shapeVolume), Warnings: r.Warnings });
  });

  router.post('/volumes/create', async (ctx) => {
    const v = await volumes.create(await readCreateBody(ctx.req));
    sendJson(ctx.res, 201, shapeVolume(v));
  });

  router.post('/volumes/prune', async (ctx) => {
    const filters = parseFilters(ctx.query.get('filters'));
    const report = await volumes.prune(filters, {
      allNamed: !atLeast(ctx, gates.volumePruneAnonymousOnly),
      allFilter: atLeast(ctx, gates.volumePruneAllFilter),
    });
    sendJson(ctx.res, 200, report);
  });

  router.get('/volumes/{name}', async (ctx) => {
    sendJson(ctx.res, 200, shapeVolume(await volumes.inspect(ctx.params.name ?? '')));
  });

  router.delete('/volumes/{name}', async (ctx) => {
    // dockerd 20.10 reads `force` at every version (a missing volume is then no error).
    await volumes.remove(ctx.params.name ?? '', { force: parseBool(ctx.query.get('force')) });
    sendEmpty(ctx.res, 204);
  });
}
