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
 * Reads whole lines (each with its newline) of an open file from an offset, in large chunks, the
 * next chunk read ahead while the caller works on this one. A last line without its newline yet
 * stays buffered (the writer is mid-line) until more arrives.
 */
export class LineReader {
  private rest: Buffer | null = null;
  private ahead: Promise<Buffer> | null = null;

  constructor(
    readonly handle: FileHandle,
    /** Offset of the next byte to read. */
    public offset: number,
    private readonly chunkSize = 1 << 20,
  ) {}

  /** Forget a held-back line and what was read ahead (the file was truncated). */
  async reset(offset: number): Promise<void> {
    await this.ahead?.catch(() => undefined);
    this.ahead = null;
    this.rest = null;
    this.offset = offset;
  }

  private read(): Promise<Buffer> {
    const buf = Buffer.allocUnsafe(this.chunkSize);
    const at = this.offset;
    return this.handle.read(buf, 0, this.chunkSize, at).then(({ bytesRead }) => {
      this.offset = at + bytesRead;
      return buf.subarray(0, bytesRead);
    });
  }

  /**
   * The next whole lines from the current offset; an empty array at the end of the file as it is
   * now (then nothing is read ahead, so a later call sees what was appended meanwhile).
   */
  async next(): Promise<Buffer[]> {
    const out: Buffer[] = [];
    while (out.length === 0) {
      const chunk = await (this.ahead ?? this.read());
      this.ahead = null;
      if (chunk.length === 0) return out;
      if (chunk.length === this.chunkSize) this.ahead = this.read();
      let start = 0;
      let nl = chunk.indexOf(NL);
      if (nl >= 0 && this.rest) {
        out.push(Buffer.concat([this.rest, chunk.subarray(0, nl + 1)]));
        this.rest = null;
        start = nl + 1;
        nl = chunk.indexOf(NL, start);
      }
      while (nl >= 0) {
        out.push(chunk.subarray(start, nl + 1));
        start = nl + 1;
        nl = chunk.indexOf(NL, start);
      }
      if (start < chunk.length) {
        const tail = chunk.subarray(start);
        this.rest = this.rest ? Buffer.concat([this.rest, tail]) : Buffer.from(tail);
      }
      if (!this.ahead && out.length === 0) return out;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.ahead?.catch(() => undefined);
    this.ahead = null;
    await this.handle.close();
  }
}
