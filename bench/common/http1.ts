/**
 * Frames HTTP/1.1 responses in the bytes a raw client reads, incrementally: each byte is looked
 * at about once, so a large response (a list of 200 containers, sent in many chunks) costs the
 * client no more than a small one per byte. Bodies are counted, never kept or parsed:
 * Content-Length or chunked (ended at the first `\r\n0\r\n\r\n`, which a JSON body never
 * holds); none for HEAD, 204 and 304.
 */
export class ResponseFramer {
  private head: Buffer = Buffer.alloc(0);
  /** The current response once its head is read. */
  private body?: { status: number; left?: number; tail?: Buffer };

  constructor(private readonly isHead = false) {}

  /** Feed what was read; returns the statuses of the responses it completed. */
  push(chunk: Buffer): number[] {
    const done: number[] = [];
    let data = chunk;
    while (data.length) {
      if (!this.body) {
        this.head = this.head.length ? Buffer.concat([this.head, data]) : data;
        const end = this.head.indexOf('\r\n\r\n');
        if (end < 0) return done;
        const text = this.head.subarray(0, end).toString('latin1');
        data = this.head.subarray(end + 4);
        this.head = Buffer.alloc(0);
        const status = Number(text.slice(9, 12));
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(text);
        if (this.isHead || status === 204 || status === 304) this.body = { status, left: 0 };
        else if (length) this.body = { status, left: Number(length[1]) };
        else if (/\r\ntransfer-encoding:\s*chunked/i.test(text))
          this.body = { status, tail: Buffer.alloc(0) };
        else this.body = { status, left: 0 };
      }
      const b = this.body;
      if (b.left !== undefined) {
        const take = Math.min(b.left, data.length);
        b.left -= take;
        data = data.subarray(take);
        if (b.left > 0) return done;
      } else {
        // look for the terminator in the new bytes, with the last 6 of before (it may straddle)
        const tail = b.tail ?? Buffer.alloc(0);
        const window = tail.length ? Buffer.concat([tail, data]) : data;
        const term = window.indexOf('\r\n0\r\n\r\n');
        if (term < 0) {
          b.tail = window.subarray(Math.max(0, window.length - 6));
          return done;
        }
        data = window.subarray(term + 7);
      }
      done.push(b.status);
      this.body = undefined;
    }
    return done;
  }
}
