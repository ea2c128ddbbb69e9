import { once } from 'node:events';
import { lstat, mkdir } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { BerthError, invalidParameter } from '../../common/errors.js';
import type { StorageOps } from './adapters/host.ops.js';
import type { BlobWriter } from './content.store.js';
import { ThreadedSha256 } from './hash.thread.js';
import {
  type Compression,
  isLayerProducer,
  type LayerListing,
  type LayerProducer,
  type UnpackedLayer,
} from './layer.types.js';
import { TarSplitRecorder } from './tar-split.js';
import { unpackOnThread, unpackOnThreadFor } from './unpack.thread.js';

export type { ByteSink, Compression, LayerListing, LayerProducer, UnpackedLayer } from './layer.types.js';

/** Sniff the compression of a stream from its first bytes (archive.DetectCompression). */
export function detectCompression(head: Uint8Array): Compression {
  const b = Buffer.from(head);
  if (b.length >= 3 && b[0] === 0x1f && b[1] === 0x8b && b[2] === 0x08) return 'gzip';
  if (b.length >= 3 && b.subarray(0, 3).toString('latin1') === 'BZh') return 'bzip2';
  if (b.length >= 6 && b.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])))
    return 'xz';
  if (b.length >= 4 && b.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  return 'none';
}

export const WHITEOUT_PREFIX = '.wh.';
export const WHITEOUT_META_PREFIX = '.wh..wh.';
export const WHITEOUT_OPAQUE = '.wh..wh..opq';

/**
 * Clean a member name to a relative path inside the layer (or the archive `what` names); refuses
 * names escaping it.
 */
export function cleanMemberPath(name: string, what = 'layer'): string {
  const cleaned = posix.normalize(name.replace(/^\/+/, '') || '.').replace(/\/+$/, '');
  if (cleaned === '..' || cleaned.startsWith('../'))
    throw invalidParameter(`invalid ${what}: member ${JSON.stringify(name)} escapes the root`);
  return cleaned === '.' ? '' : cleaned;
}

/**
 * Classify one member name into the listing. The size counts what dockerd's overlay2 counts for
 * a layer (directory.Size of the diff): regular file bytes and symlink target lengths.
 */
export function noteMember(
  listing: LayerListing,
  name: string,
  type: string | null | undefined,
  size: number,
  linkname?: string | null,
): void {
  const rel = cleanMemberPath(name);
  listing.entries++;
  const base = posix.basename(rel);
  const dir = posix.dirname(rel) === '.' ? '' : posix.dirname(rel);
  if (base === WHITEOUT_OPAQUE) {
    listing.opaqueDirs.push(dir);
    return;
  }
  if (base.startsWith(WHITEOUT_META_PREFIX)) return; // AUFS bookkeeping (.wh..wh.plnk, .wh..wh.aufs)
  if (base.startsWith(WHITEOUT_PREFIX)) {
    const target = base.slice(WHITEOUT_PREFIX.length);
    if (target === '' || target === '.' || target === '..') {
      throw invalidParameter(`invalid layer: bad whiteout ${JSON.stringify(name)}`);
    }
    listing.whiteouts.push(dir ? `${dir}/${target}` : target);
    return;
  }
  if (type === 'file' || type === 'contiguous-file') listing.size += size;
  else if (type === 'symlink' && linkname) listing.size += Buffer.byteLength(linkname);
}

/** The parent directories of `rel` under `root` exist and none is a symlink (creating missing ones). */
async function ensureRealParents(root: string, rel: string, includeSelf: boolean): Promise<void> {
  const parts = rel.split('/').filter(Boolean);
  if (!includeSelf) parts.pop();
  let cur = root;
  for (const part of parts) {
    cur = join(cur, part);
    let st: Awaited<ReturnType<typeof lstat>> | undefined;
    try {
      st = await lstat(cur);
    } catch {
      st = undefined;
    }
    if (!st) {
      await mkdir(cur, { mode: 0o755 });
      continue;
    }
    if (st.isSymbolicLink())
      throw invalidParameter(`invalid layer: whiteout below symlink ${JSON.stringify(rel)}`);
    if (!st.isDirectory())
      throw invalidParameter(`invalid layer: whiteout below non-directory ${JSON.stringify(rel)}`);
  }
}

/** Turn the AUFS whiteouts of a listing into overlay whiteouts inside an extracted diff directory. */
export async function convertWhiteouts(dir: string, listing: LayerListing, ops: StorageOps): Promise<void> {
  const opaque = new Set<string>();
  for (const d of listing.opaqueDirs) {
    await ensureRealParents(dir, d, true);
    opaque.add(join(dir, d));
  }
  const devices: string[] = [];
  for (const rel of listing.whiteouts) {
    await ensureRealParents(dir, rel, false);
    const full = join(dir, rel);
    let st: Awaited<ReturnType<typeof lstat>> | undefined;
    try {
      st = await lstat(full);
    } catch {
      st = undefined;
    }
    // The same layer re-created the name: a directory hides the lower one by being opaque,
    // anything else hides it by being there.
    if (st?.isDirectory()) opaque.add(full);
    else if (!st) devices.push(full);
  }
  if (devices.length) await ops.makeWhiteouts(devices);
  if (opaque.size) await ops.setOpaque([...opaque]);
}

