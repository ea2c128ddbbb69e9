import type { IncomingMessage, ServerResponse } from 'node:http';
import { BerthError, type ErrorKind } from '../common/errors.js';

/**
 * The registry's error codes (OCI distribution-spec 1.1 plus the reference registry's extras)
 * and their HTTP statuses. This file is the one place that maps errors to statuses.
 */
export const ERROR_CODES = {
  BLOB_UNKNOWN: { status: 404, message: 'blob unknown to registry', kind: 'NotFound' },
  BLOB_UPLOAD_INVALID: { status: 400, message: 'blob upload invalid', kind: 'InvalidParameter' },
  BLOB_UPLOAD_UNKNOWN: { status: 404, message: 'blob upload unknown to registry', kind: 'NotFound' },
  DIGEST_INVALID: {
    status: 400,
    message: 'provided digest did not match uploaded content',
    kind: 'InvalidParameter',
  },
  MANIFEST_BLOB_UNKNOWN: {
    status: 400,
    message: 'manifest references a manifest or blob unknown to registry',
    kind: 'InvalidParameter',
  },
  MANIFEST_INVALID: { status: 400, message: 'manifest invalid', kind: 'InvalidParameter' },
  MANIFEST_UNKNOWN: { status: 404, message: 'manifest unknown to registry', kind: 'NotFound' },
  MANIFEST_UNVERIFIED: {
    status: 400,
    message: 'manifest failed signature verification',
    kind: 'InvalidParameter',
  },
  NAME_INVALID: { status: 400, message: 'invalid repository name', kind: 'InvalidParameter' },
  NAME_UNKNOWN: { status: 404, message: 'repository name not known to registry', kind: 'NotFound' },
  SIZE_INVALID: {
    status: 400,
    message: 'provided length did not match content length',
    kind: 'InvalidParameter',
  },
  TAG_INVALID: { status: 400, message: 'manifest tag did not match URI', kind: 'InvalidParameter' },
  UNAUTHORIZED: { status: 401, message: 'authentication required', kind: 'Unauthorized' },
  DENIED: { status: 403, message: 'requested access to the resource is denied', kind: 'Forbidden' },
  UNSUPPORTED: { status: 405, message: 'The operation is unsupported.', kind: 'NotImplemented' },
  TOOMANYREQUESTS: { status: 429, message: 'too many requests', kind: 'TooManyRequests' },
  PAGINATION_NUMBER_INVALID: {
    status: 400,
    message: 'invalid number of results requested',
    kind: 'InvalidParameter',
  },
  RANGE_INVALID: { status: 416, message: 'invalid content range', kind: 'RangeNotSatisfiable' },
  UNAVAILABLE: { status: 503, message: 'service unavailable', kind: 'Unavailable' },
  UNKNOWN: { status: 500, message: 'unknown error', kind: 'System' },
} as const satisfies Record<string, { status: number; message: string; kind: ErrorKind }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorEntry {
  code: ErrorCode;
  message: string;
  detail?: unknown;
}

/**
 * A registry error: one or more `{code, message, detail}` entries answered with one status.
 * `status` overrides the code's status (413 for an oversized manifest, 416 for a bad chunk).
 */
export class RegistryError extends BerthError {
  readonly code: ErrorCode;
  readonly status: number;
  readonly entries: ErrorEntry[];
  /** Extra response headers (Range and Location on a 416, Allow on a 405). */
  headers?: Record<string, string>;

  constructor(code: ErrorCode, message?: string, detail?: unknown, status?: number) {
    const info = ERROR_CODES[code];
    super(info.kind, message ?? info.message, detail);
    this.code = code;
    this.status = status ?? info.status;
    this.entries = [{ code, message: message ?? info.message, detail }];
  }

