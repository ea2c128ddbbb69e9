import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../common/log.js';
import type { Grant } from './auth/authorizer.js';
import type { BlobGuard } from './gc/guard.js';
import type { Notifier } from './notifications/notifier.js';
import type { PullThroughProxy } from './proxy/proxy.js';
import type { RegistryStore } from './storage/store.js';
import type { UploadStore } from './storage/uploads.js';

/** What handlers may read about the running registry. */
export interface RegistryState {
  store: RegistryStore;
  uploads: UploadStore;
  log: Logger;
  deleteEnabled: boolean;
  deleteTags: boolean;
  readOnly: boolean;
  maxEntries: number;
  relativeUrls: boolean;
  tls: boolean;
  /** Bytes of a manifest PUT (berth.limits.manifestsize). */
  manifestMaxBytes: number;
  /** A mount without `from` searches every repository the caller may pull (berth.crossmount.automatic). */
  automaticCrossmount: boolean;
  /** Descriptors per page of a referrers answer (berth.pagination.referrers). */
  referrersPageSize: number;
  /** Where push, pull and delete events go (`notifications.endpoints`), when configured. */
  notifier?: Notifier;
  /** Blobs requests rely on, kept from a garbage collection running in this process. */
  gcGuard: BlobGuard;
  /** The pull-through cache (`proxy`), when configured: the registry is then read-only to clients. */
  proxy?: PullThroughProxy;
}

/** One request on its way through the dispatcher. */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  state: RegistryState;
  /** The decoded path. */
  path: string;
  query: URLSearchParams;
  /** The repository name, when the route has one (already validated). */
  name: string;
  /** The route's last path parameter: reference, digest or upload id. */
  param: string;
  /** What the authorizer granted this request. */
  grant: Grant;
}

/** An absolute (from Host, or X-Forwarded-*) or relative URL for a path, as configured. */
export function urlFor(ctx: RequestContext, path: string): string {
  if (ctx.state.relativeUrls) return path;
  const h = ctx.req.headers;
  const fwdProto = firstValue(h['x-forwarded-proto']);
  const fwdHost = firstValue(h['x-forwarded-host']);
  const proto = fwdProto ?? (ctx.state.tls ? 'https' : 'http');
  const host = fwdHost ?? h.host;
  if (!host) return path;
  return `${proto}://${host}${path}`;
}

function firstValue(v: string | string[] | undefined): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  if (!s) return undefined;
  const first = s.split(',')[0]?.trim();
  return first || undefined;
}

export function sendJsonBody(
  res: ServerResponse,
  status: number,
  body: unknown,
  contentType = 'application/json; charset=utf-8',
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

export function contentLength(req: IncomingMessage): number | undefined {
  const len = req.headers['content-length'];
  if (len === undefined || !/^\d+$/.test(len)) return undefined;
  return Number(len);
}