/**
 * Yield the decompressed bytes of `source`, whatever its compression (`what` names the input in
 * errors: a layer, an image archive). A compressed source's chunks are done with before the
 * next one is asked for (nothing keeps them), so a source may reuse a chunk's memory then.
 */
export async function* decompress(
  source: AsyncIterable<Buffer>,
  ops: StorageOps,
  found: (c: Compression) => void,
  what = 'layer',
): AsyncGenerator<Buffer> {
  const it = source[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let headLen = 0;
  let ended = false;
  while (headLen < 6) {
    const r = await it.next();
    if (r.done) {
      ended = true;
      break;
    }
    head.push(r.value);
    headLen += r.value.length;
  }
  const first = Buffer.concat(head);
  const kind = detectCompression(first);
  found(kind);
  if (kind === 'none') {
    if (first.length) yield first;
    if (ended) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  }
  let input: NodeJS.WritableStream;
  let output: Readable;
  let done: Promise<void> = Promise.resolve();
  let kill: () => void = () => {};
  if (kind === 'gzip') {
    // large output chunks: fewer hops through the hash, the listing and tar's pipe
    const gunzip = createGunzip({ chunkSize: 1024 * 1024 });
    input = gunzip;
    output = gunzip;
  } else {
    const d = ops.decompressor(kind);
    input = d.stdin;
    output = d.stdout;
    done = d.done;
    kill = d.kill;
  }
  const feed = (async () => {
    // each chunk is done with (inflated, or written to the tool's stdin) before the next is
    // asked for: a source may then lend its chunks (the unpacking thread's ring)
    // (a write that fails stops the feeding: the decompressor's own error or exit status says why)
    const write = (chunk: Buffer) =>
      new Promise<boolean>((resolve) => input.write(chunk, (err?: Error | null) => resolve(!err)));
    if (!(await write(first))) return;
    if (!ended) {
      for (;;) {
        const r = await it.next();
        if (r.done) break;
        if (!(await write(r.value))) return;
      }
    }
    input.end();
  })();
  feed.catch((err) => {
    kill();
    output.destroy(err as Error);
  });
  try {
    for await (const chunk of output) yield chunk as Buffer;
    await feed;
    await done;
  } catch (err) {
    kill();
    if (err instanceof BerthError) throw err;
    throw invalidParameter(`invalid ${kind} ${what}: ${(err as Error).message}`);
  } finally {
    // The consumer stopped early (an error downstream): stop the decompressor too.
    kill();
  }
}

export interface ApplyResult extends UnpackedLayer {
  /** Bytes read from the input (compressed size). */
  rawSize: number;
}

/**
 * Apply a layer tarball (plain, gzip, bzip2, xz or zstd) to an empty directory: GNU tar extracts
 * (owners, modes, mtimes, devices, links, xattrs) while the same bytes are hashed into the diff ID
 * and listed for whiteouts, which are converted to overlay form afterwards. The raw input goes to
 * `blob` when given (the layer blob in the content store). With the host's own ops a layer known
 * to be large (`sizeHint`) is unpacked on a worker thread (unpack.thread.ts): this thread only
 * reads the input and hands its bytes over.
 */
export async function applyLayer(opts: {
  input: AsyncIterable<Buffer> | Iterable<Buffer> | Readable | LayerProducer;
  dir: string;
  ops: StorageOps;
  blob?: BlobWriter;
  onProgress?: (rawBytes: number) => void;
  /** The input's size when known (a pulled blob's): a large layer is unpacked on a worker thread. */
  sizeHint?: number;
}): Promise<ApplyResult> {
  const { dir, ops, input } = opts;
  let rawSize = 0;
  if (isLayerProducer(input) && !opts.blob && unpackOnThreadFor(ops, opts.sizeHint)) {
    // the producer writes straight into the worker's ring
    const counted: LayerProducer = {
      produce: (sink) =>
        input.produce({
          write: (chunk) => {
            rawSize += chunk.length;
            opts.onProgress?.(rawSize);
            return sink.write(chunk);
          },
          room: () => sink.room(),
        }),
    };
    return { ...(await unpackOnThread(counted, dir)), rawSize };
  }
  const source = (isLayerProducer(input) ? producedChunks(input) : input) as AsyncIterable<Buffer>;
  const tap = async function* (): AsyncGenerator<Buffer> {
    for await (const c of source) {
      const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
      if (opts.blob) await opts.blob.append(chunk);
      rawSize += chunk.length;
      opts.onProgress?.(rawSize);
      yield chunk;
    }
  };
  const unpacked = unpackOnThreadFor(ops, opts.sizeHint)
    ? await unpackOnThread(tap(), dir)
    : await unpackLayerTar(tap(), dir, ops);
  return { ...unpacked, rawSize };
}

/**
 * A producer's bytes as chunks to iterate (copied: the producer reuses its buffer), at most
 * about 1 MiB ahead of the consumer. A consumer that stops early makes the producer's `room`
 * fail.
 */
async function* producedChunks(producer: LayerProducer): AsyncGenerator<Buffer> {
  const AHEAD = 1024 * 1024;
  const queue: Buffer[] = [];
  let queued = 0;
  let finished = false;
  let failure: unknown;
  let stopped = false;
  let wakeConsumer: (() => void) | undefined;
  let wakeProducer: { resolve: () => void; reject: (err: Error) => void } | undefined;
  const stop = new Error('the unpacking stopped');
  const running = producer
    .produce({
      write(chunk) {
        if (stopped) return false;
        queue.push(Buffer.from(chunk));
        queued += chunk.length;
        wakeConsumer?.();
        return queued < AHEAD;
      },
      room() {
        if (stopped) return Promise.reject(stop);
        if (queued < AHEAD) return Promise.resolve();
        return new Promise<void>((resolve, reject) => {
          wakeProducer = { resolve, reject };
        });
      },
    })
    .then(
      () => {
        finished = true;
      },
      (err: unknown) => {
        finished = true;
        failure = err;
      },
    )
    .finally(() => wakeConsumer?.());
  try {
    for (;;) {
      const next = queue.shift();
      if (next) {
        queued -= next.length;
        if (queued < AHEAD && wakeProducer) {
          const w = wakeProducer;
          wakeProducer = undefined;
          w.resolve();
        }
        yield next;
        continue;
      }
      if (finished) {
        if (failure !== undefined) throw failure;
        return;
      }
      await new Promise<void>((resolve) => {
        wakeConsumer = resolve;
      });
      wakeConsumer = undefined;
    }
  } finally {
    // the consumer gave up: the producer's next `room` fails (it reads on by itself for its
    // digest; whoever started it learns how that ended)
    stopped = true;
    queue.length = 0;
    wakeProducer?.reject(stop);
    void running;
  }
}

/**
 * The unpacking itself, on whichever thread runs it: decompress, hash the tarball into the diff
 * ID, walk it block by block (the listing and the tar-split record; a hostile member stops it),
 * feed GNU tar, and once tar is done turn the whiteouts into overlay's.
 */
export async function unpackLayerTar(
  source: AsyncIterable<Buffer>,
  dir: string,
  ops: StorageOps,
  diffHash: ThreadedSha256 = new ThreadedSha256(),
): Promise<UnpackedLayer> {
  let compression: Compression = 'none';
  const listing: LayerListing = { whiteouts: [], opaqueDirs: [], size: 0, entries: 0 };

  // the tarball is walked block by block as it passes: the listing, and the tar-split record
  // that rebuilds it from the unpacked files (headers and padding kept, file bodies only counted)
  let parseError: Error | undefined;
  const recorder = new TarSplitRecorder(
    (m) => noteMember(listing, m.name, m.type, m.size, m.linkname),
    (name) => cleanMemberPath(name),
  );
  let failure: Error | undefined;
  const scan = (chunk: Buffer) => {
    try {
      recorder.write(chunk);
    } catch (err) {
      parseError =
        err instanceof BerthError ? err : invalidParameter(`invalid layer tar: ${(err as Error).message}`);
    }
  };

  let tarInput: PassThrough | undefined;
  let extraction: Promise<void> | undefined;
  let tarFinished = false;
  let total = 0;
  try {
    for await (const chunk of decompress(source, ops, (c) => {
      compression = c;
    })) {
      if (chunk.length === 0) continue;
      total += chunk.length;
      const hashing = diffHash.update(chunk);
      if (hashing) await hashing;
      scan(chunk);
      if (parseError) throw parseError;
      if (failure) throw failure;
      if (!tarInput) {
        tarInput = new PassThrough({ highWaterMark: 1 << 20 });
        extraction = ops.extractTar(tarInput, dir, [`${WHITEOUT_PREFIX}*`]);
        extraction.then(
          () => {
            tarFinished = true;
          },
          (err: Error) => {
            tarFinished = true;
            failure ??= err;
          },
        );
      }
      if (!tarFinished && !tarInput.write(chunk)) {
        await Promise.race([once(tarInput, 'drain'), extraction?.catch(() => undefined)]);
      }
    }
    tarInput?.end();
    if (parseError) throw parseError;
    if (total > 0 && !recorder.complete) throw invalidParameter('invalid layer tar: unexpected end of data');
    if (extraction) await extraction;
  } catch (err) {
    diffHash.dispose();
    tarInput?.destroy(err as Error);
    await extraction?.catch(() => undefined);
    throw err;
  }
  const diffId = await diffHash.digest();
  if (total > 0) await convertWhiteouts(dir, listing, ops);
  const tarSplit = total > 0 ? await recorder.finish() : undefined;
  return {
    ...(tarSplit ? { tarSplit } : {}),
    diffId,
    size: listing.size,
    compression,
    tarSize: total,
    listing,
  };
}
