/**
 * A strict, incremental HTTP/1.x response parser for the fuzzers: it takes the bytes a server
 * sent, in any pieces, and says which responses came whole, or why the bytes are not HTTP. It
 * knows the framing rules a client relies on (RFC 9112): 1xx answers before the final one, no
 * body for HEAD, 204 and 304, chunked, Content-Length, or until the connection closes; after a 101
 * the connection is no longer HTTP.
 */

export interface ResponseHead {
  status: number;
  version: string;
  reason: string;
  headers: Array<[string, string]>;
}

export interface ParsedResponse extends ResponseHead {
  /** The body (the first `keep` bytes of it). */
  body: Buffer;
  bodyLength: number;
  /** Every byte of the body arrived (as its framing says). */
  complete: boolean;
}

const STATUS_LINE = /^HTTP\/(1\.[01]) ([1-9]\d\d)(?: ([^\r\n]*))?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_HEAD = 256 * 1024;

export function header(head: ResponseHead, name: string): string | undefined {
  const lower = name.toLowerCase();
  return head.headers.find(([k]) => k.toLowerCase() === lower)?.[1];
}

type Framing = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };

export class ResponseParser {
  /** Responses seen (the last one may be under way). */
  readonly responses: ParsedResponse[] = [];
  /** Why the bytes are not HTTP, once they are not. */
  error?: string;
  /** After a 101: the rest is another protocol. */
  upgraded = false;
  private buf: Buffer = Buffer.alloc(0);
  private state: 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'trailers' | 'done' = 'head';
  private framing: Framing = { kind: 'none' };
  private chunkLeft = 0;
  private current?: ParsedResponse;
  private methodIndex = 0;

  /**
   * `methods`: the methods of the requests on the connection, in order (a HEAD answer has no
   * body). `keep`: how much of each body to keep.
   */
  constructor(
    private readonly methods: readonly string[],
    private readonly keep = 64 * 1024,
  ) {}

  /** Final (non-1xx) responses that arrived whole. */
  get completeCount(): number {
    return this.responses.filter((r) => r.complete && (r.status >= 200 || r.status === 101)).length;
  }

  push(chunk: Buffer): void {
    if (this.error || this.upgraded) return;
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    this.run();
  }

  /** The connection closed: a body framed by the close is complete, anything else half-way is not. */
  end(): void {
    if (this.error || this.upgraded) return;
    if (this.state === 'body' && this.framing.kind === 'close' && this.current) {
      this.current.complete = true;
      this.state = 'done';
    }
  }

  /** A response is under way (its head arrived, its body did not). */
  get midResponse(): boolean {
    return this.current !== undefined && !this.current.complete;
  }

  private fail(why: string): void {
    this.error = why;
  }

