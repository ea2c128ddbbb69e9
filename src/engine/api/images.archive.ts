import { pipeline } from 'node:stream/promises';
import { errorMessage, invalidParameter } from '../../common/errors.js';
import { discardUnreadBody } from '../../http/body.js';
import { parseBool } from '../../http/query.js';
import { startJsonStream } from '../../http/stream.js';
import type { ImageService } from '../images/images.service.js';
import type { OciPlatform } from '../images/images.types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { decodePlatform } from './images.versions.js';
import { gates } from './versions.js';

/** What save and load need from the image service. */
export type ImageArchiveBackend = Pick<ImageService, 'saveImages' | 'checkLoadSize' | 'loadImages'>;

/** The `platform` parameter of save and load (API 1.48): one at most, as dockerd. */
function platformOf(ctx: ApiContext): OciPlatform | undefined {
  if (!atLeast(ctx, gates.imageArchivePlatform)) return undefined;
  const given = ctx.query.getAll('platform');
  if (given.length > 1) throw invalidParameter('multiple platform parameters not supported');
  return given[0] ? decodePlatform(given[0]) : undefined;
}

/**
 * docker save: the names are resolved first (404 and 400 as statuses), then the tar streams out.
 * A failure once it has begun cuts the connection (no final chunk), so that no client takes a
 * short archive for a whole one.
 */
async function save(ctx: ApiContext, images: ImageArchiveBackend, names: string[]): Promise<void> {
  const archive = await images.saveImages(names, { platform: platformOf(ctx) });
  ctx.res.statusCode = 200;
  ctx.res.setHeader('Content-Type', 'application/x-tar');
  try {
    await pipeline(archive, ctx.res);
  } catch {
    archive.destroy();
    ctx.res.destroy();
  }
}

/**
 * docker load: 413 before anything is read when the declared length is over the limit; then, as
 * dockerd, a 200 JSON stream: `Loading layer` progress (unless quiet; dockerd's default when the
 * parameter is absent), `Loaded image: ...` lines, and errors in the stream.
 */
async function load(ctx: ApiContext, images: ImageArchiveBackend): Promise<void> {
  const q = ctx.query;
  const quiet = q.has('quiet') ? parseBool(q.get('quiet')) : true;
  const platform = platformOf(ctx);
  const declared = Number(ctx.req.headers['content-length'] ?? Number.NaN);
  // refused unread: the connection closes after the answer
  images.checkLoadSize(Number.isFinite(declared) ? declared : undefined);
  const stream = startJsonStream(ctx.res);
  try {
    await images.loadImages({
      // not destroyed when the load stops reading early
      body: ctx.req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>,
      quiet,
      platform,
      onMessage: (m) => {
        if (m.kind === 'stream') stream.stream(m.text);
        else stream.progress(m.id, 'Loading layer', m.current, m.total);
      },
    });
  } catch (err) {
    const e = ctx.req.aborted
      ? invalidParameter('the client closed the connection before the upload was complete')
      : err;
    stream.error(errorMessage(e));
    stream.end();
    // a refusal before the whole archive came: the client still sending reads the answer
    await discardUnreadBody(ctx.req, ctx.res);
    return;
  }
  stream.end();
}

export function registerImageArchiveRoutes(router: ApiRouter, images: ImageArchiveBackend): void {
  router.get('/images/get', (ctx) => save(ctx, images, ctx.query.getAll('names')));
  router.get('/images/{name*}/get', (ctx) => save(ctx, images, [ctx.params.name ?? '']));
  router.post('/images/load', (ctx) => load(ctx, images));
}
