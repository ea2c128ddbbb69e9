import type { FileHandle } from 'node:fs/promises';

const NL = 0x0a;
const block = 64 * 1024;

/**
 * The whole lines of a file from the last one backwards, each with the offset where it starts.
 * Bytes after the last newline (a line being written) are skipped.
 */
export async function* linesBackward(
  handle: FileHandle,
  size: number,
): AsyncGenerator<{ line: Buffer; start: number }> {
  let pos = size;
  let acc: Buffer = Buffer.alloc(0);
  let haveEnd = false;
  for (;;) {
    if (!haveEnd) {
      const i = acc.lastIndexOf(NL);
      if (i >= 0) {
        haveEnd = true;
        acc = acc.subarray(0, i + 1);
      }
    }
    if (haveEnd) {
      for (;;) {
        const j = acc.length >= 2 ? acc.lastIndexOf(NL, acc.length - 2) : -1;
        if (j >= 0) {
          yield { line: acc.subarray(j + 1), start: pos + j + 1 };
          acc = acc.subarray(0, j + 1);
          continue;
        }
        if (pos === 0) {
          if (acc.length > 0) yield { line: acc, start: 0 };
          return;
        }
        break;
      }
    }
    if (pos === 0) return;
    const start = Math.max(0, pos - block);
    const buf = Buffer.allocUnsafe(pos - start);
    await handle.read(buf, 0, buf.length, start);
    acc = acc.length > 0 ? Buffer.concat([buf, acc]) : buf;
    pos = start;
  }
}
