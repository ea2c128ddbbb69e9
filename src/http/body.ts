import type { IncomingMessage } from 'node:http';
import { BerthError, invalidParameter } from '../common/errors.js';

/** Whether a request announced a body (a Content-Length above 0 or a Transfer-Encoding). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

/** Whether part of a request's announced body is still to come (not read by anyone yet). */
export function bodyUnread(req: IncomingMessage): boolean {
  return hasBody(req) && !req.complete;
}

/** Read a whole request body, refusing more than `limit` bytes. */
export async function readBody(req: IncomingMessage, limit = 64 * 1024 * 1024): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limit) {
    throw new BerthError('TooLarge', `request body of ${declared} bytes exceeds the limit of ${limit}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > limit) throw new BerthError('TooLarge', `request body exceeds the limit of ${limit} bytes`);
      chunks.push(buf);
    }
  } catch (err) {
    // our own refusal (past the limit) stands, though leaving the loop marks the request aborted
    if (err instanceof BerthError) throw err;
    // the client left before sending all it announced: its error, not the server's
    if (
      req.aborted ||
      (err as NodeJS.ErrnoException).code === 'ECONNRESET' ||
      String(err) === 'Error: aborted'
    ) {
      throw invalidParameter('the client closed the connection before the request body was complete');
    }
    throw err;
  }
  return Buffer.concat(chunks);
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
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalidParameter(`invalid JSON body: ${(err as Error).message}`);
  }
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
