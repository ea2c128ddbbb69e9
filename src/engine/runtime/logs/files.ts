import { type FileHandle, open, stat } from 'node:fs/promises';
import { errnoCode } from '../../../common/errors.js';

/** Most rotated files looked for (path.1 .. path.N). */
export const maxRotated = 1000;

/** The log files of `path`, oldest first: `path.N` .. `path.1`, then `path` (only those that exist). */
export async function logFiles(path: string): Promise<string[]> {
  const rotated: string[] = [];
  for (let i = 1; i <= maxRotated; i++) {
    try {
      await stat(`${path}.${i}`);
      rotated.push(`${path}.${i}`);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') break;
      throw err;
    }
  }
  return [...rotated.reverse(), path];
}

export async function openIfExists(path: string): Promise<FileHandle | null> {
  try {
    return await open(path, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw err;
  }
}

const NL = 0x0a;

/**
 * Reads lines (each with its newline) of an open file from an offset, in large chunks. A last line
 * without its newline yet stays buffered (the writer is mid-line) until more arrives.
 */
export class LineReader {
  private rest: Buffer | null = null;

  constructor(
    readonly handle: FileHandle,
    /** Offset of the next byte to read. */
    public offset: number,
    private readonly chunkSize = 1 << 20,
  ) {}

  /** Bytes of a started line held back (for the position of the next whole line). */
  get pending(): number {
    return this.rest?.length ?? 0;
  }

  /** Forget a held-back line (the file was truncated). */
  reset(offset: number): void {
    this.rest = null;
    this.offset = offset;
  }

  /** Every whole line from the current offset to the end of the file as it is now. */
  async *lines(): AsyncGenerator<Buffer> {
    for (;;) {
      const buf = Buffer.allocUnsafe(this.chunkSize);
      const { bytesRead } = await this.handle.read(buf, 0, this.chunkSize, this.offset);
      if (bytesRead === 0) return;
      this.offset += bytesRead;
      const chunk = buf.subarray(0, bytesRead);
      let start = 0;
      let nl = chunk.indexOf(NL);
      if (nl >= 0 && this.rest) {
        yield Buffer.concat([this.rest, chunk.subarray(0, nl + 1)]);
        this.rest = null;
        start = nl + 1;
        nl = chunk.indexOf(NL, start);
      }
      while (nl >= 0) {
        yield chunk.subarray(start, nl + 1);
        start = nl + 1;
        nl = chunk.indexOf(NL, start);
      }
      if (start < chunk.length) {
        const tail = chunk.subarray(start);
        this.rest = this.rest ? Buffer.concat([this.rest, tail]) : Buffer.from(tail);
      }
      if (bytesRead < this.chunkSize) return;
    }
  }
}
