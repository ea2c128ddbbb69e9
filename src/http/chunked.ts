import { invalidParameter } from '../common/errors.js';

/** The longest chunk-size line (with its extensions) and trailer line read, as Go's server. */
const MAX_LINE = 4096;
/** The most trailer bytes read after the last chunk. */
const MAX_TRAILER = 64 * 1024;

const malformed = (why: string) => invalidParameter(`malformed chunked encoding: ${why}`);

type State = 'size' | 'data' | 'cr' | 'lf' | 'trailer' | 'done';

/**
 * HTTP/1.1's chunked transfer coding (RFC 9112 §7.1) decoded as bytes arrive, with the reading of
 * Go's net/http (a chunk-size line ends with LF, trailing blanks and extensions dropped; the data
 * is followed by exactly CRLF; trailer fields read and dropped). Synchronous and without copies:
 * the data comes out as views of the buffers fed in. A framing error throws (an InvalidParameter,
 * the client's fault).
 */
export class ChunkedDecoder {
  private state: State = 'size';
  /** Bytes left of the current chunk's data. */
  private left = 0;
  /** The line being read (a chunk size or a trailer field), when it spans buffers. */
  private line = '';
  private trailerBytes = 0;
  /** What followed the body in the buffer that ended it (a view of that buffer). */
  rest: Buffer = Buffer.alloc(0);

  /** Whether the last chunk and the trailer have been read. */
  get done(): boolean {
    return this.state === 'done';
  }

  /** Whether the body may end here: nothing of a chunk or a line has been read yet. */
  get atChunkStart(): boolean {
    return this.state === 'size' && this.line === '';
  }

  /** The body's data in `buf`, as views of it; once `done`, what follows the body is `rest`. */
  feed(buf: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let i = 0;
    const n = buf.length;
    while (i < n && this.state !== 'done') {
      switch (this.state) {
        case 'data': {
          const take = Math.min(this.left, n - i);
          out.push(buf.subarray(i, i + take));
          i += take;
          this.left -= take;
          if (this.left === 0) this.state = 'cr';
          break;
        }
        case 'cr':
          if (buf[i] !== 0x0d) throw malformed('no CRLF after the chunk data');
          i++;
          this.state = 'lf';
          break;
        case 'lf':
          if (buf[i] !== 0x0a) throw malformed('no CRLF after the chunk data');
          i++;
          this.state = 'size';
          break;
        default: {
          // a line: a chunk size, or a trailer field
          const end = buf.indexOf(0x0a, i);
          const stop = end < 0 ? n : end;
          if (this.line.length + (stop - i) > MAX_LINE) throw malformed('line too long');
          this.line += buf.toString('latin1', i, stop);
          if (this.state === 'trailer') {
            this.trailerBytes += stop - i + 1;
            if (this.trailerBytes > MAX_TRAILER) throw malformed('trailer too large');
          }
          i = stop;
          if (end < 0) break;
          i++;
          const line = this.line;
          this.line = '';
          if (this.state === 'size') this.sizeLine(line);
          else if (line === '' || line === '\r') this.state = 'done';
          else if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+:/.test(line)) throw malformed('invalid trailer field');
        }
      }
    }
    if (this.state === 'done') this.rest = buf.subarray(i);
    return out;
  }

  private sizeLine(line: string): void {
    // the hex digits, up to an extension (`;`) or trailing blanks; Go's limit of 16 digits (past
    // 2^53 a length is no number here)
    let size = 0;
    let digits = 0;
    let i = 0;
    for (; i < line.length; i++) {
      const c = line.charCodeAt(i);
      const v =
        c >= 0x30 && c <= 0x39 ? c - 0x30 : (c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 ? (c | 0x20) - 0x57 : -1;
      if (v < 0) break;
      size = size * 16 + v;
      digits++;
    }
    if (!/^[ \t]*(?:;.*)?[ \t\r]*$/.test(line.slice(i))) throw malformed('invalid byte in chunk length');
    if (digits === 0) throw malformed('empty chunk size');
    if (digits > 16 || !Number.isSafeInteger(size)) throw malformed('chunk length too large');
    if (size === 0) {
      this.state = 'trailer';
      return;
    }
    this.left = size;
    this.state = 'data';
  }
}
