import { mkdirSync, mkdtempSync } from 'node:fs';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import { IncomingMessage } from 'node:http';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { BerthError, invalidParameter } from '../../../common/errors.js';
import { resolveInRoot } from '../../runtime/oci/rootfs-path.js';
import { HostStorageOps, type StorageOps } from '../../storage/adapters/host.ops.js';
import { detectCompression } from '../../storage/layer.apply.js';
import { BLOCK } from '../../storage/tar-header.js';
import type { BuildContext } from '../build.types.js';
import { bufferRecycler, pumpBody } from './body-pump.js';
import { type ContextHost, hostContextTools } from './context.host.js';
import { ContextExtraction, type Extracted, extractContextTar, tarReadError } from './context-tar.js';
import { type DeferredContents, keepSources } from './deferred.js';
import { applyIgnore } from './ignore.js';
import type { LargeFile, LocalSources } from './local-sources.js';
import { NamedFiles } from './named-files.js';
import { PatternMatcher, parseIgnoreFile } from './patterns.js';
import { cloneGitContext, fetchBounded, isGitUrl, isHttpUrl } from './remote.js';
import { isTarOrBinary, readAllBounded, sniffArchive } from './sniff.js';

export const DEFAULT_DOCKERFILE = 'Dockerfile';
/** The largest Dockerfile read (a plain body, a file in the context). */
const DOCKERFILE_LIMIT = 32 * 1024 * 1024;
/** A `remote` download: at most this much, for at most this long. */
const REMOTE_LIMIT = 8 * 1024 * 1024 * 1024;
const REMOTE_TIMEOUT_MS = 30 * 60 * 1000;

export interface ReceiveOptions {
  /** A directory of the engine's; the context gets a new directory below it. */
  workDir?: string;
  /** The same as `workDir` (either names it). */
  dir?: string;
  /** The `dockerfile` query parameter: a path in the context (default `Dockerfile`). */
  dockerfile?: string;
  /** The `remote` query parameter: an http(s) URL (a tar in any compression, or a Dockerfile) or a git URL. */
  remote?: string;
  signal?: AbortSignal;
  /** Decompressors (bzip2, xz, zstd); the host's by default. */
  ops?: StorageOps;
  host?: ContextHost;
  remoteLimit?: number;
  remoteTimeoutMs?: number;
  /**
   * Told the bytes of a `remote` download received so far (for dockerd's `Downloading context`
   * progress messages).
   */
  onProgress?: (bytes: number, url: string) => void;
  /** The most a context tar may hold once decompressed (413 beyond); no bound by default, as dockerd. */
  limit?: number;
  /**
   * Large files' contents held in memory until the files are read (DeferredContents; default
   * true): false writes them as they arrive (a build with `nocache` reads them anyway).
   */
  hold?: boolean;
  /**
   * The engine's store of earlier contexts' large files: a member equal to the one stored under
   * its path and size is compared rather than hashed and held; `cleanup({ keep: true })` stores
   * this context's.
   */
  sources?: LocalSources;
}

const dockerfileTooLarge = () => invalidParameter(`the Dockerfile is larger than ${DOCKERFILE_LIMIT} bytes`);

/**
 * Receive a build's context as dockerd's classic builder reads it: the body is a tar in any
 * compression (sniffed), extracted defensively as it arrives into a new directory below
 * `workDir` (extractContextTar), or, when it is no archive, a plain Dockerfile with an empty
 * context (`docker build - < Dockerfile`). With `remote`, the body is not read: an http(s) URL is
 * downloaded (bounded, abortable; an archive is the context, anything else the Dockerfile) and a
 * git URL cloned. The Dockerfile (`dockerfile`, default `Dockerfile`, then `dockerfile`) is read
 * from the context, then `<Dockerfile>.dockerignore` (or else `.dockerignore`) is applied to the
 * context, which removes the Dockerfile and the ignore file too when they match (as dockerd).
 * Errors are 400s in dockerd's words; on any failure the directory is gone.
 */
export async function receiveContext(body: Readable, options: ReceiveOptions): Promise<BuildContext> {
  const workDir = options.workDir ?? options.dir;
  if (!workDir) throw new TypeError('receiveContext: no workDir');
  const opts = { ...options, signal: options.signal ?? new AbortController().signal };
  // synchronous (a few microseconds each): under load a call through the thread pool waits its
  // turn while the client's upload stalls on a body nobody reads yet
  mkdirSync(workDir, { recursive: true, mode: 0o700 });
  const dir = mkdtempSync(join(workDir, 'context-'));
  let cleaned: Promise<void> | undefined;
  let deferred: DeferredContents | undefined;
  let keep: (() => Promise<void>) | undefined;
  const remove = () => {
    deferred?.release();
    return rm(dir, { recursive: true, force: true });
  };
  const cleanup = (o: { keep?: boolean } = {}) => {
    cleaned ??= o.keep && keep ? keep().then(remove, remove) : remove();
    return cleaned;
  };
  try {
    const received = await receiveInto(dir, body, opts);
    const { deferred: held, large, ...ctx } = received;
    deferred = held;
    const { sources } = opts;
    if (sources && large?.length && ctx.digests) {
      const digests = ctx.digests;
      keep = () => keepSources(sources, ctx.root, large, digests, held);
    }
    return { ...ctx, contents: () => held?.writeOut() ?? Promise.resolve(), cleanup };
  } catch (err) {
    await cleanup();
    opts.signal.throwIfAborted();
    throw err;
  }
}

