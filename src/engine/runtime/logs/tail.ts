import { type FileHandle, open } from 'node:fs/promises';
import { errnoCode } from '../../../common/errors.js';
import { isFinalRecord } from './k8s-file.js';

/** Where reading starts: a file of the list and a byte offset in it. */
export interface LogPosition {
  file: number;
  offset: number;
}

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

/**
 * The position of the first of the last `n` messages of the log files (oldest first), found by
 * reading backwards from the end: a message is a run of P records ended by an F record; a run of P
 * records at the very end (a line not finished yet) counts as one. Reads only what it needs.
 */
export async function findTail(files: string[], n: number): Promise<LogPosition> {
  let ends = 0;
  let first = true;
  for (let f = files.length - 1; f >= 0; f--) {
    let handle: FileHandle;
    try {
      handle = await open(files[f]!, 'r');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') continue;
      throw err;
    }
    try {
      const size = (await handle.stat()).size;
      for await (const { line, start } of linesBackward(handle, size)) {
        if (n <= 0) return { file: f, offset: start + line.length };
        const final = isFinalRecord(line);
        if (final === null) continue;
        if (first) {
          first = false;
          if (!final) ends = 1; // an unfinished line at the end is a message of its own
        }
        if (final) {
          if (ends >= n) return { file: f, offset: start + line.length };
          ends++;
        }
      }
      if (n <= 0) return { file: f, offset: 0 };
    } finally {
      await handle.close();
    }
  }
  return { file: 0, offset: 0 };
}
