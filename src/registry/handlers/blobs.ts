import { pipeline } from 'node:stream/promises';
import { errnoCode } from '../../common/errors.js';
import { sendEmpty } from '../../http/server.js';
import type { RequestContext } from '../context.js';
import { RegistryError } from '../errors.js';
import { checkDigest } from '../names.js';
import { BLOB_MEDIA_TYPE } from '../notifications/events.js';
import { notify } from '../notifications/notify.js';
import type { BlobFetch } from '../proxy/blob-fetch.js';
import { FilesystemDriver } from '../storage/filesystem.driver.js';
import { paths } from '../storage/paths.js';
import { sendFileRange } from '../storage/sendfile.js';

const CACHE_CONTROL = 'max-age=31536000';

function blobUnknown(digest: string): RegistryError {
  return new RegistryError('BLOB_UNKNOWN', 'blob unknown to registry', { digest });
}

/** Parse a single `bytes=` range against a size; 'invalid' → 416, undefined → whole content. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | 'invalid' | undefined {
  if (!header) return undefined;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header);
  if (!m) {
    // Several ranges or another unit: answer the whole content, as RFC 9110 allows.
    return /^\s*bytes\s*=/.test(header) && !header.includes(',') ? 'invalid' : undefined;
  }
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return 'invalid';
  let start: number;
  let end: number;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0) return 'invalid';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
    if (b !== '' && Number(b) < start) return 'invalid';
  }
  if (start >= size || size === 0) return 'invalid';
  return { start, end };
}

function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((t) => {
    const v = t.trim().replace(/^W\//, '');
    return v === '*' || v === etag;
  });
}

/** GET and HEAD /v2/<name>/blobs/<digest>. */
export async function getBlob(ctx: RequestContext): Promise<void> {
  const { req, res, state, name } = ctx;
  const d = checkDigest(ctx.param);
  let st = await state.store.repoBlobStat(name, d);
  if (!st && state.proxy) {
    const proxied = req.method === 'HEAD' ? undefined : await state.proxy.blob(name, d);
    if (proxied?.kind === 'fetching') {
      await serveFetching(ctx, d.digest, proxied.fetch);
      return;
    }
    st = proxied?.kind === 'local' ? await state.store.repoBlobStat(name, d) : undefined;
    if (!st && req.method === 'HEAD') {
      const size = await state.proxy.remoteBlobSize(name, d);
      if (size !== undefined) {
        await notify(ctx, 'pull', blobTarget(name, d.digest, size));
        // The upstream's answer: the size without the data (nothing is fetched for a HEAD).
        res.writeHead(200, {
          'Docker-Content-Digest': d.digest,
          ETag: `"${d.digest}"`,
          'Content-Type': 'application/octet-stream',
          'Content-Length': String(size),
          'Accept-Ranges': 'bytes',
        });
        res.end();
        return;
      }
    }
  }
  if (!st) throw blobUnknown(d.digest);
  const etag = `"${d.digest}"`;
  res.setHeader('Docker-Content-Digest', d.digest);
  res.setHeader('ETag', etag);
  res.setHeader('Cache-Control', CACHE_CONTROL);
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Last-Modified', st.modTime.toUTCString());
  if (etagMatches(req.headers['if-none-match'], etag)) {
    sendEmpty(res, 304);
    return;
  }
  res.setHeader('Content-Type', 'application/octet-stream');
  const range =
    req.method === 'GET' || req.headers.range ? parseRange(req.headers.range, st.size) : undefined;
  if (range === 'invalid') {
    res.setHeader('Content-Range', `bytes */${st.size}`);
    throw new RegistryError(
      'RANGE_INVALID',
      `range ${req.headers.range} not satisfiable`,
      { size: st.size },
      416,
    );
  }
  const start = range?.start ?? 0;
  const end = range?.end ?? st.size - 1;
  await notify(ctx, 'pull', blobTarget(name, d.digest, st.size));
  res.statusCode = range ? 206 : 200;
  if (range) res.setHeader('Content-Range', `bytes ${start}-${end}/${st.size}`);
  res.setHeader('Content-Length', st.size === 0 ? 0 : end - start + 1);
  if (req.method === 'HEAD' || st.size === 0) {
    res.end();
    return;
  }
  const driver = state.store.driver;
  if (driver instanceof FilesystemDriver) {
    try {
      await sendFileRange(res, driver.fullPath(paths.blobData(d)), start, end);
      return;
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
      res.removeHeader('Content-Range');
      throw blobUnknown(d.digest);
    }
  }
  const stream = await state.store.blobReader(d, start, end);
  if (!stream) {
    res.removeHeader('Content-Range');
    throw blobUnknown(d.digest);
  }
  await pipeline(stream, res);
}

/**
 * A blob the proxy is fetching from the upstream, streamed as it arrives: the whole of it (200;
 * `Content-Length` when the upstream announced it), or one range when the size is known (206).
 */
async function serveFetching(ctx: RequestContext, digest: string, fetch: BlobFetch): Promise<void> {
  const { req, res } = ctx;
  res.setHeader('Docker-Content-Digest', digest);
  res.setHeader('ETag', `"${digest}"`);
  res.setHeader('Cache-Control', CACHE_CONTROL);
  res.setHeader('Content-Type', 'application/octet-stream');
  const size = fetch.size;
  if (size !== undefined) res.setHeader('Accept-Ranges', 'bytes');
  const range = size !== undefined ? parseRange(req.headers.range, size) : undefined;
  if (range === 'invalid') {
    res.setHeader('Content-Range', `bytes */${size}`);
    throw new RegistryError('RANGE_INVALID', `range ${req.headers.range} not satisfiable`, { size }, 416);
  }
  if (size !== undefined) await notify(ctx, 'pull', blobTarget(ctx.name, digest, size));
  res.statusCode = range ? 206 : 200;
  if (range) {
    res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
    res.setHeader('Content-Length', range.end - range.start + 1);
  } else if (size !== undefined) res.setHeader('Content-Length', size);
  await fetch.streamTo(res, range?.start ?? 0, range?.end);
}

/** DELETE /v2/<name>/blobs/<digest>: unlink the blob from the repository. */
export async function deleteBlob(ctx: RequestContext): Promise<void> {
  if (!ctx.state.deleteEnabled)
    throw new RegistryError('UNSUPPORTED', 'The operation is unsupported: deletion is disabled');
  const d = checkDigest(ctx.param);
  if (!(await ctx.state.store.unlinkLayer(ctx.name, d))) throw blobUnknown(d.digest);
  await notify(ctx, 'delete', { digest: d.digest });
  sendEmpty(ctx.res, 202, { 'Docker-Content-Digest': d.digest });
}

/** The target of a blob event (what the reference names: size twice, the blob's URL). */
export function blobTarget(name: string, digest: string, size: number) {
  return {
    mediaType: BLOB_MEDIA_TYPE,
    size,
    digest,
    length: size,
    urlPath: `/v2/${name}/blobs/${digest}`,
  };
}
