import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorMessage } from '../common/errors.js';
import { type Logger, rootLogger } from '../common/log.js';
import { discardUnreadBody, hasBody } from '../http/body.js';
import { guardRequest } from '../http/crash-guard.js';
import { sendEmpty } from '../http/server.js';
import { type Authorizer, type Grant, openAccess } from './auth/authorizer.js';
import { DEFAULT_REQUEST_LIMITS } from './config.js';
import type { RegistryState, RequestContext } from './context.js';
import { RegistryError, sendError } from './errors.js';
import { BlobGuard } from './gc/guard.js';
import { HOLDS_DIR, SharedHolds } from './gc/holds.js';
import { UploadSlots } from './limits/upload-slots.js';
import { checkName, isValidName } from './names.js';
import { accessesFor, matchRoute, type Route } from './routes.js';
import type { StorageDriver } from './storage/driver.js';
import { FilesystemDriver } from './storage/filesystem.driver.js';
import { RegistryStore } from './storage/store.js';
import { UploadStore } from './storage/uploads.js';

/** Something that refuses requests over a rate: throws a TooManyRequests BerthError. */
export interface RateLimiter {
  check(req: IncomingMessage): void | Promise<void>;
}

/**
 * An extra endpoint outside the /v2/ API (the token server's /auth/token). Served before the
 * registry routes, without the authorizer (the handler does its own authentication), but after
 * the rate limiter.
 */
export interface ExtraRoute {
  /** Methods served (default GET and POST); `methods` is accepted as a synonym. */
  method?: string | string[];
  methods?: string[];
  /** The exact path (without query). */
  path: string;
  handler(req: IncomingMessage, res: ServerResponse): void | Promise<void>;
}

export interface RegistryAppOptions {
  driver: StorageDriver;
  authorizer?: Authorizer;
  rateLimiter?: RateLimiter;
  extraRoutes?: ExtraRoute[];
  deleteEnabled?: boolean;
  /** DELETE of a manifest by tag removes just the tag (berth extension). */
  deleteTags?: boolean;
  readOnly?: boolean;
  /** Server page limit of tags list and catalog. */
  maxEntries?: number;
  relativeUrls?: boolean;
  tls?: boolean;
  /** A mount without `from` searches the repositories the caller may pull (default true). */
  automaticCrossmount?: boolean;
  /** Descriptors per page of a referrers answer (default 1000). */
  referrersPageSize?: number;
  /** Uploads older than this are unknown (404) and purged. */
  uploadMaxAgeMs?: number;
  manifestCacheEntries?: number;
  manifestCacheBytes?: number;
  /** Bytes of a manifest PUT (default 4 MiB). */
  manifestMaxBytes?: number;
  /** Bytes of one blob over all its chunks (default 0: no limit). */
  blobMaxBytes?: number;
  /** Upload requests with a body in flight per client address (default 32; 0: no limit). */
  uploadsPerClient?: number;
  log?: Logger;
  /** Where access log lines go; undefined disables the access log. */
  accessLog?: (line: string) => void;
}

export interface RegistryApp {
  handle(req: IncomingMessage, res: ServerResponse): void;
  state: RegistryState;
  /** Upload requests in flight per client (berth.limits.uploadsperclient). */
  uploadSlots: UploadSlots;
}

const READ_METHODS = new Set(['GET', 'HEAD']);

/** `scheme://authority` of an absolute-form request target (RFC 9112 3.2.2). */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The path and query of a request target: an absolute-form target (`GET http://host/v2/`, what
 * proxies send) is routed by its path, as Go's net/http (the reference registry) does.
 */
