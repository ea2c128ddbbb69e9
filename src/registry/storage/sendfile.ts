import { closeSync, openSync, read, readSync } from 'node:fs';
import type { ServerResponse } from 'node:http';

const CHUNK = 1024 * 1024;
const RING = 4;
/**
 * A synchronous read slower than this probably came from the disk, not the page cache (or the
 * process was preempted: a loaded machine makes single slow reads, hence SLOW_READS in a row).
 */
const SLOW_READ_MS = 4;
const SLOW_READS = 3;

/**
 * A file's bytes, read synchronously while they come from the page cache (a read is a memcpy:
 * half the CPU of a read handed to the threadpool and back, measured on a 256 MiB blob GET),
 * and through the threadpool once SLOW_READS reads in a row took longer than SLOW_READ_MS (the
 * disk: the event loop must not wait for it).
 */
class FileReader {
  private slow = 0;
  private inThreadpool = false;
  private constructor(
    private readonly fd: number,
    private readonly slowReadMs: number,
  ) {}

  static open(path: string, slowReadMs: number): FileReader {
    return new FileReader(openSync(path, 'r'), slowReadMs);
  }

  /** Whether reads go through the threadpool now. */
  get threaded(): boolean {
    return this.inThreadpool;
  }

  /**
   * Reads go on with the same descriptor in the threadpool: never a second open by path, which
   * could fail (or find another file) once the file was renamed or removed meanwhile (a proxied
   * blob's temporary file is moved into place while clients read it).
   */
  async read(buf: Buffer, length: number, position: number): Promise<number> {
    if (this.inThreadpool) return readInThreadpool(this.fd, buf, length, position);
    const t0 = performance.now();
    const n = readSync(this.fd, buf, 0, length, position);
    this.slow = performance.now() - t0 > this.slowReadMs ? this.slow + 1 : 0;
    if (this.slow >= SLOW_READS) this.inThreadpool = true;
    return n;
  }

  async close(): Promise<void> {
    closeSync(this.fd);
  }
}

function readInThreadpool(fd: number, buf: Buffer, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => {
    read(fd, buf, 0, length, position, (err, bytesRead) => (err ? reject(err) : resolve(bytesRead)));
  });
}

/**
 * The reusable buffers of one response: at most RING of `size` bytes, each back in `free` once
 * the socket has taken it. A caller that sends one file in several ranges (the proxy, as a blob
 * arrives) passes the same ring to every call, so nothing is allocated per range.
 */
export class BufferRing {
  readonly free: Buffer[] = [];
  allocated = 0;
  /** The call waiting for a buffer (the ring's, not a call's: a buffer written by an earlier
   * call on the same ring comes back after that call returned, and must wake the current one). */
  private waiter: (() => void) | undefined;
  constructor(readonly size = CHUNK) {}

  /** A buffer the socket has taken is free again. */
  release(b: Buffer): void {
    this.free.push(b);
    this.wakeUp();
  }

  wakeUp(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** Until a buffer comes back (or wakeUp). */
  waitForBuffer(): Promise<void> {
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }
}

/**
 * Send bytes [start, end] of a local file to a response, as fast as Node can without sendfile(2):
 * a small ring of reusable buffers, each refilled as soon as the socket has taken it, so reading
 * the next chunk overlaps writing the previous ones and no buffer is allocated per chunk.
 */
export async function sendFileRange(
  res: ServerResponse,
  path: string,
  start: number,
  end: number,
  options: {
    chunk?: number;
    slowReadMs?: number;
    onThreaded?: (position: number) => void;
    /** false: leave the response open after the range (more is sent later). */
    end?: boolean;
    /** The buffers to use (and leave for the next range); else a ring for this call. */
    ring?: BufferRing;
  } = {},
): Promise<void> {
  const ring = options.ring ?? new BufferRing(Math.min(options.chunk ?? CHUNK, end + 1 - start));
  const file = FileReader.open(path, options.slowReadMs ?? SLOW_READ_MS);
  const free = ring.free;
  let closed = false;
  const onClose = () => {
    closed = true;
    ring.wakeUp();
  };
  res.once('close', onClose);
  try {
    let pos = start;
    const stop = end + 1;
    while (pos < stop && !closed) {
      let buf = free.pop();
      if (!buf) {
        if (ring.allocated < RING) {
          buf = Buffer.allocUnsafeSlow(ring.size);
          ring.allocated++;
        } else {
          await ring.waitForBuffer();
          continue;
        }
      }
      const threaded = file.threaded;
      const bytesRead = await file.read(buf, Math.min(buf.length, stop - pos), pos);
      if (!threaded && file.threaded) options.onThreaded?.(pos);
      if (bytesRead === 0) {
        // The file is shorter than its size said: the answer cannot be completed.
        res.destroy(new Error(`${path} ended at ${pos}, expected ${stop}`));
        return;
      }
      pos += bytesRead;
      const b = buf;
      res.write(bytesRead === b.length ? b : b.subarray(0, bytesRead), () => ring.release(b));
    }
    if (closed) return;
    if (options.end === false) {
      // The last writes are taken before more is sent (the caller may reuse nothing of ours, but
      // its next range must not overtake these buffers' bytes: writes keep their order anyway).
      if (res.writableNeedDrain) await drained(res);
    } else res.end();
  } finally {
    res.off('close', onClose);
    await file.close();
  }
}

/** Until the response takes more data, or is gone. */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
