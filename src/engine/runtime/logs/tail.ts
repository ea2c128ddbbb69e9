import type { LogFileSet } from './files.js';

/** Where reading starts: a file of the list and a byte offset in it. */
export interface LogPosition {
  file: number;
  offset: number;
}

const NL = 0x0a;
const block = 64 * 1024;

/**
 * The position of the first of the last `n` entries of a json-file log (its files oldest first),
 * found by counting newlines backwards from the end: every line is one entry, as docker's tail
 * counts them; bytes after the last newline (an entry being written) are not one yet. Reads only
 * the blocks it needs.
 */
export async function findTail(files: LogFileSet, n: number): Promise<LogPosition> {
  let need = n;
  for (let f = files.length - 1; f >= 0; f--) {
    const handle = await files.handle(f);
    if (!handle) continue;
    let pos = (await handle.stat()).size;
    // newlines seen in this file; the (need+1)-th from the end ends the line before the ones taken
    let seen = 0;
    while (pos > 0) {
      const start = Math.max(0, pos - block);
      const buf = Buffer.allocUnsafe(pos - start);
      const { bytesRead } = await handle.read(buf, 0, buf.length, start);
      if (bytesRead === 0) break;
      let i = buf.lastIndexOf(NL, bytesRead - 1);
      while (i >= 0) {
        if (++seen === need + 1) return { file: f, offset: start + i + 1 };
        i = i > 0 ? buf.lastIndexOf(NL, i - 1) : -1;
      }
      pos = start;
    }
    if (seen === need) return { file: f, offset: 0 };
    need -= seen;
  }
  return { file: 0, offset: 0 };
}
