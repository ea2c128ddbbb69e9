import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';

/**
 * SHA-256 of a stream taken on a worker thread, so that hashing a large layer (about 2 ms per MiB
 * here) does not hold the event loop that feeds tar and the network. Chunks are copied into a
 * ring of shared memory the thread reads from (one memcpy, no allocation, no message per chunk).
 * Small inputs are hashed in place: only a stream that outgrows `inlineBytes` moves to a thread
 * (a hash state cannot move, so the thread starts over from the chunks kept so far).
 *
 * Control words (BigInt64 in shared memory): 0 bytes written, 1 bytes hashed, 2 done flag,
 * 3 a sequence number the writer bumps after each change (what the thread waits on).
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
parentPort.on('message', ({ ring, ctrl }) => {
  const data = new Uint8Array(ring);
  const c = new BigInt64Array(ctrl);
  const size = data.length;
  const hash = createHash('sha256');
  let read = 0;
  for (;;) {
    const seq = Atomics.load(c, 3);
    const written = Number(Atomics.load(c, 0));
    if (written > read) {
      while (read < written) {
        const at = read % size;
        const n = Math.min(written - read, size - at);
        hash.update(data.subarray(at, at + n));
        read += n;
      }
      Atomics.store(c, 1, BigInt(read));
      Atomics.notify(c, 1);
      continue;
    }
    // done: but bytes stored between the count read above and the flag are still to hash
    if (Atomics.load(c, 2) === 1n) {
      if (Number(Atomics.load(c, 0)) > read) continue;
      break;
    }
    Atomics.wait(c, 3, seq);
  }
  parentPort.postMessage(hash.digest('hex'));
});
`;

const RING = 16 * 1024 * 1024;

/** ES2024's Atomics.waitAsync (in Node 20; not in this project's TypeScript lib). */
export interface AtomicsWaitAsync {
  waitAsync(
    array: BigInt64Array,
    index: number,
    value: bigint,
    timeout?: number,
  ): { async: false; value: string } | { async: true; value: Promise<string> };
}

interface HashThread {
  worker: Worker;
  ring: SharedArrayBuffer;
  ctrl: SharedArrayBuffer;
}

/** Idle threads kept for the next hash (a pull unpacks a few layers side by side). */
const idle: HashThread[] = [];
const MAX_IDLE = 4;

function takeThread(): HashThread {
  const t = idle.pop() ?? {
    worker: new Worker(WORKER_SOURCE, { eval: true }),
    ring: new SharedArrayBuffer(RING),
    ctrl: new SharedArrayBuffer(4 * 8),
  };
  t.worker.ref(); // unref'd only while idle, so that a pending digest keeps the process alive
  new BigInt64Array(t.ctrl).fill(0n);
  t.worker.postMessage({ ring: t.ring, ctrl: t.ctrl });
  return t;
}

export class ThreadedSha256 {
  private local = createHash('sha256');
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private thread: HashThread | undefined;
  private data: Uint8Array | undefined;
  private ctrl: BigInt64Array | undefined;
  private written = 0;
  private failed: Error | undefined;
  private readonly onError = (err: Error) => {
    this.failed = err;
  };

  /** `inlineBytes`: Infinity hashes in place whatever the size (a caller already on a worker). */
  constructor(private readonly inlineBytes = 8 * 1024 * 1024) {}

  /** Take a chunk; a promise when the ring is full (await it before the next chunk). */
  update(chunk: Buffer): Promise<void> | undefined {
    if (this.thread) return this.put(chunk);
    this.local.update(chunk);
    if (this.inlineBytes === Number.POSITIVE_INFINITY) return undefined;
    this.kept.push(chunk);
    this.keptBytes += chunk.length;
    if (this.keptBytes <= this.inlineBytes) return undefined;
    const t = takeThread();
    t.worker.on('error', this.onError);
    this.thread = t;
    this.data = new Uint8Array(t.ring);
    this.ctrl = new BigInt64Array(t.ctrl);
    const kept = this.kept;
    this.kept = [];
    return (async () => {
      for (const c of kept) await this.put(c);
    })();
  }

  private async put(chunk: Buffer): Promise<void> {
    const data = this.data as Uint8Array;
    const ctrl = this.ctrl as BigInt64Array;
    let off = 0;
    while (off < chunk.length) {
      if (this.failed) throw this.failed;
      const read = Number(Atomics.load(ctrl, 1));
      const free = RING - (this.written - read);
      if (free === 0) {
        const w = (Atomics as unknown as AtomicsWaitAsync).waitAsync(ctrl, 1, BigInt(read), 1000);
        if (w.async) await w.value;
        continue;
      }
      const at = this.written % RING;
      const n = Math.min(free, chunk.length - off, RING - at);
      data.set(chunk.subarray(off, off + n), at);
      off += n;
      this.written += n;
      Atomics.store(ctrl, 0, BigInt(this.written));
      Atomics.add(ctrl, 3, 1n);
      Atomics.notify(ctrl, 3);
    }
  }

  /** The digest, `sha256:<hex>`; the thread goes back to the idle ones. */
  async digest(): Promise<string> {
    const t = this.thread;
    if (!t) {
      this.kept = [];
      return `sha256:${this.local.digest('hex')}`;
    }
    this.thread = undefined;
    const ctrl = this.ctrl as BigInt64Array;
    try {
      const hex = await new Promise<string>((resolve, reject) => {
        if (this.failed) return reject(this.failed);
        t.worker.once('message', (m: string) => resolve(m));
        t.worker.once('error', reject);
        Atomics.store(ctrl, 2, 1n);
        Atomics.add(ctrl, 3, 1n);
        Atomics.notify(ctrl, 3);
      });
      t.worker.removeAllListeners('error');
      if (idle.length < MAX_IDLE) {
        t.worker.unref();
        idle.push(t);
      } else void t.worker.terminate();
      return `sha256:${hex}`;
    } catch (err) {
      void t.worker.terminate();
      throw err;
    }
  }

  /** Give up (a failed apply): the thread is ended, nothing is kept. */
  dispose(): void {
    this.kept = [];
    const t = this.thread;
    this.thread = undefined;
    if (t) void t.worker.terminate();
  }
}
