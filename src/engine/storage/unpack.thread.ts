import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { BerthError, type ErrorKind } from '../../common/errors.js';
import type { StorageOps } from './adapters/host.ops.js';
import type { AtomicsWaitAsync } from './hash.thread.js';
import { type ByteSink, isLayerProducer, type LayerProducer, type UnpackedLayer } from './layer.types.js';

/**
 * A large layer unpacked on a worker thread (unpack.worker.ts): decompression, the diff ID, the
 * tar-split walk and the writes into GNU tar's stdin all leave the event loop, which only reads
 * the input (the registry's response, its digest checked there) and copies it into a ring of
 * shared memory the worker reads from (one memcpy, no allocation, no message per chunk; a
 * producer, a pull reading its blob off the socket, writes into the ring itself). On two cores
 * the download side and the unpacking side then each have a core.
 *
 * Only a layer known to be large (a pull knows its blob's size) goes there: for a small one
 * (most of them) the thread would cost more than it saves.
 *
 * Control words (BigInt64 in shared memory): 0 bytes written, 1 bytes the worker is done with
 * (copied out, or lent and given back: unpack.worker.ts), 2 end of input (1: complete, 2:
 * abandoned, the worker fails; stored after the last count, so read before it), 3 a sequence
 * number the writer bumps after each change (what the worker waits on), 4 the worker is done
 * with the job (set before its answer, so that a writer waiting for room stops).
 */
const RING = 8 * 1024 * 1024;
/** Layers from this size (their blob's) unpack on a thread. */
export const UNPACK_THREAD_FROM = 8 * 1024 * 1024;
/** Free space a producer waits for when the ring is full. */
const ROOM = 1024 * 1024;

export const CTRL_WRITTEN = 0;
export const CTRL_READ = 1;
export const CTRL_END = 2;
export const CTRL_SEQ = 3;
export const CTRL_DONE = 4;
export const CTRL_WORDS = 5;

/** A job for the worker (the ring and the control words are the thread's own). */
export interface UnpackJob {
  dir: string;
  ring: SharedArrayBuffer;
  ctrl: SharedArrayBuffer;
}

/** The worker's answer: the unpacked layer (its tar-split record as bytes), or the error. */
export type UnpackAnswer =
  | { ok: true; layer: Omit<UnpackedLayer, 'tarSplit'>; tarSplit?: Uint8Array }
  | { ok: false; kind?: ErrorKind; message: string };

interface UnpackThread {
  worker: Worker;
  ring: SharedArrayBuffer;
  ctrl: SharedArrayBuffer;
  /** It failed or ended: never given a job again. */
  dead: boolean;
}

const idle: UnpackThread[] = [];
const MAX_IDLE = 2;

/**
 * The worker's source: the compiled module, or (the engine run from src/ through tsx, as the
 * tests do) the TypeScript one loaded through tsx's require hook, which a worker does not inherit.
 */
function workerSource(): string {
  const here = import.meta.url;
  if (here.endsWith('.ts')) {
    const entry = fileURLToPath(new URL('./unpack.worker.ts', here));
    const tsx = createRequire(here).resolve('tsx/cjs');
    return `require(${JSON.stringify(tsx)}); require(${JSON.stringify(entry)});`;
  }
  return `import(${JSON.stringify(new URL('./unpack.worker.js', here).href)});`;
}

function newThread(): UnpackThread {
  const t: UnpackThread = {
    worker: new Worker(workerSource(), { eval: true }),
    ring: new SharedArrayBuffer(RING),
    ctrl: new SharedArrayBuffer(CTRL_WORDS * 8),
    dead: false,
  };
  // always listened to: a thread that fails or ends (idle or not) is noted, never thrown
  const die = () => {
    t.dead = true;
    const i = idle.indexOf(t);
    if (i >= 0) idle.splice(i, 1);
  };
  t.worker.on('error', die);
  t.worker.on('exit', die);
  return t;
}

/**
 * Have `n` threads idle (started now, loading their modules while the caller does other work:
 * a pull calls this once it knows it has large layers, before their downloads start).
 */
export function warmUnpackThreads(n: number): void {
  while (idle.length < Math.min(n, MAX_IDLE)) {
    const t = newThread();
    t.worker.unref();
    idle.push(t);
  }
}

function takeThread(): UnpackThread {
  let t = idle.pop();
  while (t?.dead) t = idle.pop();
  t ??= newThread();
  t.worker.ref();
  new BigInt64Array(t.ctrl).fill(0n);
  return t;
}

function giveBack(t: UnpackThread): void {
  if (t.dead) return;
  if (idle.length < MAX_IDLE) {
    t.worker.unref();
    idle.push(t);
  } else void t.worker.terminate();
}

/** Whether a layer of `sizeHint` bytes (its blob's size, when known) is unpacked on a thread. */
export function unpackOnThreadFor(ops: StorageOps, sizeHint: number | undefined): boolean {
  return ops.unpackThreads === true && sizeHint !== undefined && sizeHint >= UNPACK_THREAD_FROM;
}

/**
 * Unpack the layer tarball `source` into `dir` on a worker thread. `source` is iterated, or (a
 * producer) writes into the ring itself through a sink that copies each chunk in as it comes.
 * An error of the source (a digest mismatch, a dropped download) fails the worker's unpacking
 * too, and is what this throws.
 */