async function receiveInto(
  dir: string,
  body: Readable,
  opts: ReceiveOptions & { signal: AbortSignal },
): Promise<Received> {
  const { signal } = opts;
  signal.throwIfAborted();
  if (opts.remote) return receiveRemote(dir, body, opts.remote, opts);
  const onAbort = () => body.destroy(new Error('build cancelled'));
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const head = await readHead(body);
    const first = Buffer.concat(head.chunks);
    if (detectCompression(first) === 'none' && isTarOrBinary(first)) {
      // the common case, an uncompressed tar: extracted in the body's own events
      return await receiveTarBody(body, first, head.ended, join(dir, 'root'), opts);
    }
    // a compressed context, or a plain Dockerfile
    return await receiveArchive(
      dir,
      (async function* () {
        if (first.length) yield first;
        if (!head.ended) for await (const c of body) yield c as Buffer;
      })(),
      opts,
    );
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** A `remote` context: an http(s) download (an archive, or a Dockerfile) or a git clone; the body is not read. */
async function receiveRemote(
  dir: string,
  body: Readable,
  remote: string,
  opts: ReceiveOptions & { signal: AbortSignal },
): Promise<Received> {
  const { signal } = opts;
  body.resume();
  if (isGitUrl(remote)) {
    const cloned = await cloneGitContext(remote, join(dir, 'git'), opts.host ?? hostContextTools, signal);
    return locateDockerfile(cloned, opts.dockerfile);
  }
  if (!isHttpUrl(remote)) throw invalidParameter(`remoteURL (${remote}) could not be recognized as URL`);
  const timed = AbortSignal.any([signal, AbortSignal.timeout(opts.remoteTimeoutMs ?? REMOTE_TIMEOUT_MS)]);
  const source = fetchBounded(remote, {
    signal: timed,
    limit: opts.remoteLimit ?? REMOTE_LIMIT,
    errorPrefix: `error downloading remote context ${remote}: `,
    ...(opts.onProgress ? { onProgress: (n: number) => opts.onProgress?.(n, remote) } : {}),
  });
  return receiveArchive(dir, source, opts);
}

/**
 * A context from an async stream of chunks, in any compression (sniffed): a tar is extracted as
 * it arrives, anything else is a plain Dockerfile with an empty context.
 */
async function receiveArchive(
  dir: string,
  source: AsyncIterable<Buffer>,
  opts: ReceiveOptions & { signal: AbortSignal },
): Promise<Received> {
  const { signal } = opts;
  const root = join(dir, 'root');
  const sniffed = await sniffArchive(source, opts.ops ?? new HostStorageOps());
  await mkdir(root, { mode: 0o755 });
  if (opts.remote && sniffed.empty) {
    throw invalidParameter(`error detecting content type for remote ${opts.remote}: empty response`);
  }
  if (!sniffed.isTar) {
    const text = await readAllBounded(sniffed.bytes, DOCKERFILE_LIMIT, dockerfileTooLarge);
    return { root, dockerfile: text.toString('utf8'), dockerfilePath: '-', ignore: [] };
  }
  let extracted: Extracted;
  const named = namedFilesFor(opts.dockerfile);
  try {
    // large files' contents held, not written, until a step reads the context's files
    extracted = await extractContextTar(
      bounded(sniffed.bytes, opts.limit),
      root,
      signal,
      holdOf(opts, dir),
      named,
    );
  } finally {
    // a failed extraction stops the decompressor and the download
    await sniffed.bytes.return(undefined);
  }
  return locateIn(root, opts.dockerfile, extracted, named);
}

/**
 * How an extraction holds large files' contents (none with `hold: false`: written as they arrive);
 * `staging`: where they are written out from.
 */
function holdOf(
  opts: ReceiveOptions,
  staging: string,
): { staging: string; sources?: LocalSources } | undefined {
  return opts.hold === false ? undefined : { staging, ...(opts.sources ? { sources: opts.sources } : {}) };
}

/** The files locateDockerfile reads by name, kept as the extraction passes them. */
function namedFilesFor(requested: string | undefined): NamedFiles {
  const path = requested || DEFAULT_DOCKERFILE;
  const lower = path.toLowerCase();
  return new NamedFiles([
    path,
    `${path}.dockerignore`,
    '.dockerignore',
    ...(path === DEFAULT_DOCKERFILE ? [lower, `${lower}.dockerignore`] : []),
  ]);
}

/** The first block of a body (or all of it, when it is shorter), read through its events. */
async function readHead(body: Readable): Promise<{ chunks: Buffer[]; ended: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    const { ended } = await pumpBody(body, (chunk) => {
      chunks.push(chunk);
      size += chunk.length;
      return size < BLOCK;
    });
    return { chunks, ended };
  } catch (err) {
    // a body cut in its first block
    throw tarReadError(err);
  }
}

