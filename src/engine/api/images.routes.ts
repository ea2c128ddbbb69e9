import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage, invalidParameter } from '../../common/errors.js';
import { familiarString, parseNormalizedNamed, tagNameOnly, withTag } from '../../common/reference.js';
import { parseBool, parseFilters } from '../../http/query.js';
import { sendEmpty, sendJson } from '../../http/server.js';
import { type JsonMessageStream, progressBar, startJsonStream } from '../../http/stream.js';
import { orderedContainerConfig, unixSeconds, ZERO_TIME } from '../images/config.js';
import type { ImageService } from '../images/images.service.js';
import type {
  ImageDetails,
  ImageHistoryItem,
  ImageListItem,
  ImportProgress,
} from '../images/images.types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { gates, versionBefore } from './versions.js';

/** What the routes need from the image service (src/engine/images). */
export type ImageBackend = Pick<
  ImageService,
  'importImage' | 'listImages' | 'prune' | 'inspect' | 'history' | 'tag' | 'remove'
>;

/** dockerd 20.10 leaves an empty list nil (JSON null) in image list rows. */
function orNull(list: string[], version: string): string[] | null {
  return list.length === 0 && versionBefore(version, gates.imageListEmptyArrays) ? null : list;
}

/** GET /images/json row, keys in dockerd's order. */
export function shapeImageSummary(item: ImageListItem, version: string): Record<string, unknown> {
  const r = item.record;
  const out: Record<string, unknown> = {
    Containers: item.containers ?? -1,
    Created: unixSeconds(r.created),
    Id: r.id,
    Labels: r.config.config?.Labels ?? null,
    ParentId: r.parent,
    RepoDigests: orNull(item.repoDigests, version),
    RepoTags: orNull(item.repoTags, version),
    SharedSize: item.sharedSize ?? -1,
    Size: r.size,
  };
  if (versionBefore(version, gates.imageVirtualSizeOmitted)) out.VirtualSize = r.size;
  return out;
}

/** GET /images/{name}/json, field for field as dockerd 20.10 answers (gated by version). */
export function shapeImageInspect(d: ImageDetails, version: string): Record<string, unknown> {
  const r = d.record;
  const c = r.config;
  const out: Record<string, unknown> = {
    Id: r.id,
    RepoTags: r.repoTags,
    RepoDigests: r.repoDigests,
    Parent: r.parent,
    Comment: c.comment ?? '',
    Created: c.created ?? ZERO_TIME,
  };
  if (versionBefore(version, gates.imageContainerConfig)) {
    out.Container = c.container ?? '';
    out.ContainerConfig = orderedContainerConfig(c.container_config);
  }
  out.DockerVersion = c.docker_version ?? '';
  out.Author = c.author ?? '';
  out.Config = c.config ? orderedContainerConfig(c.config) : null;
  out.Architecture = c.architecture ?? '';
  if (c.variant) out.Variant = c.variant;
  out.Os = c.os ?? '';
  if (c['os.version'] && !versionBefore(version, gates.imageOsVersion)) out.OsVersion = c['os.version'];
  out.Size = r.size;
  if (versionBefore(version, gates.imageVirtualSizeOmitted)) out.VirtualSize = r.size;
  out.GraphDriver = { Data: d.graphDriver ? { ...d.graphDriver } : null, Name: 'overlay2' };
  const rootfs: Record<string, unknown> = { Type: c.rootfs?.type ?? 'layers' };
  if (c.rootfs?.diff_ids?.length) rootfs.Layers = c.rootfs.diff_ids;
  out.RootFS = rootfs;
  out.Metadata = { LastTagTime: d.lastTagTime ?? ZERO_TIME };
  return out;
}

export function shapeHistoryItem(h: ImageHistoryItem): Record<string, unknown> {
  return {
    Comment: h.comment,
    Created: h.created,
    CreatedBy: h.createdBy,
    Id: h.id,
    Size: h.size,
    Tags: h.tags,
  };
}

/** Let an unread request body drain (briefly) so the client reads our error instead of EPIPE. */
async function drain(req: IncomingMessage): Promise<void> {
  if (req.readableEnded || req.destroyed) return;
  req.resume();
  await Promise.race([once(req, 'end').catch(() => undefined), sleep(2000)]);
}

