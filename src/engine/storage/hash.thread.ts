import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';

/**
 * SHA-256 of a stream taken on a worker thread, so that hashing a large layer (about 2 ms per MiB
 * here) does not hold the event loop that feeds tar and the network. Chunks are copied into
 * transferred buffers (a memcpy, far cheaper than the hash). Small inputs are hashed in place:
 * the first `inlineBytes` go to a local hash and only a stream that outgrows them moves to a
 * thread (its state cannot move, so the thread starts over from the chunks kept so far).
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
let hash = createHash('sha256');
parentPort.on('message', (m) => {
  if (m === null) {
    parentPort.postMessage(hash.digest('hex'));
    hash = createHash('sha256');
  } else hash.update(new Uint8Array(m));
});
`;

/** Idle threads kept for the next hash (a pull unpacks a few layers side by side). */
const idle: Worker[] = [];
const MAX_IDLE = 4;

function takeWorker(): Worker {
  const w = idle.pop() ?? new Worker(WORKER_SOURCE, { eval: true });
  w.ref(); // unref'd only while idle, so that a pending digest keeps the process alive
  return w;
}

function copyOf(chunk: Buffer): ArrayBuffer {
  const ab = new ArrayBuffer(chunk.length);
  new Uint8Array(ab).set(chunk);
  return ab;
}

export class ThreadedSha256 {
  private local = createHash('sha256');
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private worker: Worker | undefined;
  private failed: Error | undefined;
  private readonly onError = (err: Error) => {
    this.failed = err;
  };

  constructor(private readonly inlineBytes = 8 * 1024 * 1024) {}

  update(chunk: Buffer): void {
    if (this.worker) {
      const ab = copyOf(chunk);
      this.worker.postMessage(ab, [ab]);
      return;
    }
    this.local.update(chunk);
    this.kept.push(chunk);
    this.keptBytes += chunk.length;
    if (this.keptBytes > this.inlineBytes) {
      const w = takeWorker();
      w.on('error', this.onError);
      for (const c of this.kept) {
        const ab = copyOf(c);
        w.postMessage(ab, [ab]);
      }
      this.kept = [];
      this.worker = w;
    }
  }

  /** The digest, `sha256:<hex>`. Hand the thread back (or end it) once done. */
  async digest(): Promise<string> {
    const w = this.worker;
    if (!w) {
      this.kept = [];
      return `sha256:${this.local.digest('hex')}`;
    }
    this.worker = undefined;
    try {
      const hex = await new Promise<string>((resolve, reject) => {
        if (this.failed) return reject(this.failed);
        w.once('message', (m: string) => resolve(m));
        w.once('error', reject);
        w.postMessage(null);
      });
      w.off('error', this.onError);
      w.removeAllListeners('error');
      if (idle.length < MAX_IDLE) {
        w.unref();
        idle.push(w);
      } else void w.terminate();
      return `sha256:${hex}`;
    } catch (err) {
      void w.terminate();
      throw err;
    }
  }

  /** Give up (a failed apply): the thread is ended, nothing is kept. */
  dispose(): void {
    this.kept = [];
    const w = this.worker;
    this.worker = undefined;
    if (w) void w.terminate();
  }
}