  /** Several errors in one answer (one BLOB_UNKNOWN per missing blob). */
  static many(entries: ErrorEntry[], status: number): RegistryError {
    const first = entries[0] ?? { code: 'UNKNOWN' as ErrorCode, message: 'unknown error' };
    const err = new RegistryError(first.code, first.message, first.detail, status);
    err.entries.splice(0, err.entries.length, ...entries);
    return err;
  }

  withHeaders(headers: Record<string, string>): this {
    this.headers = { ...this.headers, ...headers };
    return this;
  }
}

export function registryError(code: ErrorCode, message?: string, detail?: unknown): RegistryError {
  return new RegistryError(code, message, detail);
}

export interface ErrorResponse {
  status: number;
  headers: Record<string, string>;
  body: { errors: Array<{ code: string; message: string; detail?: unknown }> };
  /** True for errors that are the server's fault (logged at error level). */
  internal: boolean;
}

function detailObject(detail: unknown): Record<string, unknown> | undefined {
  return detail && typeof detail === 'object' ? (detail as Record<string, unknown>) : undefined;
}

/** Map anything thrown by a handler, the authorizer or the rate limiter to a registry answer. */
export function toErrorResponse(err: unknown): ErrorResponse {
  if (err instanceof RegistryError) {
    const headers: Record<string, string> = { ...err.headers };
    const challenge = detailObject(err.detail)?.challenge;
    if (err.code === 'UNAUTHORIZED' && typeof challenge === 'string') headers['WWW-Authenticate'] = challenge;
    return {
      status: err.status,
      headers,
      body: {
        errors: err.entries.map((e) => (e.detail === undefined ? { code: e.code, message: e.message } : e)),
      },
      internal: err.status >= 500,
    };
  }
  if (err instanceof BerthError) {
    const detail = detailObject(err.detail);
    const headers: Record<string, string> = {};
    let code: ErrorCode;
    let status: number | undefined;
    switch (err.kind) {
      case 'Unauthorized':
        code = 'UNAUTHORIZED';
        if (typeof detail?.challenge === 'string') headers['WWW-Authenticate'] = detail.challenge;
        break;
      case 'Forbidden':
        code = 'DENIED';
        break;
      case 'TooManyRequests':
        code = 'TOOMANYREQUESTS';
        if (detail?.retryAfter !== undefined) headers['Retry-After'] = String(detail.retryAfter);
        break;
      case 'NotFound':
        code = 'NAME_UNKNOWN';
        break;
      case 'InvalidParameter':
        code = 'UNKNOWN';
        status = 400;
        break;
      case 'TooLarge':
        code = 'SIZE_INVALID';
        status = 413;
        break;
      case 'NotImplemented':
        code = 'UNSUPPORTED';
        break;
      case 'Unavailable':
        code = 'UNAVAILABLE';
        break;
      case 'RangeNotSatisfiable':
        code = 'RANGE_INVALID';
        break;
      default:
        code = 'UNKNOWN';
    }
    const info = ERROR_CODES[code];
    const entry: { code: string; message: string; detail?: unknown } = {
      code,
      message: err.message || info.message,
    };
    if (err.detail !== undefined && err.kind !== 'Unauthorized') entry.detail = err.detail;
    const finalStatus = status ?? info.status;
    return { status: finalStatus, headers, body: { errors: [entry] }, internal: finalStatus >= 500 };
  }
  return {
    status: 500,
    headers: {},
    body: { errors: [{ code: 'UNKNOWN', message: 'internal server error' }] },
    internal: true,
  };
}

/** Write an error answer; a HEAD request gets the status and headers without a body. */
export function sendError(req: IncomingMessage, res: ServerResponse, err: unknown): ErrorResponse {
  const answer = toErrorResponse(err);
  if (res.headersSent) {
    res.destroy();
    return answer;
  }
  const text = JSON.stringify(answer.body);
  res.statusCode = answer.status;
  for (const [k, v] of Object.entries(answer.headers)) res.setHeader(k, v);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  if (req.method === 'HEAD') res.end();
  else res.end(text);
  return answer;
}
