import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { invalidParameter, unavailable } from '../../common/errors.js';
import { repositoryScope } from './auth.js';
import type { RepositorySession } from './client.js';
import { errorFromResponse } from './registry-error.js';

/** A blob in the registry: digest and size. */
export interface BlobDescriptor {
  digest: string;
  size: number;
}

/** How a blob upload sends its bytes. */
export interface BlobUploadOptions {
  signal?: AbortSignal;
  /**
   * Bytes per PATCH. A blob that ends within the first chunk goes in one monolithic PUT; a
   * larger one in PATCHes of this size (the next chunk is read while one is sent), then a PUT
   * with the digest. Default 16 MiB.
   */
  chunkSize?: number;
  /** The digest the bytes must have (checked before the final PUT). */
  expected?: string;
  /** An upload already started (the Location of a mount that answered 202). */
  location?: string;
  /**
   * Send a blob larger than 1 MiB in one streamed PATCH (for bytes made while they are sent, a
   * layer compressed on the way: nothing is held but its first MiB).
   */
  stream?: boolean;
}

const DEFAULT_CHUNK = 16 * 1024 * 1024;
/** A streamed blob up to this size goes in one monolithic PUT. */
const MONOLITHIC_MAX = 1024 * 1024;

/** Resolve a Location header against the endpoint (it may be relative). */
function resolveLocation(s: RepositorySession, res: IncomingMessage): string {
  const loc = res.headers.location;
  if (!loc) throw unavailable(`${s.endpoint.base}: upload answer without a Location header`);
  return new URL(loc, `${s.endpoint.base}/`).href;
}

function withQuery(url: string, params: Record<string, string>): string {
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.href;
}

/** HEAD a blob in the repository: its size, or undefined when the registry does not have it. */
export async function statBlob(
  s: RepositorySession,
  digest: string,
  signal?: AbortSignal,
): Promise<number | undefined> {
  const res = await s.request({ method: 'HEAD', url: s.url(`/blobs/${digest}`), signal });
  res.resume();
  if (res.statusCode === 200) {
    const n = Number(res.headers['content-length']);
    return Number.isFinite(n) ? n : -1;
  }
  if (res.statusCode === 404) return undefined;
  throw await errorFromResponse(res);
}

/**
 * Ask the registry to mount `digest` from the repository `from` (a path on the same registry):
 * `mounted` on 201; otherwise the upload the registry started instead (202), to send the blob to.
 */
export async function mountBlob(
  s: RepositorySession,
  digest: string,
  from: string,
  signal?: AbortSignal,
): Promise<{ mounted: true } | { mounted: false; location: string }> {
  const url = withQuery(s.url('/blobs/uploads/'), { mount: digest, from });
  const res = await s.request({
    method: 'POST',
    url,
    headers: { 'Content-Length': '0' },
    signal,
    extraScopes: [repositoryScope(from, ['pull'])],
  });
  if (res.statusCode === 201) {
    res.resume();
    return { mounted: true };
  }
  if (res.statusCode === 202) {
    res.resume();
    return { mounted: false, location: resolveLocation(s, res) };
  }
  throw await errorFromResponse(res);
}

/** Start an upload (`POST /v2/<name>/blobs/uploads/`): its Location. */
export async function startUpload(s: RepositorySession, signal?: AbortSignal): Promise<string> {
  const res = await s.request({
    method: 'POST',
    url: s.url('/blobs/uploads/'),
    headers: { 'Content-Length': '0' },
    signal,
  });
  if (res.statusCode !== 202) throw await errorFromResponse(res);
  res.resume();
  return resolveLocation(s, res);
}

/** Cancel an upload (best effort). */
export async function cancelUpload(s: RepositorySession, location: string): Promise<void> {
  try {
    const res = await s.request({ method: 'DELETE', url: location });
    res.resume();
  } catch {
    // the registry forgets it anyway
  }
}

/** Reads a stream in chunks of exactly `size` bytes (the last shorter), or the rest as it comes. */
class Chunker {
  private readonly it: AsyncIterator<Buffer>;
  private rest: Buffer | undefined;
  private ended = false;

  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }

  /** The next `size` bytes (fewer at the end; undefined when nothing is left). */
  async take(size: number): Promise<Buffer | undefined> {
    const parts: Buffer[] = [];
    let have = 0;
    if (this.rest) {
      const take = Math.min(size, this.rest.length);
      parts.push(this.rest.subarray(0, take));
      have = take;
      this.rest = take < this.rest.length ? this.rest.subarray(take) : undefined;
    }
    while (have < size && !this.ended) {
      const r = await this.it.next();
      if (r.done) {
        this.ended = true;
        break;
      }
      const c = r.value;
      const take = Math.min(size - have, c.length);
      parts.push(take === c.length ? c : c.subarray(0, take));
      have += take;
      if (take < c.length) this.rest = c.subarray(take);
    }
    if (!have) return undefined;
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, have);
  }

  /** Everything left, as it comes. */
  async *remaining(): AsyncGenerator<Buffer> {
    if (this.rest) {
      const r = this.rest;
      this.rest = undefined;
      yield r;
    }
    while (!this.ended) {
      const r = await this.it.next();
      if (r.done) {
        this.ended = true;
        return;
      }
      yield r.value;
    }
  }
}