async function createImage(ctx: ApiContext, images: Pick<ImageBackend, 'importImage'>): Promise<void> {
  const q = ctx.query;
  const fromImage = q.get('fromImage') ?? '';
  const fromSrc = q.get('fromSrc') ?? '';
  if (fromImage) {
    // Pull is a later issue: validate the name, then fail in-band as dockerd does for a
    // registry it cannot reach.
    let ref = parseNormalizedNamed(fromImage);
    const tag = q.get('tag');
    if (tag) ref = /^sha256:/.test(tag) ? { ...ref, digest: tag } : withTag(ref, tag);
    const stream = startJsonStream(ctx.res);
    stream.error(
      `pull access for ${familiarString(tagNameOnly(ref))} is not available: this berth engine cannot pull images yet; add images with docker import`,
    );
    stream.end();
    return;
  }
  if (!fromSrc) {
    await drain(ctx.req);
    throw invalidParameter('fromImage or fromSrc is required');
  }
  const declared = Number(ctx.req.headers['content-length'] ?? Number.NaN);
  let stream: JsonMessageStream | undefined;
  const out = (): JsonMessageStream => {
    stream ??= startJsonStream(ctx.res);
    return stream;
  };
  const onProgress = (p: ImportProgress) => {
    if (p.kind === 'status') out().status(p.status);
    else {
      const progressDetail: Record<string, number> = { current: p.current };
      if (p.total !== undefined) progressDetail.total = p.total;
      out().write({ status: p.status, progressDetail, progress: progressBar(p.current, p.total) });
    }
  };
  try {
    const id = await images.importImage({
      src: fromSrc,
      body: fromSrc === '-' ? (ctx.req as AsyncIterable<Buffer>) : undefined,
      bodySize: Number.isFinite(declared) ? declared : undefined,
      repo: q.get('repo') ?? undefined,
      tag: q.get('tag') ?? undefined,
      changes: q.getAll('changes'),
      message: q.get('message') ?? undefined,
      platform: atLeast(ctx, gates.imagePlatform) ? (q.get('platform') ?? undefined) : undefined,
      onProgress,
    });
    out().status(id);
    out().end();
  } catch (err) {
    // an upload the client gave up: its error, not the engine's (and nobody reads the answer)
    if (ctx.req.aborted)
      throw invalidParameter('the client closed the connection before the upload was complete');
    if (!stream) {
      await drain(ctx.req);
      throw err;
    }
    stream.error(errorMessage(err));
    stream.end();
  }
}

export function registerImageRoutes(router: ApiRouter, images: ImageBackend): void {
  router.post('/images/create', (ctx) => createImage(ctx, images));

  router.get('/images/json', async (ctx) => {
    const q = ctx.query;
    const all = parseBool(q.get('all'));
    const filters = parseFilters(q.get('filters'));
    const legacy = q.get('filter');
    if (legacy && versionBefore(ctx.version, gates.imagesNoSingularFilter)) {
      filters.set('reference', [...(filters.get('reference') ?? []), legacy]);
    }
    const sharedSize = atLeast(ctx, gates.imageListSharedSize) && parseBool(q.get('shared-size'));
    const items = await images.listImages({ all, filters, sharedSize });
    sendJson(
      ctx.res,
      200,
      items.map((i) => shapeImageSummary(i, ctx.version)),
    );
  });

  router.post('/images/prune', async (ctx) => {
    const report = await images.prune(parseFilters(ctx.query.get('filters')));
    sendJson(ctx.res, 200, report);
  });

  router.get('/images/{name*}/json', async (ctx) => {
    const details = await images.inspect(ctx.params.name ?? '');
    sendJson(ctx.res, 200, shapeImageInspect(details, ctx.version));
  });

  router.get('/images/{name*}/history', async (ctx) => {
    const items = await images.history(ctx.params.name ?? '');
    sendJson(ctx.res, 200, items.map(shapeHistoryItem));
  });

  router.post('/images/{name*}/tag', async (ctx) => {
    await images.tag(ctx.params.name ?? '', ctx.query.get('repo') ?? '', ctx.query.get('tag') ?? undefined);
    sendEmpty(ctx.res, 201);
  });

  router.delete('/images/{name*}', async (ctx) => {
    const force = parseBool(ctx.query.get('force'));
    const noprune = parseBool(ctx.query.get('noprune'));
    const items = await images.remove(ctx.params.name ?? '', { force, prune: !noprune });
    sendJson(ctx.res, 200, items);
  });
}
