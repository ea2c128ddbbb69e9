import { parentPort } from 'node:worker_threads';
import { BerthError } from '../../common/errors.js';
import { HostStorageOps } from './adapters/host.ops.js';
import { type AtomicsWaitAsync, ThreadedSha256 } from './hash.thread.js';
import { detectCompression, unpackLayerTar } from './layer.apply.js';
import {
  CTRL_DONE,
  CTRL_END,
  CTRL_READ,
  CTRL_SEQ,
  CTRL_WRITTEN,
  type UnpackAnswer,
  type UnpackJob,
} from './unpack.thread.js';

/**
 * The unpacking thread (started by unpack.thread.ts): each job reads a layer's bytes from the
 * ring the engine's thread fills and unpacks them with the host's tools, exactly as in the
 * engine's thread (layer.apply.ts), the diff ID hashed here too.
 */

/** Read at most this much out of the ring at once: the decompressor's and tar's chunk size. */
const CHUNK = 1024 * 1024;

/**
 * The layer's bytes out of the ring. A compressed layer's chunks are lent: views of the ring,
 * whose room is given back when the next chunk is asked for (decompress() is done with a chunk
 * by then: layer.apply.ts), so nothing is allocated per chunk. A plain tar's chunks go on to
 * tar's stdin, which keeps them a while: those are copies.
 */
async function* fromRing(job: UnpackJob): AsyncGenerator<Buffer> {
  const data = new Uint8Array(job.ring);
  const c = new BigInt64Array(job.ctrl);
  const size = data.length;
  let read = 0;
  let lend: boolean | undefined;
  const giveBack = () => {
    Atomics.store(c, CTRL_READ, BigInt(read));
    Atomics.notify(c, CTRL_READ);
  };
  for (;;) {
    if (lend) giveBack(); // the chunk lent last is done with
    // the end flag before the count: the writer stores its last count before the flag
    const seq = Atomics.load(c, CTRL_SEQ);
    const end = Atomics.load(c, CTRL_END);
    const written = Number(Atomics.load(c, CTRL_WRITTEN));
    if (end === 2n) throw new Error('the layer input failed');
    // the compression is known from the first bytes (at the start of the ring)
    if (lend === undefined && (written >= 6 || end === 1n))
      lend = detectCompression(data.subarray(0, Math.min(written, 6))) !== 'none';
    if (lend !== undefined && written > read) {
      const at = read % size;
      const n = Math.min(written - read, size - at, CHUNK);
      read += n;
      if (lend) {
        yield Buffer.from(job.ring, at, n);
        continue;
      }
      const chunk = Buffer.allocUnsafeSlow(n);
      chunk.set(data.subarray(at, at + n));
      giveBack();
      yield chunk;
      continue;
    }
    if (end === 1n) return;
    const w = (Atomics as unknown as AtomicsWaitAsync).waitAsync(c, CTRL_SEQ, seq);
    if (w.async) await w.value;
  }
}

const ops = new HostStorageOps();

async function run(job: UnpackJob): Promise<void> {
  let reply: UnpackAnswer;
  const transfer: ArrayBuffer[] = [];
  try {
    const { tarSplit, ...layer } = await unpackLayerTar(
      fromRing(job),
      job.dir,
      ops,
      new ThreadedSha256(Number.POSITIVE_INFINITY),
    );
    const record = tarSplit ? new Uint8Array(tarSplit) : undefined;
    if (record) transfer.push(record.buffer as ArrayBuffer);
    reply = { ok: true, layer, ...(record ? { tarSplit: record } : {}) };
  } catch (err) {
    reply = {
      ok: false,
      ...(err instanceof BerthError ? { kind: err.kind } : {}),
      message: (err as Error).message,
    };
  }
  const c = new BigInt64Array(job.ctrl);
  Atomics.store(c, CTRL_DONE, 1n);
  Atomics.notify(c, CTRL_READ);
  parentPort?.postMessage(reply, transfer);
}

parentPort?.on('message', (job: UnpackJob) => {
  void run(job);
});
