import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { invalidParameter } from '../../common/errors.js';
import { parseBool } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { ContainerService } from '../containers/service.types.js';
import type { ApiContext, ApiRouter } from './context.js';

/** A container's files: docker cp both ways (archive), docker export, docker diff (changes). */
export type ArchiveBackend = Pick<
  ContainerService,
  'statPath' | 'archivePath' | 'extractTo' | 'changes' | 'export'
>;

function bool(ctx: ApiContext, name: string, fallback = false): boolean {
  return parseBool(ctx.query.get(name), fallback);
}

/**
 * Send a tar made as it goes (export, archive): the client leaving stops it, and a tar that failed
 * half-way must not look complete, so the connection is cut instead of ended.
 */
async function sendTar(
  ctx: ApiContext,
  contentType: string,
  tar: { stream: Readable; done: Promise<void>; cancel(): void },
): Promise<void> {
  ctx.res.statusCode = 200;
  ctx.res.setHeader('Content-Type', contentType);
  ctx.res.on('close', () => {
    if (!ctx.res.writableFinished) tar.cancel();
  });
  await Promise.all([pipeline(tar.stream, ctx.res, { end: false }), tar.done])
    .then(() => ctx.res.end())
    .catch(() => {
      tar.cancel();
      ctx.res.destroy();
    });
}

export function registerArchiveRoutes(router: ApiRouter, containers: ArchiveBackend): void {
  const PATH_STAT = 'X-Docker-Container-Path-Stat';
  const statHeader = (stat: unknown) => Buffer.from(JSON.stringify(stat)).toString('base64');

  router.head('/containers/{name}/archive', async (ctx) => {
    const stat = await containers.statPath(ctx.params.name ?? '', ctx.query.get('path') ?? '');
    ctx.res.statusCode = 200;
    ctx.res.setHeader(PATH_STAT, statHeader(stat));
    ctx.res.setHeader('Content-Length', '0');
    ctx.res.end();
  });

  router.get('/containers/{name}/archive', async (ctx) => {
    const { stat, stream, done, cancel } = await containers.archivePath(
      ctx.params.name ?? '',
      ctx.query.get('path') ?? '',
    );
    ctx.res.setHeader(PATH_STAT, statHeader(stat));
    await sendTar(ctx, 'application/x-tar', { stream, done, cancel });
  });

  router.put('/containers/{name}/archive', async (ctx) => {
    const length = ctx.req.headers['content-length'];
    try {
      await containers.extractTo(ctx.params.name ?? '', ctx.query.get('path') ?? '', ctx.req, {
        noOverwriteDirNonDir: bool(ctx, 'noOverwriteDirNonDir'),
        copyUIDGID: bool(ctx, 'copyUIDGID'),
        ...(length !== undefined && /^\d+$/.test(length) ? { declaredLength: Number(length) } : {}),
      });
    } catch (err) {
      // an upload the client gave up: its error, not the engine's (and nobody reads the answer)
      if (ctx.req.aborted || (err as NodeJS.ErrnoException).code === 'ECONNRESET')
        throw invalidParameter('the client closed the connection before the upload was complete');
      // the rest of a body that was not read is not waited for: answer, then close
      if (!ctx.req.complete) ctx.res.setHeader('Connection', 'close');
      throw err;
    }
    ctx.res.statusCode = 200;
    ctx.res.setHeader('Content-Length', '0');
    ctx.res.end();
  });

  router.get('/containers/{name}/changes', async (ctx) => {
    sendJson(ctx.res, 200, await containers.changes(ctx.params.name ?? ''));
  });

  router.get('/containers/{name}/export', async (ctx) => {
    await sendTar(ctx, 'application/octet-stream', await containers.export(ctx.params.name ?? ''));
  });
}
