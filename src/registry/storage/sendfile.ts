import { open } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';

const CHUNK = 512 * 1024;
const RING = 4;

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
): Promise<void> {
  const handle = await open(path, 'r');
  const free: Buffer[] = [];
  let allocated = 0;
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
        if (allocated < RING) {
          buf = Buffer.allocUnsafeSlow(CHUNK);
          allocated++;
        } else {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          continue;
        }
      }
      const { bytesRead } = await handle.read(buf, 0, Math.min(CHUNK, stop - pos), pos);
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
    if (!closed) res.end();
  } finally {
    res.off('close', onClose);
    await handle.close();
  }
}
