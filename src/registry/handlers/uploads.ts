import type { ParsedDigest } from '../../common/digest.js';
import { tryParseDigest } from '../../common/digest.js';
import { hasBody } from '../../http/body.js';
import { sendEmpty } from '../../http/server.js';
import { contentLength, type RequestContext, urlFor } from '../context.js';
import { RegistryError } from '../errors.js';
import { checkDigest, isValidName } from '../names.js';
import { notify } from '../notifications/notify.js';
import { rangeHeader, type UploadStatus } from '../storage/uploads.js';
import { blobTarget } from './blobs.js';

function uploadHeaders(ctx: RequestContext, status: UploadStatus): Record<string, string> {
  return {
    Location: urlFor(ctx, `/v2/${ctx.name}/blobs/uploads/${status.id}`),
    Range: rangeHeader(status.size),
    'Docker-Upload-UUID': status.id,
  };
}

async function blobCreated(ctx: RequestContext, digest: string, event?: { from?: string }): Promise<void> {
  const d = tryParseDigest(digest);
  const st = d && ctx.state.notifier ? await ctx.state.store.blobStat(d) : undefined;
  if (st) {
    const target = blobTarget(ctx.name, digest, st.size);
    if (event?.from !== undefined) await notify(ctx, 'mount', { ...target, fromRepository: event.from });
    else await notify(ctx, 'push', target);
  }
  sendEmpty(ctx.res, 201, {
    Location: urlFor(ctx, `/v2/${ctx.name}/blobs/${digest}`),
    'Docker-Content-Digest': digest,
  });
}

/** The digests of a completing request: every `digest` parameter, validated. */
function requestedDigests(ctx: RequestContext): ParsedDigest[] {
  const values = ctx.query.getAll('digest').filter((v) => v !== '');
  if (values.length === 0) throw new RegistryError('DIGEST_INVALID', 'digest missing', { digest: '' });
  return values.map((v) => checkDigest(v));
}

/** POST /v2/<name>/blobs/uploads/: start an upload, mount a blob, or upload in one request. */
export async function startUpload(ctx: RequestContext): Promise<void> {
  const { state, name, query } = ctx;
  const mount = query.get('mount');
  if (mount !== null) {
    // Held while it is found and linked (a garbage collection in this process keeps it).
    const d = tryParseDigest(mount);
    const source = await state.gcGuard.hold(d ? [d.digest] : [], async () => {
      const found = await mountSource(ctx, mount, query.get('from'));
      if (found) await state.store.linkLayer(name, found.digest);
      return found;
    });
    if (source) {
      await blobCreated(ctx, source.digest.digest, { from: source.from });
      return;
    }
    // Fall back to an ordinary upload (202), as the protocol says.
  }
  if (query.has('digest')) {
    const digests = requestedDigests(ctx);
    const upload = await state.uploads.create(name);
    const canonical = await state.gcGuard.hold(
      digests.map((d) => d.digest),
      () => state.uploads.complete(name, upload.id, digests, ctx.req, undefined, contentLength(ctx.req)),
    );
    await blobCreated(ctx, canonical.digest);
    return;
  }
  const upload = await state.uploads.create(name);
  sendEmpty(ctx.res, 202, uploadHeaders(ctx, upload));
}

/**
 * The blob a `mount` asks for, when it can be mounted: from `from` when given (the dispatcher
 * checked pull on it), else (automatic content discovery, when configured) from this repository
 * or any other repository the caller's credentials may pull.
 */
async function mountSource(
  ctx: RequestContext,
  mount: string,
  from: string | null,
): Promise<{ digest: ParsedDigest; from: string } | undefined> {
  const { state, name, grant } = ctx;
  const d = tryParseDigest(mount);
  if (!d) return undefined;
  if (from !== null) {
    if (!isValidName(from)) return undefined;
    return (await state.store.repoBlobStat(from, d)) ? { digest: d, from } : undefined;
  }
  if (!state.automaticCrossmount) return undefined;
  if (await state.store.repoBlobStat(name, d)) return { digest: d, from: name };
  const mayPull = grant.mayPull;
  if (!mayPull) return undefined;
  const found = await state.store.repositoryWithBlob(d, mayPull, name);
  return found === undefined ? undefined : { digest: d, from: found };
}

/** GET /v2/<name>/blobs/uploads/<uuid>: the progress of an upload. */
export async function uploadStatus(ctx: RequestContext): Promise<void> {
  const status = await ctx.state.uploads.status(ctx.name, ctx.param);
  sendEmpty(ctx.res, 204, uploadHeaders(ctx, status));
}

/** PATCH /v2/<name>/blobs/uploads/<uuid>: append a chunk (with Content-Range) or stream. */
export async function patchUpload(ctx: RequestContext): Promise<void> {
  const { req, state, name, param: id } = ctx;
  try {
    const status = await state.uploads.append(
      name,
      id,
      req,
      req.headers['content-range'],
      contentLength(req),
    );
    sendEmpty(ctx.res, 202, uploadHeaders(ctx, status));
  } catch (err) {
    if (err instanceof RegistryError && err.code === 'RANGE_INVALID') {
      const size = (err.detail as { size: number }).size;
      // 416 with Location, Range (last valid range), Content-Length 0 and the upload id.
      sendEmpty(ctx.res, 416, uploadHeaders(ctx, { id, size, startedAt: new Date() }));
      return;
    }
    throw err;
  }
}

/** PUT /v2/<name>/blobs/uploads/<uuid>?digest=: complete an upload (optionally with the last data). */
export async function completeUpload(ctx: RequestContext): Promise<void> {
  const { req, state, name, param: id } = ctx;
  const digests = requestedDigests(ctx);
  try {
    // Held: an identical blob already stored is linked, not rewritten (gc/guard.ts).
    const canonical = await state.gcGuard.hold(
      digests.map((d) => d.digest),
      () =>
        state.uploads.complete(
          name,
          id,
          digests,
          hasBody(req) ? req : undefined,
          req.headers['content-range'],
          contentLength(req),
        ),
    );
    await blobCreated(ctx, canonical.digest);
  } catch (err) {
    if (err instanceof RegistryError && err.code === 'RANGE_INVALID') {
      // 416 is not an answer of PUT (change b): the final chunk does not fit.
      throw new RegistryError('BLOB_UPLOAD_INVALID', err.message, { uuid: id });
    }
    throw err;
  }
}

/** DELETE /v2/<name>/blobs/uploads/<uuid>: cancel an upload. */
export async function cancelUpload(ctx: RequestContext): Promise<void> {
  await ctx.state.uploads.cancel(ctx.name, ctx.param);
  sendEmpty(ctx.res, 204, { 'Docker-Upload-UUID': ctx.param });
}