export async function unpackOnThread(
  source: AsyncIterable<Buffer> | LayerProducer,
  dir: string,
): Promise<UnpackedLayer> {
  const t = takeThread();
  const data = new Uint8Array(t.ring);
  const ctrl = new BigInt64Array(t.ctrl);
  let crashed: Error | undefined;
  let onMessage: (m: UnpackAnswer) => void = () => undefined;
  let onError: (err: Error) => void = () => undefined;
  let onExit: (code: number) => void = () => undefined;
  const answer = new Promise<UnpackAnswer>((resolve, reject) => {
    onMessage = resolve;
    onError = (err) => {
      crashed ??= err;
      reject(crashed);
    };
    onExit = (code) => {
      crashed ??= new Error(`the unpacking thread exited (${code})`);
      reject(crashed);
    };
  });
  answer.catch(() => undefined);
  t.worker.once('message', onMessage);
  t.worker.once('error', onError);
  t.worker.once('exit', onExit);
  const unlisten = () => {
    t.worker.off('message', onMessage);
    t.worker.off('error', onError);
    t.worker.off('exit', onExit);
  };
  const job: UnpackJob = { dir, ring: t.ring, ctrl: t.ctrl };
  t.worker.postMessage(job);

  let written = 0;
  const workerDone = () => crashed !== undefined || Atomics.load(ctrl, CTRL_DONE) !== 0n;
  const free = () => RING - (written - Number(Atomics.load(ctrl, CTRL_READ)));
  /** Copy as much of `chunk` as the ring has room for; the bytes copied. */
  const copyIn = (chunk: Uint8Array): number => {
    let off = 0;
    for (let room = free(); off < chunk.length && room > 0; room = free()) {
      const at = written % RING;
      const n = Math.min(room, chunk.length - off, RING - at);
      data.set(chunk.subarray(off, off + n), at);
      off += n;
      written += n;
      Atomics.store(ctrl, CTRL_WRITTEN, BigInt(written));
      Atomics.add(ctrl, CTRL_SEQ, 1n);
      Atomics.notify(ctrl, CTRL_SEQ);
    }
    return off;
  };
  /** Wait until the ring has `need` bytes free (or the worker moved on, or a second passed). */
  const taken = async (need: number) => {
    const read = Atomics.load(ctrl, CTRL_READ);
    if (RING - (written - Number(read)) >= need) return;
    const w = (Atomics as unknown as AtomicsWaitAsync).waitAsync(ctrl, CTRL_READ, read, 1000);
    if (w.async) await w.value;
  };
  /** Copy a chunk into the ring (waiting for room); false once the worker stopped taking input. */
  const put = async (chunk: Buffer): Promise<boolean> => {
    for (let off = 0; off < chunk.length; ) {
      if (workerDone()) return false;
      off += copyIn(chunk.subarray(off));
      if (off < chunk.length) await taken(1);
    }
    return true;
  };
  // a producer's sink: what does not fit is kept (copied) until `room`, which waits for 1 MiB free
  const stop = new Error('the unpacking stopped');
  let pending: Buffer | undefined;
  const sink: ByteSink = {
    write(chunk) {
      if (workerDone()) return false;
      if (pending) {
        pending = Buffer.concat([pending, chunk]);
        return false;
      }
      const n = copyIn(chunk);
      if (n < chunk.length) {
        pending = Buffer.from(chunk.subarray(n));
        return false;
      }
      return free() >= ROOM;
    },
    async room() {
      for (;;) {
        if (workerDone()) throw stop;
        if (pending) {
          const n = copyIn(pending);
          pending = n < pending.length ? pending.subarray(n) : undefined;
        }
        if (!pending && free() >= ROOM) return;
        await taken(pending ? 1 : ROOM);
      }
    },
  };
  const signalEnd = (how: 1n | 2n) => {
    Atomics.store(ctrl, CTRL_END, how);
    Atomics.add(ctrl, CTRL_SEQ, 1n);
    Atomics.notify(ctrl, CTRL_SEQ);
  };

  let sourceError: unknown;
  let stopped = false;
  try {
    if (isLayerProducer(source)) {
      await source.produce(sink);
      await sink.room(); // what the last write left over
    } else {
      const it = source[Symbol.asyncIterator]();
      while (!stopped) {
        const r = await it.next();
        if (r.done) break;
        if (!(await put(r.value))) stopped = true;
      }
      // the worker gave up first (a hostile member, tar failed): stop reading the input
      if (stopped) await it.return?.(undefined).catch(() => undefined);
    }
    signalEnd(stopped ? 2n : 1n);
  } catch (err) {
    if (err === stop) stopped = true;
    else sourceError = err;
    signalEnd(2n);
  }

  let reply: UnpackAnswer;
  try {
    reply = await answer;
  } catch (err) {
    void t.worker.terminate();
    throw sourceError ?? err;
  } finally {
    unlisten();
  }
  giveBack(t);
  if (sourceError !== undefined) throw sourceError;
  if (!reply.ok) throw reply.kind ? new BerthError(reply.kind, reply.message) : new Error(reply.message);
  return {
    ...reply.layer,
    ...(reply.tarSplit ? { tarSplit: Buffer.from(reply.tarSplit) } : {}),
  };
}