/**
 * Upload a blob from a stream: a blob that fits one chunk goes monolithically (POST, then PUT
 * with the bytes and the digest); a larger one in PATCHes with Content-Range, each next chunk
 * read while the previous one travels (at most two chunks held), or with `stream` in one PATCH
 * streamed as the bytes come; then a PUT with the digest. Returns its digest and size.
 */
export async function uploadBlob(
  s: RepositorySession,
  source: AsyncIterable<Buffer>,
  opts: BlobUploadOptions = {},
): Promise<BlobDescriptor> {
  const { signal } = opts;
  const chunkSize = Math.max(64 * 1024, opts.chunkSize ?? DEFAULT_CHUNK);
  let location = opts.location ?? (await startUpload(s, signal));
  const hash = createHash('sha256');
  let offset = 0;
  const chunks = new Chunker(source);
  const digestOf = () => {
    const digest = `sha256:${hash.digest('hex')}`;
    if (opts.expected && opts.expected !== digest)
      throw invalidParameter(`blob upload: expected ${opts.expected}, read ${digest}`);
    return digest;
  };
  // a streamed upload holds only what decides between one PUT and a PATCH
  const first = opts.stream ? Math.min(chunkSize, MONOLITHIC_MAX) : chunkSize;
  try {
    let chunk = await chunks.take(first);
    // the first chunk is all there is: one PUT
    if (!chunk || chunk.length < first) {
      if (chunk) hash.update(chunk);
      const digest = digestOf();
      await finish(s, location, digest, chunk, signal);
      return { digest, size: chunk?.length ?? 0 };
    }
    if (opts.stream) {
      // one PATCH carrying the rest as it is produced (dockerd's stream upload)
      const head = chunk;
      async function* body(): AsyncGenerator<Buffer> {
        hash.update(head);
        offset += head.length;
        yield head;
        for await (const c of chunks.remaining()) {
          hash.update(c);
          offset += c.length;
          yield c;
        }
      }
      location = await patch(s, location, body(), undefined, signal);
    } else {
      let following = chunks.take(chunkSize);
      while (chunk) {
        hash.update(chunk);
        // keep reading while the chunk travels (the rejection is taken when awaited)
        following.catch(() => undefined);
        location = await patch(s, location, chunk, offset, signal);
        offset += chunk.length;
        chunk = await following;
        following = chunk ? chunks.take(chunkSize) : Promise.resolve(undefined);
      }
    }
    const digest = digestOf();
    await finish(s, location, digest, undefined, signal);
    return { digest, size: offset };
  } catch (err) {
    if (!signal?.aborted) await cancelUpload(s, location);
    throw err;
  }
}

/** One PATCH: a chunk at `offset` (Content-Range), or a stream of unknown length. Answers the next Location. */
async function patch(
  s: RepositorySession,
  location: string,
  body: Buffer | AsyncIterable<Buffer>,
  offset: number | undefined,
  signal?: AbortSignal,
): Promise<string> {
  const headers: Record<string, string> = { 'Content-Type': 'application/octet-stream' };
  if (Buffer.isBuffer(body) && offset !== undefined) {
    headers['Content-Length'] = String(body.length);
    headers['Content-Range'] = `${offset}-${offset + body.length - 1}`;
  }
  const res = await s.request({ method: 'PATCH', url: location, headers, body, signal });
  if (res.statusCode !== 202) throw await errorFromResponse(res);
  res.resume();
  return resolveLocation(s, res);
}

/** The final PUT of an upload, with the last bytes (or none). */
async function finish(
  s: RepositorySession,
  location: string,
  digest: string,
  body: Buffer | undefined,
  signal?: AbortSignal,
): Promise<void> {
  const res = await s.request({
    method: 'PUT',
    url: withQuery(location, { digest }),
    headers: {
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(body?.length ?? 0),
    },
    body: body ?? Buffer.alloc(0),
    signal,
  });
  if (res.statusCode !== 201 && res.statusCode !== 204) throw await errorFromResponse(res);
  res.resume();
}

/** Upload a small blob held in memory (a config): skipped when the registry has it. */
export async function putBlob(
  s: RepositorySession,
  bytes: Buffer,
  signal?: AbortSignal,
): Promise<BlobDescriptor> {
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  if ((await statBlob(s, digest, signal)) !== undefined) return { digest, size: bytes.length };
  const location = await startUpload(s, signal);
  await finish(s, location, digest, bytes, signal);
  return { digest, size: bytes.length };
}

/** PUT a manifest under a tag or digest; answers its digest. */
export async function putManifest(
  s: RepositorySession,
  reference: string,
  mediaType: string,
  bytes: Buffer,
  signal?: AbortSignal,
): Promise<string> {
  const res = await s.request({
    method: 'PUT',
    url: s.url(`/manifests/${reference}`),
    headers: { 'Content-Type': mediaType, 'Content-Length': String(bytes.length) },
    body: bytes,
    signal,
  });
  if (res.statusCode !== 201 && res.statusCode !== 200 && res.statusCode !== 202)
    throw await errorFromResponse(res);
  res.resume();
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}