export function originForm(target: string): string {
  if (target.startsWith('/')) return target;
  const m = ABSOLUTE_FORM.exec(target);
  if (!m) return target;
  const rest = target.slice(m[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

function safeDecode(path: string): string | undefined {
  try {
    return decodeURIComponent(path);
  } catch {
    return undefined;
  }
}

/** Build the request handler of the registry: context → rate limit → auth → handler. */
export function createRegistryApp(options: RegistryAppOptions): RegistryApp {
  const log = options.log ?? rootLogger.child('registry');
  const store = new RegistryStore(options.driver, {
    manifestCacheEntries: options.manifestCacheEntries,
    manifestCacheBytes: options.manifestCacheBytes,
  });
  const state: RegistryState = {
    store,
    uploads: new UploadStore(
      options.driver,
      store,
      options.uploadMaxAgeMs ?? 168 * 3_600_000,
      options.blobMaxBytes ?? DEFAULT_REQUEST_LIMITS.blobsize,
    ),
    log,
    deleteEnabled: options.deleteEnabled ?? false,
    deleteTags: options.deleteTags ?? false,
    readOnly: options.readOnly ?? false,
    maxEntries: options.maxEntries ?? 1000,
    relativeUrls: options.relativeUrls ?? false,
    tls: options.tls ?? false,
    manifestMaxBytes: options.manifestMaxBytes ?? DEFAULT_REQUEST_LIMITS.manifestsize,
    automaticCrossmount: options.automaticCrossmount ?? true,
    referrersPageSize: Math.max(1, options.referrersPageSize ?? 1000),
    gcGuard: new BlobGuard(
      options.driver instanceof FilesystemDriver
        ? new SharedHolds(options.driver.fullPath(HOLDS_DIR))
        : undefined,
    ),
  };
  const uploadSlots = new UploadSlots(options.uploadsPerClient ?? DEFAULT_REQUEST_LIMITS.uploadsperclient);
  const authorizer = options.authorizer ?? openAccess;
  const extra = new Map<string, ExtraRoute>();
  for (const r of options.extraRoutes ?? []) extra.set(r.path, r);

  async function dispatch(req: IncomingMessage, res: ServerResponse, request: RequestRecord): Promise<void> {
    res.setHeader('Docker-Distribution-API-Version', 'registry/2.0');
    const rawUrl = originForm(req.url ?? '/');
    const q = rawUrl.indexOf('?');
    const rawPath = q >= 0 ? rawUrl.slice(0, q) : rawUrl;
    const query = new URLSearchParams(q >= 0 ? rawUrl.slice(q + 1) : '');
    const method = (req.method ?? 'GET').toUpperCase();

    if (options.rateLimiter) await options.rateLimiter.check(req);

    const extraRoute = extra.get(rawPath);
    if (extraRoute) {
      const allowed = [extraRoute.method ?? extraRoute.methods ?? ['GET', 'POST']]
        .flat()
        .map((m) => m.toUpperCase());
      if (!allowed.includes(method)) {
        throw new RegistryError('UNSUPPORTED', `method ${method} not allowed`).withHeaders({
          Allow: allowed.join(', '),
        });
      }
      await extraRoute.handler(req, res);
      return;
    }

    const path = safeDecode(rawPath);
    const route = path === undefined ? undefined : matchRoute(path);
    if (!route || path === undefined) {
      throw new RegistryError('NAME_UNKNOWN', `no such endpoint: ${rawPath}`, { path: rawPath }, 404);
    }
    const handler = route.methods[method];
    if (!handler) {
      throw new RegistryError('UNSUPPORTED', `method ${method} not allowed on ${rawPath}`).withHeaders({
        Allow: Object.keys(route.methods).join(', '),
      });
    }
    const name = route.repo === undefined ? '' : checkName(route.repo);
    const from = query.get('from');
    const fromName = from !== null && isValidName(from) ? from : undefined;
    const grant = await authorizer.authorize(req, accessesFor(route, method, query, fromName));
    request.grant = grant;
    if (state.readOnly && !READ_METHODS.has(method)) {
      throw new RegistryError('UNSUPPORTED', 'The registry is running in read-only mode');
    }
    if (state.proxy && !READ_METHODS.has(method)) {
      throw new RegistryError(
        'UNSUPPORTED',
        'The operation is unsupported: the registry is a pull-through cache',
      );
    }
    const ctx: RequestContext = { req, res, state, path, query, name, param: route.param, grant };
    if (sendsBlobData(route, method, req)) res.once('close', uploadSlots.acquire(request.remote ?? '-'));
    await handler(ctx);
  }

  /** Log an access line; a failing sink is logged, never thrown. */
  function logAccess(req: IncomingMessage, res: ServerResponse, request: RequestRecord): void {
    const write = options.accessLog;
    if (!write) return;
    try {
      write(accessLine(req, res, request.grant?.user, request.started, request.remote));
    } catch (err) {
      log.error('access log failed', { method: req.method, url: req.url, error: errorMessage(err) });
    }
  }

  function answerError(req: IncomingMessage, res: ServerResponse, err: unknown, logged = false): void {
    // A body we did not read (an error before or while the handler read it) is discarded,
    // bounded, so the connection can go on (src/http/body.ts).
    discardUnreadBody(req, res);
    const answer = sendError(req, res, err);
    if (answer.internal && !logged)
      log.error('request failed', { method: req.method, url: req.url, error: errorMessage(err) });
  }

  function serve(req: IncomingMessage, res: ServerResponse, request: RequestRecord): void {
    res.once('close', () => logAccess(req, res, request));
    req.on('error', () => {});
    res.on('error', () => {});
    dispatch(req, res, request).then(
      () => {
        if (res.writableEnded || res.destroyed || res.headersSent) return;
        // A handler that returned without answering: 200, unless its socket is gone.
        if (!res.socket || res.socket.destroyed) res.destroy();
        else sendEmpty(res, 200);
      },
      (err: unknown) => {
        if (res.destroyed) return;
        if (res.writableEnded) {
          // Answered already (by the handler, or by the crash guard for a fault of its own).
          if (!(err instanceof RegistryError) && !isClientAbort(err, req))
            log.error('request failed after its answer', {
              method: req.method,
              url: req.url,
              error: errorMessage(err),
            });
          return;
        }
        if (!(err instanceof RegistryError) && isClientAbort(err, req)) {
          res.destroy();
          return;
        }
        answerError(req, res, err);
      },
    );
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    // What the access log needs from the socket is read now: the socket may be gone (and
    // req.socket null) by the time the response closes.
    const request: RequestRecord = {
      started: process.hrtime.bigint(),
      remote: req.socket?.remoteAddress,
    };
    // Whatever this request's code throws where nobody catches it ends this request alone.
    guardRequest(
      {
        req,
        res,
        log: (err, origin) =>
          log.error('uncaught exception in a request', {
            method: req.method,
            url: req.url,
            origin,
            error: errorMessage(err),
            stack: err instanceof Error ? err.stack : undefined,
          }),
        answer: (err) => answerError(req, res, err, true),
      },
      () => serve(req, res, request),
    );
  }

  return { handle, state, uploadSlots };
}

/** What the registry keeps about a request for its access log line. */
interface RequestRecord {
  started: bigint;
  /** The client's address, read when the request came (the socket may be gone later). */
  remote: string | undefined;
  grant?: Grant;
}

/** A request that streams blob data into an upload (what takes an upload slot). */
function sendsBlobData(route: Route, method: string, req: IncomingMessage): boolean {
  if (!hasBody(req)) return false;
  if (route.name === 'upload') return method === 'PATCH' || method === 'PUT';
  return route.name === 'uploads' && method === 'POST';
}

function isClientAbort(err: unknown, req: IncomingMessage): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return (
    req.destroyed || code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ABORT_ERR'
  );
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function clfDate(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}

/** One access log line, in the combined log format the reference registry writes. */
export function accessLine(
  req: IncomingMessage,
  res: ServerResponse,
  user: string | undefined,
  started: bigint,
  remote: string | undefined,
): string {
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const size = res.getHeader('content-length') ?? '-';
  const referer = req.headers.referer ?? '';
  const agent = req.headers['user-agent'] ?? '';
  const status = res.headersSent ? res.statusCode : 499;
  return `${remote ?? '-'} - ${user || '-'} [${clfDate(new Date())}] "${req.method} ${req.url} HTTP/${req.httpVersion}" ${status} ${size} "${referer}" "${agent}" ${ms.toFixed(3)}ms`;
}
