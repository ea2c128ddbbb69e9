import { connect } from 'node:net';

/**
 * A blob GET over plain HTTP read straight off the socket into one reused buffer (net's
 * `onread`): no allocation per read and no HTTP machinery per chunk, which for a large layer
 * is most of what the event loop would spend on it (node's client allocates every read and
 * emits it through two streams). Only the simple answer is taken: 200 (206 for a Range) with a
 * Content-Length and no transfer or content coding. Anything else (a redirect, a 401, an error,
 * chunked) is `unsuitable`: the caller asks again through the ordinary client, which knows
 * every case. One connection per GET, closed after it.
 */

/** What a raw GET came to. */
export type RawGetOutcome =
  /** The whole body went to `onChunk`. */
  | { kind: 'complete' }
  /** Not an answer this reader takes (or no connection): nothing went to `onChunk`. */
  | { kind: 'unsuitable' }
  /** The connection ended or failed after `onChunk` had bytes: resume from what was had. */
  | { kind: 'dropped'; error: Error };

export interface RawGetRequest {
  url: URL;
  /** Request headers besides Host and Connection (Authorization, Range, User-Agent). */
  headers: Record<string, string>;
  /** The status wanted: 200, or 206 when a Range was asked for. */
  status: 200 | 206;
  /**
   * Take a chunk of the body. The bytes are only valid during the call (the buffer is read into
   * again): the callee copies them. False: wait for `room` before reading on.
   */
  onChunk(chunk: Uint8Array): boolean;
  room(): Promise<void>;
  signal?: AbortSignal;
  idleTimeoutMs: number;
}

const READ_BUFFER = 256 * 1024;
const MAX_HEAD = 64 * 1024;

interface Head {
  status: number;
  headers: Map<string, string>;
}

function parseHead(text: string): Head | undefined {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!m) return undefined;
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i <= 0) return undefined;
    const name = line.slice(0, i).trim().toLowerCase();
    if (headers.has(name)) return undefined; // repeated fields: leave them to the ordinary client
    headers.set(name, line.slice(i + 1).trim());
  }
  return { status: Number(m[1]), headers };
}

/** The body length of a head this reader takes, else undefined. */
function simpleLength(head: Head, status: number): number | undefined {
  if (head.status !== status) return undefined;
  if (head.headers.has('transfer-encoding')) return undefined;
  const coding = head.headers.get('content-encoding');
  if (coding !== undefined && coding !== 'identity') return undefined;
  const length = head.headers.get('content-length');
  if (length === undefined || !/^\d{1,15}$/.test(length)) return undefined;
  return Number(length);
}

export function rawGet(req: RawGetRequest): Promise<RawGetOutcome> {
  return new Promise((resolve, reject) => {
    if (req.signal?.aborted) {
      reject(req.signal.reason ?? new Error('aborted'));
      return;
    }
    if (Object.values(req.headers).some((v) => /[\r\n]/.test(v))) {
      resolve({ kind: 'unsuitable' }); // the ordinary client refuses such a header with its own error
      return;
    }
    let settled = false;
    let head: Buffer | undefined = Buffer.alloc(0);
    let remaining = 0;
    let gotBody = false;
    const buffer = Buffer.allocUnsafe(READ_BUFFER);
    const finish = (outcome: RawGetOutcome | { kind: 'aborted'; error: unknown }) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      req.signal?.removeEventListener('abort', onAbort);
      if (outcome.kind === 'aborted') reject(outcome.error);
      else resolve(outcome);
    };
    const onAbort = () => finish({ kind: 'aborted', error: req.signal?.reason ?? new Error('aborted') });
    const lost = (error: Error) => finish(gotBody ? { kind: 'dropped', error } : { kind: 'unsuitable' });
    /** Hand body bytes on; false when the socket is to pause for room. */
    const body = (chunk: Uint8Array): boolean => {
      const part = chunk.length > remaining ? chunk.subarray(0, remaining) : chunk;
      if (part.length === 0) return true;
      gotBody = true;
      remaining -= part.length;
      const more = req.onChunk(part);
      if (remaining === 0) {
        finish({ kind: 'complete' });
        return false;
      }
      if (!more) {
        req.room().then(
          () => {
            if (!settled) socket.resume();
          },
          (err: Error) => lost(err),
        );
        return false;
      }
      return true;
    };
    const port = Number(req.url.port || 80);
    const socket = connect({
      host: req.url.hostname.replace(/^\[|\]$/g, ''),
      port,
      onread: {
        buffer,
        callback: (n: number, buf: Uint8Array): boolean => {
          if (settled) return false;
          const data = buf.subarray(0, n);
          if (!head) return body(data);
          head = Buffer.concat([head, data]);
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) {
            if (head.length > MAX_HEAD) finish({ kind: 'unsuitable' });
            return !settled;
          }
          const parsed = parseHead(head.toString('latin1', 0, end));
          const length = parsed ? simpleLength(parsed, req.status) : undefined;
          if (length === undefined) {
            finish({ kind: 'unsuitable' });
            return false;
          }
          const rest = head.subarray(end + 4);
          head = undefined;
          remaining = length;
          if (remaining === 0) {
            finish({ kind: 'complete' });
            return false;
          }
          return body(rest);
        },
      },
    });
    req.signal?.addEventListener('abort', onAbort, { once: true });
    socket.setNoDelay(true);
    socket.setTimeout(req.idleTimeoutMs, () =>
      lost(Object.assign(new Error('i/o timeout'), { code: 'ETIMEDOUT' })),
    );
    socket.on('error', (err) => lost(err));
    socket.on('close', () => lost(new Error('unexpected EOF')));
    socket.on('connect', () => {
      const path = `${req.url.pathname}${req.url.search}`;
      const lines = [`GET ${path} HTTP/1.1`, `Host: ${req.url.host}`];
      for (const [k, v] of Object.entries(req.headers)) lines.push(`${k}: ${v}`);
      lines.push('Connection: close', '', '');
      socket.write(lines.join('\r\n'));
    });
  });
}