  private run(): void {
    for (;;) {
      if (this.error || this.upgraded) return;
      switch (this.state) {
        case 'done':
        case 'head': {
          if (this.buf.length === 0) return;
          const end = this.buf.indexOf('\r\n\r\n');
          if (end < 0) {
            if (this.buf.length > MAX_HEAD) this.fail('response head longer than 256 KiB');
            else if (
              !'HTTP/1.'.startsWith(this.buf.subarray(0, 7).toString('latin1')) &&
              this.buf.length >= 7
            )
              this.fail(
                `not an HTTP status line: ${JSON.stringify(this.buf.subarray(0, 80).toString('latin1'))}`,
              );
            return;
          }
          const head = this.buf.subarray(0, end).toString('latin1');
          this.buf = this.buf.subarray(end + 4);
          this.startResponse(head);
          break;
        }
        case 'body': {
          const cur = this.current as ParsedResponse;
          if (this.framing.kind === 'length') {
            const take = Math.min(this.framing.left, this.buf.length);
            this.keepBody(this.buf.subarray(0, take));
            this.buf = this.buf.subarray(take);
            this.framing.left -= take;
            if (this.framing.left > 0) return;
            cur.complete = true;
            this.state = 'done';
          } else {
            // until close
            this.keepBody(this.buf);
            this.buf = Buffer.alloc(0);
            return;
          }
          break;
        }
        case 'chunk-size': {
          const end = this.buf.indexOf('\r\n');
          if (end < 0) {
            if (this.buf.length > 4096) this.fail('chunk size line longer than 4 KiB');
            return;
          }
          const line = this.buf.subarray(0, end).toString('latin1');
          this.buf = this.buf.subarray(end + 2);
          const m = /^([0-9a-fA-F]{1,15})(?:[ \t]*;.*)?$/.exec(line);
          if (!m) {
            this.fail(`bad chunk size line ${JSON.stringify(line)}`);
            return;
          }
          this.chunkLeft = Number.parseInt(m[1] as string, 16);
          this.state = this.chunkLeft === 0 ? 'trailers' : 'chunk-data';
          break;
        }
        case 'chunk-data': {
          const take = Math.min(this.chunkLeft, this.buf.length);
          this.keepBody(this.buf.subarray(0, take));
          this.buf = this.buf.subarray(take);
          this.chunkLeft -= take;
          if (this.chunkLeft > 0) return;
          this.state = 'chunk-crlf';
          break;
        }
        case 'chunk-crlf': {
          if (this.buf.length < 2) return;
          if (this.buf[0] !== 0x0d || this.buf[1] !== 0x0a) {
            this.fail('chunk data not followed by CRLF');
            return;
          }
          this.buf = this.buf.subarray(2);
          this.state = 'chunk-size';
          break;
        }
        case 'trailers': {
          const end = this.buf.indexOf('\r\n');
          if (end < 0) return;
          const line = this.buf.subarray(0, end).toString('latin1');
          this.buf = this.buf.subarray(end + 2);
          if (line === '') {
            (this.current as ParsedResponse).complete = true;
            this.state = 'done';
          } else if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+:/.test(line)) {
            this.fail(`bad trailer line ${JSON.stringify(line)}`);
            return;
          }
          break;
        }
      }
    }
  }

  private keepBody(data: Buffer): void {
    const cur = this.current as ParsedResponse;
    cur.bodyLength += data.length;
    if (cur.body.length < this.keep)
      cur.body = Buffer.concat([cur.body, data.subarray(0, this.keep - cur.body.length)]);
  }

  private startResponse(text: string): void {
    const lines = text.split('\r\n');
    const m = STATUS_LINE.exec(lines[0] ?? '');
    if (!m) {
      this.fail(`bad status line ${JSON.stringify((lines[0] ?? '').slice(0, 200))}`);
      return;
    }
    const headers: Array<[string, string]> = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      const name = colon < 0 ? '' : line.slice(0, colon);
      if (!TOKEN.test(name)) {
        this.fail(`bad header line ${JSON.stringify(line.slice(0, 200))}`);
        return;
      }
      const value = line.slice(colon + 1).trim();
      if (/[\0\n\r]/.test(value)) {
        this.fail(`bad header value in ${JSON.stringify(line.slice(0, 200))}`);
        return;
      }
      headers.push([name, value]);
    }
    const status = Number(m[2]);
    const res: ParsedResponse = {
      status,
      version: m[1] as string,
      reason: m[3] ?? '',
      headers,
      body: Buffer.alloc(0),
      bodyLength: 0,
      complete: false,
    };
    this.responses.push(res);
    this.current = res;
    if (status === 101) {
      res.complete = true;
      this.upgraded = true;
      return;
    }
    if (status < 200) {
      // an interim answer: the final one follows for the same request
      res.complete = true;
      this.state = 'head';
      return;
    }
    const method = this.methods[this.methodIndex] ?? 'GET';
    this.methodIndex++;
    const lengths = headers.filter(([k]) => k.toLowerCase() === 'content-length').map(([, v]) => v);
    const te = header(res, 'transfer-encoding');
    if (lengths.length > 1 && new Set(lengths).size > 1) {
      this.fail(`several Content-Length headers: ${lengths.join(', ')}`);
      return;
    }
    if (te !== undefined && lengths.length) {
      this.fail('both Transfer-Encoding and Content-Length in a response');
      return;
    }
    // a request the server could not parse is answered before it knows the method (400, 408, 431
    // on a closing connection, with a body, as Go's server does too): not a HEAD answer then. Such
    // an answer is written raw, without the Date every answer of a handler carries: a handler's
    // own 400 to a HEAD it did parse has no body.
    const refusedUnparsed =
      [400, 408, 431].includes(status) &&
      /close/i.test(header(res, 'connection') ?? '') &&
      lengths.length === 1 &&
      header(res, 'date') === undefined;
    if ((method === 'HEAD' && !refusedUnparsed) || status === 204 || status === 304) {
      if ((status === 204 || status === 304) && te !== undefined) {
        this.fail(`Transfer-Encoding on a ${status}`);
        return;
      }
      res.complete = true;
      this.state = 'done';
      return;
    }
    if (te !== undefined) {
      if (te.toLowerCase() !== 'chunked') {
        this.fail(`unexpected Transfer-Encoding ${te}`);
        return;
      }
      this.framing = { kind: 'chunked' };
      this.state = 'chunk-size';
      return;
    }
    if (lengths.length) {
      const v = lengths[0] as string;
      if (!/^\d{1,15}$/.test(v)) {
        this.fail(`bad Content-Length ${JSON.stringify(v)}`);
        return;
      }
      this.framing = { kind: 'length', left: Number(v) };
      this.state = 'body';
      if (Number(v) === 0) {
        res.complete = true;
        this.state = 'done';
      }
      return;
    }
    this.framing = { kind: 'close' };
    this.state = 'body';
  }
}
