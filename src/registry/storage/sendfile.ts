import { closeSync, openSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';
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
  private handle: Awaited<ReturnType<typeof open>> | undefined;
  private slow = 0;
  private constructor(
    private readonly path: string,
    private fd: number,
    private readonly slowReadMs: number,
  ) {}

  static open(path: string, slowReadMs: number): FileReader {
    return new FileReader(path, openSync(path, 'r'), slowReadMs);
  }

  /** Whether reads go through the threadpool now. */
  get threaded(): boolean {
    return this.handle !== undefined;
  }

  async read(buf: Buffer, length: number, position: number): Promise<number> {
    if (this.handle) return (await this.handle.read(buf, 0, length, position)).bytesRead;
    const t0 = performance.now();
    const n = readSync(this.fd, buf, 0, length, position);
    this.slow = performance.now() - t0 > this.slowReadMs ? this.slow + 1 : 0;
    if (this.slow >= SLOW_READS) {
      closeSync(this.fd);
      this.fd = -1;
      this.handle = await open(this.path, 'r');
    }
    return n;
  }

  async close(): Promise<void> {
    if (this.handle) await this.handle.close();
    else if (this.fd >= 0) closeSync(this.fd);
  }
}

/**
 * The reusable buffers of one response: at most RING of `size` bytes, each back in `free` once
 * the socket has taken it. A caller that sends one file in several ranges (the proxy, as a blob
 * arrives) passes the same ring to every call, so nothing is allocated per range.
 */
export class BufferRing {
  readonly free: Buffer[] = [];
  allocated = 0;
  constructor(readonly size = CHUNK) {}
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
  let wake: (() => void) | undefined;
  let closed = false;
  const onClose = () => {
    closed = true;
    const w = wake;
    wake = undefined;
    w?.();
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
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
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
      res.write(bytesRead === b.length ? b : b.subarray(0, bytesRead), () => {
        free.push(b);
        const w = wake;
        wake = undefined;
        w?.();
      });
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