/**
 * An uncompressed context tar extracted as the body's chunks arrive, each written in its `data`
 * event (no promise per chunk); `first` is what was read of it already.
 */
async function receiveTarBody(
  body: Readable,
  first: Buffer,
  ended: boolean,
  root: string,
  opts: ReceiveOptions & { signal: AbortSignal },
): Promise<Received> {
  const { signal, limit } = opts;
  const dir = dirname(root);
  mkdirSync(root, { mode: 0o755 });
  signal.throwIfAborted();
  // large files' contents held, not written, until a step reads the context's files
  const named = namedFilesFor(opts.dockerfile);
  // a request's chunks are its own: a held file's are handed over whole (node's), or the
  // buffers given back to the body once read (below node's parser)
  const recycle = bufferRecycler(body);
  const lending = recycle ? 'views' : body instanceof IncomingMessage ? 'whole' : 'none';
  const extraction = new ContextExtraction(root, holdOf(opts, dir), named, lending, recycle);
  let size = 0;
  const take = (chunk: Buffer, lent = true): boolean => {
    size += chunk.length;
    if (limit !== undefined && size > limit) throw contextTooLarge(limit);
    extraction.write(chunk, lent);
    return true;
  };
  try {
    // the first block, gathered into a buffer that may be shared (a small one is the pool's)
    take(first, false);
    if (!ended) await pumpBody(body, take);
  } catch (err) {
    extraction.fail();
    signal.throwIfAborted();
    throw tarReadError(err);
  }
  return locateIn(root, opts.dockerfile, await extraction.end(), named);
}

/** The Dockerfile located in an extracted context (held contents released when that fails). */
async function locateIn(
  root: string,
  dockerfile: string | undefined,
  extracted: Extracted,
  named: NamedFiles,
): Promise<Received> {
  const { digests, deferred, large } = extracted;
  try {
    const l = await locateDockerfile(root, dockerfile, { ...(deferred ? { deferred } : {}), named });
    return { ...l, digests, large, ...(deferred ? { deferred } : {}) };
  } catch (err) {
    deferred?.release();
    throw err;
  }
}

const contextTooLarge = (limit: number) =>
  new BerthError('TooLarge', `the build context is larger than the limit of ${limit} bytes`);

/** The bytes of a context, at most `limit` of them (a decompression bomb is a 413). */
async function* bounded(source: AsyncIterable<Buffer>, limit: number | undefined): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of source) {
    size += chunk.length;
    if (limit !== undefined && size > limit) throw contextTooLarge(limit);
    yield chunk;
  }
}

/** A received context before its cleanup is attached, with the contents its extraction held. */
type Received = Omit<BuildContext, 'cleanup' | 'contents'> & {
  deferred?: DeferredContents;
  large?: LargeFile[];
};

/**
 * Reads the Dockerfile from the context and applies its `.dockerignore`; `known.named`: the files
 * the extraction kept by name (not read back), `known.deferred`: its held contents.
 */
async function locateDockerfile(
  root: string,
  requested: string | undefined,
  known: ContextFiles = {},
): Promise<Received> {
  let path = requested || DEFAULT_DOCKERFILE;
  let text = await readInContext(root, known, path);
  if (text === undefined && path === DEFAULT_DOCKERFILE) {
    text = await readInContext(root, known, path.toLowerCase());
    if (text !== undefined) path = path.toLowerCase();
  }
  if (text === undefined) throw invalidParameter(`Cannot locate specified Dockerfile: ${path}`);
  const ignoreText =
    (await readInContext(root, known, `${path}.dockerignore`)) ??
    (await readInContext(root, known, '.dockerignore')) ??
    '';
  const ignore = parseIgnoreFile(ignoreText);
  const matcher = new PatternMatcher(ignore);
  if (!matcher.empty) await applyIgnore(root, matcher);
  return { root, dockerfile: text, dockerfilePath: path, ignore };
}

/** What the extraction knows of a context's files. */
interface ContextFiles {
  deferred?: DeferredContents;
  named?: NamedFiles;
}

/** A regular file of the context (links followed inside it), or undefined when there is none. */
async function readInContext(root: string, known: ContextFiles, path: string): Promise<string | undefined> {
  const kept = known.named?.lookup(path);
  if (kept !== undefined) return kept?.toString('utf8');
  const { deferred } = known;
  const full = await resolveInRoot(root, path);
  const st = await stat(full, { bigint: true }).catch(() => undefined);
  if (!st?.isFile()) return undefined;
  if (st.size > DOCKERFILE_LIMIT) throw dockerfileTooLarge();
  // a file whose content is held: written out first
  if (deferred?.holds(st)) await deferred.writeOut();
  return (await readFile(full)).toString('utf8');
}
