import type { IncomingMessage, ServerResponse } from 'node:http';
import { BerthError, invalidParameter } from '../common/errors.js';

/** Whether a request announced a body (a Content-Length above 0 or a Transfer-Encoding). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  return Number(req.headers['content-length'] ?? 0) > 0;
}

/** Whether part of a request's announced body is still to come (not read by anyone yet). */
export function bodyUnread(req: IncomingMessage): boolean {
  return hasBody(req) && !req.complete;
}

/**
 * Read a whole request body, refusing more than `limit` bytes (declared or streamed) with
 * `tooLarge()`. The request is not destroyed when reading stops early (a destroyed request
 * wedges its keep-alive connection: node stops parsing it), so that the answer can be sent and
 * the rest dealt with by the server (discardUnreadBody, or a connection closed after the answer).
 */
export async function readBody(
  req: IncomingMessage,
  limit = 64 * 1024 * 1024,
  tooLarge: (declared?: number) => Error = (declared) =>
    new BerthError(
      'TooLarge',
      declared === undefined
        ? `request body exceeds the limit of ${limit} bytes`
        : `request body of ${declared} bytes exceeds the limit of ${limit}`,
    ),
): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(declared);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req.iterator({ destroyOnReturn: false })) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > limit) throw tooLarge();
      chunks.push(buf);
    }
  } catch (err) {
    // the client left before sending all it announced: its error, not the server's
    if (
      req.aborted ||
      (err as NodeJS.ErrnoException).code === 'ECONNRESET' ||
      String(err) === 'Error: aborted'
    ) {
      if (size <= limit)
        throw invalidParameter('the client closed the connection before the request body was complete');
    }
    throw err;
  }
  return Buffer.concat(chunks);
}

/** How long, and how much, an unread rest of a body is discarded before the connection is cut. */
export const DISCARD_MS = 2_000;
export const DISCARD_BYTES = 64 * 1024 * 1024;

/**
 * Fails a request body's readers with `err` while the connection stays open: node's own destroy
 * of a request closes its socket, which would cut an answer already under way. For a body whose
 * framing broke (a bad chunk) while its answer is being written: the handler reading it fails,
 * finishes its answer with the error, and the connection closes after. Node's IncomingMessage
 * emits the error only when somebody listens for it, and so does this.
 */
export function failBody(req: IncomingMessage, err: Error): void {
  const stream = req as IncomingMessage & {
    _destroy: (e: Error | null, cb: (e?: Error | null) => void) => void;
  };
  stream._destroy = (e, cb) => cb(req.listenerCount('error') > 0 ? e : null);
  req.destroy(err);
}

/**
 * Before an answer that leaves the body unread: discard the rest so the connection can carry
 * the next request (and a client still sending reads the answer, not a reset), for at most
 * DISCARD_MS and DISCARD_BYTES; past either, the socket is destroyed. A request already destroyed
 * cannot be drained: its answer closes the connection. Resolves once the rest is read or cut
 * (callers that answer at once need not wait).
 */
export function discardUnreadBody(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.complete || req.readableEnded) return Promise.resolve();
  if (req.destroyed) {
    if (!res.headersSent) res.shouldKeepAlive = false;
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const socket = req.socket;
    let discarded = 0;
    const cleanup = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', cleanup);
      req.off('close', cleanup);
      resolve();
    };
    const cut = () => {
      cleanup();
      socket?.destroy();
    };
    const onData = (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > DISCARD_BYTES) cut();
    };
    const timer = setTimeout(cut, DISCARD_MS);
    timer.unref();
    req.on('data', onData);
    req.once('end', cleanup);
    req.once('close', cleanup);
    // a reader that gave up without returning (an abandoned async iterator) keeps a 'readable'
    // listener, which would hold the stream paused whatever resume() says
    req.removeAllListeners('readable');
    req.resume();
  });
}

/**
 * Read a JSON body. An empty body gives `undefined`; malformed JSON is an InvalidParameter error
 * with the parser's message, as dockerd answers 400 for it; so is a body whose Content-Type is
 * given and is not application/json (dockerd's CheckForJSON; a body without one is taken).
 */
export async function readJson(req: IncomingMessage, limit = 16 * 1024 * 1024): Promise<unknown> {
  return parseJsonBody(await readBody(req, limit), req.headers['content-type']);
}

/** A JSON body already read (readJson's rules: empty is `undefined`, Content-Type checked). */
export function parseJsonBody(body: Buffer, contentType: string | undefined): unknown {
  const text = body.toString('utf8').trim();
  if (text === '') return undefined;
  if (contentType !== undefined && contentType.split(';')[0]?.trim().toLowerCase() !== 'application/json') {
    throw invalidParameter(`Content-Type specified (${contentType}) must be 'application/json'`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalidParameter(`invalid JSON body: ${(err as Error).message}`);
  }
  // JSON.parse takes any depth, but what walks the value after it (JSON.stringify, decoders)
  // recurses: a body nested deeper than any API body ever is would overflow their stack
  if (nestingDepth(text) > MAX_JSON_DEPTH) {
    throw invalidParameter(`invalid JSON body: exceeded max depth of ${MAX_JSON_DEPTH}`);
  }
  return value;
}

/** How deep a JSON body may nest (Go's encoding/json allows 10000; no API body needs 100). */
export const MAX_JSON_DEPTH = 1000;

/** The deepest nesting of objects and arrays in a JSON text that parsed (brackets in strings skipped). */
function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) max = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

/** Read a JSON body that must be an object (or absent, giving {}). */
export async function readJsonObject(req: IncomingMessage, limit?: number): Promise<Record<string, unknown>> {
  return jsonObject(await readJson(req, limit));
}

/** A parsed JSON body that must be an object (or absent, giving {}). */
export function jsonObject(value: unknown): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidParameter('invalid JSON body: expected an object');
  }
  return value as Record<string, unknown>;
}
