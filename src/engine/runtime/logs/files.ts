import { fstatSync } from 'node:fs';
import { type FileHandle, open, stat } from 'node:fs/promises';
import { errnoCode } from '../../../common/errors.js';
import { openDecompressed } from './compress.js';

/** Most rotated files looked for (path.1 .. path.N). */
export const maxRotated = 1000;

/** One file of a log: the log itself, a rotated one (`path.N`) or a compressed one (`path.N.gz`). */
export interface LogFile {
  path: string;
  gz: boolean;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/**
 * The files of the log at `path`, oldest first: `path.N` .. `path.1` (each plain or `.gz`, the
 * plain one when both are there: its compression has not finished), then `path`.
 */
export async function logFiles(path: string): Promise<LogFile[]> {
  const rotated: LogFile[] = [];
  for (let i = 1; i <= maxRotated; i++) {
    if (await exists(`${path}.${i}`)) rotated.push({ path: `${path}.${i}`, gz: false });
    else if (await exists(`${path}.${i}.gz`)) rotated.push({ path: `${path}.${i}.gz`, gz: true });
    else break;
  }
  return [...rotated.reverse(), { path, gz: false }];
}

export async function openIfExists(path: string): Promise<FileHandle | null> {
  try {
    return await open(path, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * The files of a log, opened when first asked for (compressed ones decompressed then) and kept
 * open until `close()`: the tail scan and the reader share them.
 */
export class LogFileSet {
  private readonly handles = new Map<number, Promise<FileHandle | null>>();

  constructor(readonly files: LogFile[]) {}

  static async of(path: string): Promise<LogFileSet> {
    return new LogFileSet(await logFiles(path));
  }

  get length(): number {
    return this.files.length;
  }

  /** File `i` open for reading; null when it is gone. */
  handle(i: number): Promise<FileHandle | null> {
    let h = this.handles.get(i);
    if (!h) {
      const f = this.files[i]!;
      // a rotated file may have been compressed (or rotated away) since it was listed
      h = f.gz
        ? openDecompressed(f.path)
        : openIfExists(f.path).then((fh) =>
            fh || i === this.files.length - 1 ? fh : openDecompressed(`${f.path}.gz`).catch(() => null),
          );
      this.handles.set(i, h);
    }
    return h;
  }

  /** Hand file `i` over to the caller (it closes it). */
  take(i: number): Promise<FileHandle | null> {
    const h = this.handle(i);
    this.handles.delete(i);
    return h;
  }

  async close(): Promise<void> {
    const all = [...this.handles.values()];
    this.handles.clear();
    for (const h of all) await (await h.catch(() => null))?.close().catch(() => undefined);
  }
}

const NL = 0x0a;

/**
 * Reads whole lines (each with its newline) of an open file from an offset, in large chunks, the
 * next chunk read ahead while the caller works on this one. A last line without its newline yet
 * stays buffered (the writer is mid-line) until more arrives.
 */
const NOTHING = Buffer.alloc(0);

/** What LineReader reads from: a FileHandle, or a LogFd (opened and closed at once). */
export interface ReadableLogFile {
  readonly fd: number;
  read(buf: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  close(): Promise<void>;
}

export class LineReader<F extends ReadableLogFile = FileHandle> {
  private rest: Buffer | null = null;
  private ahead: Promise<Buffer> | null = null;

  constructor(
    readonly handle: F,
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
    const at = this.offset;
    // what the file holds beyond the offset now (one fstat, at once): nothing to read, the usual
    // case of a follower woken for nothing new, costs neither a buffer nor a thread-pool read
    let size: number;
    try {
      size = fstatSync(this.handle.fd).size;
    } catch {
      size = Number.POSITIVE_INFINITY; // let the read answer
    }
    const want = Math.min(this.chunkSize, size - at);
    if (want <= 0) return Promise.resolve(NOTHING);
    const buf = Buffer.allocUnsafe(want);
    return this.handle.read(buf, 0, want, at).then(({ bytesRead }) => {
      this.offset = at + bytesRead;
      return buf.subarray(0, bytesRead);
    });
  }

  /**
   * The next whole lines from the current offset, in blocks of lines (views into what was read; a
   * line cut by the end of a read comes joined, in a block of its own); an empty array at the end
   * of the file as it is now (then nothing is read ahead, so a later call sees what was appended
   * meanwhile).
   */
  async nextBlocks(): Promise<Buffer[]> {
    for (;;) {
      const chunk = await (this.ahead ?? this.read());
      this.ahead = null;
      if (chunk.length === 0) return [];
      if (chunk.length === this.chunkSize) this.ahead = this.read();
      const out: Buffer[] = [];
      let start = 0;
      const last = chunk.lastIndexOf(NL);
      if (last >= 0) {
        if (this.rest) {
          const nl = chunk.indexOf(NL);
          out.push(Buffer.concat([this.rest, chunk.subarray(0, nl + 1)]));
          this.rest = null;
          start = nl + 1;
        }
        if (start <= last) out.push(chunk.subarray(start, last + 1));
        start = last + 1;
      }
      if (start < chunk.length) {
        const tail = chunk.subarray(start);
        this.rest = this.rest ? Buffer.concat([this.rest, tail]) : Buffer.from(tail);
      }
      if (out.length > 0 || !this.ahead) return out;
    }
  }

  /** nextBlocks() cut into lines, each with its newline. */
  async next(): Promise<Buffer[]> {
    const out: Buffer[] = [];
    for (const block of await this.nextBlocks()) {
      let start = 0;
      for (let nl = block.indexOf(NL); nl >= 0; nl = block.indexOf(NL, start)) {
        out.push(block.subarray(start, nl + 1));
        start = nl + 1;
      }
    }
    return out;
  }

  async close(): Promise<void> {
    await this.ahead?.catch(() => undefined);
    this.ahead = null;
    await this.handle.close();
  }
}
