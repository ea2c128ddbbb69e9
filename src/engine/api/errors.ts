import type { ServerResponse } from 'node:http';
import { BerthError, type ErrorKind, errnoCode, errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { bodyUnread } from '../../http/body.js';
import type { ErrorBody } from '../../http/connection-limits.js';

/** The one place engine error kinds become HTTP statuses. */
const statusOf: Record<ErrorKind, number> = {
  InvalidParameter: 400,
  NotFound: 404,
  Conflict: 409,
  NotModified: 304,
  Forbidden: 403,
  Unauthorized: 401,
  NotImplemented: 501,
  Unavailable: 503,
  NotAcceptable: 406,
  RangeNotSatisfiable: 416,
  TooLarge: 413,
  TooManyRequests: 429,
  System: 500,
};

export function engineStatus(err: unknown): number {
  if (err instanceof BerthError) return statusOf[err.kind];
  const code = errnoCode(err);
  if (code === 'ENOENT') return 404;
  // a path the request named that no file system takes (the engine's own paths are short)
  if (code === 'ENAMETOOLONG') return 400;
  return 500;
}

/** The engine's error body, for what the connection guard answers on its own (429, 408). */
export const engineErrorBody: ErrorBody = (_status, message) => ({
  contentType: 'application/json',
  body: JSON.stringify({ message }),
});

/** Answer an error as dockerd does: `{"message": ...}` (API >= 1.24), headers permitting. */
export function sendEngineError(res: ServerResponse, err: unknown, log: Logger): void {
  const status = engineStatus(err);
  const message = errorMessage(err);
  if (status >= 500) log.error('request failed', { status, error: message });
  if (res.headersSent) {
    // The stream is under way: the client reads errors in-band (JSON message streams) or sees EOF.
    if (!res.writableEnded) res.end();
    return;
  }
  if (status === 304) {
    res.statusCode = 304;
    res.end();
    return;
  }
  const body = JSON.stringify({ message });
  // A body refused before it was read whole (413, or any error) is not read to its end: the
  // connection closes after the answer rather than taking whatever the client still sends.
  if (res.req && bodyUnread(res.req)) {
    res.shouldKeepAlive = false;
    res.setHeader('Connection', 'close');
  }
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
