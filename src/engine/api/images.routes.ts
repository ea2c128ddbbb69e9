import { errorMessage, invalidParameter } from '../../common/errors.js';
import { discardUnreadBody } from '../../http/body.js';
import { parseBool, parseFilters } from '../../http/query.js';
import { sendEmpty, sendJson } from '../../http/server.js';
import { type JsonMessageStream, progressBar, startJsonStream } from '../../http/stream.js';
import type { ImageService } from '../images/images.service.js';
import type { ImportProgress, OciPlatform, PullMessage } from '../images/images.types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { type ImageArchiveBackend, registerImageArchiveRoutes } from './images.archive.js';
import { decodePlatform, shapeHistoryItem, shapeImageInspect, shapeImageSummary } from './images.versions.js';
import { gates, versionBefore } from './versions.js';

/** What the routes need from the image service (src/engine/images). */
export type ImageBackend = Pick<
  ImageService,
  'importImage' | 'pull' | 'listImages' | 'prune' | 'inspect' | 'history' | 'tag' | 'remove'
> &
  ImageArchiveBackend;

/** A pull message as dockerd writes it: status, progressDetail, progress (when not empty), id. */
function pullLine(m: PullMessage): Record<string, unknown> {
  const line: Record<string, unknown> = { status: m.status };
  if (m.detail) {
    line.progressDetail = m.detail;
    if (m.detail.current !== undefined) {
      const bar = progressBar(m.detail.current, m.detail.total);
      if (bar) line.progress = bar;
    }
  }
  if (m.id !== undefined) line.id = m.id;
  return line;
}

/**
 * docker pull: the answer starts (200) with the first progress message; an error before it is
 * the status (404 for a missing image, 401/403 for access), one after it goes in-band. A client
 * that goes away cancels the pull.
 */
async function pullImage(
  ctx: ApiContext,
  images: Pick<ImageBackend, 'pull'>,
  fromImage: string,
): Promise<void> {
  const q = ctx.query;
  let stream: JsonMessageStream | undefined;
  const out = (): JsonMessageStream => {
    stream ??= startJsonStream(ctx.res);
    return stream;
  };
  const cancel = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) cancel.abort(new Error('the client went away'));
  };
  ctx.res.on('close', onClose);
  const auth = ctx.req.headers['x-registry-auth'];
  try {
    await images.pull({
      image: fromImage,
      tag: q.get('tag') || undefined,
      platform: atLeast(ctx, gates.imagePlatform) ? q.get('platform') || undefined : undefined,
      registryAuth: typeof auth === 'string' ? auth : undefined,
      signal: cancel.signal,
      onMessage: (m) => out().write(pullLine(m)),
    });
    out().end();
  } catch (err) {
    if (!stream) throw err;
    stream.error(errorMessage(err));
    stream.end();
  } finally {
    ctx.res.off('close', onClose);
  }
}

async function createImage(
  ctx: ApiContext,
  images: Pick<ImageBackend, 'importImage' | 'pull'>,
): Promise<void> {
  const q = ctx.query;
  const fromImage = q.get('fromImage') ?? '';
  const fromSrc = q.get('fromSrc') ?? '';
  if (fromImage) {
    await pullImage(ctx, images, fromImage);
    return;
  }
  if (!fromSrc) {
    // the client reads the answer once it has sent its body, not a reset
    await discardUnreadBody(ctx.req, ctx.res);
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
      // not destroyed when the import stops reading early: the rest is discarded below
      body:
        fromSrc === '-' ? (ctx.req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) : undefined,
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
      await discardUnreadBody(ctx.req, ctx.res);
      throw err;
    }
    stream.error(errorMessage(err));
    stream.end();
  }
}

export function registerImageRoutes(router: ApiRouter, images: ImageBackend): void {
  router.post('/images/create', (ctx) => createImage(ctx, images));
  registerImageArchiveRoutes(router, images);

  router.get('/images/json', async (ctx) => {
    const q = ctx.query;
    const all = parseBool(q.get('all'));
    const filters = parseFilters(q.get('filters'));
    const legacy = q.get('filter');
    if (legacy && versionBefore(ctx.version, gates.imagesNoSingularFilter)) {
      filters.set('reference', [...(filters.get('reference') ?? []), legacy]);
    }
    const sharedSize = atLeast(ctx, gates.imageListSharedSize) && parseBool(q.get('shared-size'));
    // `manifests` lists the containerd image store's manifests: berth keeps none, so there is
    // nothing to add; `identity` needs it all the same, as dockerd says
    const manifests = atLeast(ctx, gates.imageListManifests) && parseBool(q.get('manifests'));
    const identity = atLeast(ctx, gates.imageListIdentity) && parseBool(q.get('identity'));
    if (identity && !manifests) throw invalidParameter('conflicting options: identity requires manifests=1');
    const items = await images.listImages({
      all,
      filters,
      sharedSize,
      // Containers is -1 below 1.51: not counted
      containers: atLeast(ctx, gates.imageListContainers),
    });
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
    const q = ctx.query;
    // `manifests` (1.48) adds the containerd store's manifests: none here
    const manifests = atLeast(ctx, gates.imageInspectManifests) && parseBool(q.get('manifests'));
    let platform: OciPlatform | undefined;
    const platformText = q.get('platform');
    if (platformText && atLeast(ctx, gates.imageInspectPlatform)) platform = decodePlatform(platformText);
    if (manifests && platform)
      throw invalidParameter('conflicting options: manifests and platform options cannot both be set');
    const details = await images.inspect(ctx.params.name ?? '', { platform });
    sendJson(ctx.res, 200, shapeImageInspect(details, ctx.version));
  });

  router.get('/images/{name*}/history', async (ctx) => {
    const platformText = ctx.query.get('platform');
    const platform =
      platformText && atLeast(ctx, gates.imageHistoryPlatform) ? decodePlatform(platformText) : undefined;
    const items = await images.history(ctx.params.name ?? '', { platform });
    sendJson(ctx.res, 200, items.map(shapeHistoryItem));
  });

  router.post('/images/{name*}/tag', async (ctx) => {
    await images.tag(ctx.params.name ?? '', ctx.query.get('repo') ?? '', ctx.query.get('tag') ?? undefined);
    sendEmpty(ctx.res, 201);
  });

  router.delete('/images/{name*}', async (ctx) => {
    const force = parseBool(ctx.query.get('force'));
    const noprune = parseBool(ctx.query.get('noprune'));
    // `platforms` (1.50): dockerd's image store (not containerd's) takes one at most, and then
    // deletes the image only if it is for that platform
    const platforms = atLeast(ctx, gates.imageDeletePlatforms)
      ? ctx.query.getAll('platforms').map(decodePlatform)
      : [];
    if (platforms.length > 1) throw invalidParameter('multiple platforms are not supported');
    const items = await images.remove(ctx.params.name ?? '', {
      force,
      prune: !noprune,
      platform: platforms[0],
    });
    sendJson(ctx.res, 200, items);
  });
}
