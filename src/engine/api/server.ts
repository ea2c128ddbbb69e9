import type { Server } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as TlsServerOptions } from 'node:https';
import { errorMessage, invalidParameter, notFound, systemError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { jsonObject, parseJsonBody, readJsonObject } from '../../http/body.js';
import type { ConnectionGuard } from '../../http/connection-limits.js';
import { endFaultyRequest, guardRequest, type RequestFault } from '../../http/crash-guard.js';
import { Router } from '../../http/router.js';
import {
  createExchangeServer,
  type Exchange,
  readUpgradeBody,
  sendEmpty,
  takeOverConnection,
} from '../../http/server.js';
import { buildBodyBelowParser } from './build.routes.js';
import type { ApiContext, ApiHandler, ApiRouter } from './context.js';
import { sendEngineError } from './errors.js';
import { compareDotted, MAX_API_VERSION, MIN_API_VERSION, majorMinor } from './versions.js';

export interface EngineServerOptions {
  log: Logger;
  /** The value of the Server header, e.g. `berth/0.1.0 (linux)`. */
  serverHeader: string;
  experimental: boolean;
  /** Connection caps (see src/http/connection-limits.ts); none: node's defaults. */
  guard?: ConnectionGuard;
  /** Serve HTTPS with these options (certificate, key, and for --tlsverify the CA to trust). */
  tls?: TlsServerOptions;
}

export function createApiRouter(): ApiRouter {
  return new Router<ApiHandler>();
}

/** dockerd's router: `/v{version:[0-9.]+}` before every route. */
const versionPrefix = /^\/v([0-9.]+)(\/.*)$/;

/**
 * Split `/v1.41/containers/json` into the API version (its `major.minor`) and the route path,
 * refusing versions outside [MIN_API_VERSION, MAX_API_VERSION] with 400 as dockerd does
 * (`/v1/...` is too old, `/v2/...` too new, `/v1.41.0/...` is 1.41).
 */
export function negotiateVersion(path: string): { version: string; path: string } {
  const m = versionPrefix.exec(path);
  if (!m) return { version: MAX_API_VERSION, path };
  const version = m[1] ?? '';
  const rest = m[2] ?? '/';
  if (compareDotted(version, MIN_API_VERSION) < 0) {
    throw invalidParameter(
      `client version ${version} is too old. Minimum supported API version is ${MIN_API_VERSION}, please upgrade your client to a newer version`,
    );
  }
  if (compareDotted(version, MAX_API_VERSION) > 0) {
    throw invalidParameter(
      `client version ${version} is too new. Maximum supported API version is ${MAX_API_VERSION}`,
    );
  }
  return { version: majorMinor(version), path: rest };
}

/**
 * Path and query of a request target, without building a URL object per request (the hot path):
 * only a path with dot segments goes through URL's normalisation.
 */
export function splitUrl(target: string): { pathname: string; query: URLSearchParams } {
  const q = target.indexOf('?');
  let pathname = q < 0 ? target : target.slice(0, q);
  if (!pathname.startsWith('/') || pathname.includes('/.')) {
    // a path (never an authority: `//x/y` is the path //x/y, as Go reads a request target)
    try {
      // absolute-form (`http://host/v1.41/info`) is routed by its path, as Go's server does
      const absolute = /^[a-z][a-z0-9+.-]*:\/\//i.test(pathname);
      pathname = new URL(
        absolute ? pathname : `http://engine${pathname.startsWith('/') ? '' : '/'}${pathname}`,
      ).pathname;
    } catch {
      throw invalidParameter(`invalid request target: ${JSON.stringify(target.slice(0, 200))}`);
    }
  }
  return { pathname, query: new URLSearchParams(q < 0 ? '' : target.slice(q + 1)) };
}

export function createEngineServer(router: ApiRouter, opts: EngineServerOptions): Server {
  const log = opts.log;
  const handle = async (ex: Exchange): Promise<void> => {
    const { req, res } = ex;
    res.setHeader('Api-Version', MAX_API_VERSION);
    res.setHeader('Docker-Experimental', String(opts.experimental));
    res.setHeader('Ostype', 'linux');
    res.setHeader('Server', opts.serverHeader);
    let version = MAX_API_VERSION;
    try {
      const { pathname, query } = splitUrl(req.url ?? '/');
      let rawPath: string;
      ({ version, path: rawPath } = negotiateVersion(pathname));
      let path = rawPath;
      if (rawPath.includes('%')) {
        try {
          path = decodeURIComponent(rawPath);
        } catch {
          throw invalidParameter(`invalid path encoding: ${rawPath}`);
        }
      }
      const method = req.method ?? 'GET';
      // dockerd answers OPTIONS on every path (CORS preflight) with an empty 200
      if (method === 'OPTIONS') {
        sendEmpty(res, 200);
        return;
      }
      const { found } = router.match(method, path);
      if (!found) throw notFound('page not found');
      const ctx: ApiContext = {
        req,
        res,
        upgrade: ex.upgrade,
        params: found.params,
        query,
        version,
        takeOver: () => takeOverConnection(ex),
        readJsonObject: async (limit) =>
          ex.upgrade
            ? jsonObject(parseJsonBody(await readUpgradeBody(ex, limit), req.headers['content-type']))
            : readJsonObject(req, limit),
      };
      await found.handler(ctx);
    } catch (err) {
      if ((res as unknown as { hijacked?: boolean }).hijacked) {
        log.debug('error on a hijacked connection', { error: String(err) });
        (ex.upgrade?.socket ?? req.socket).destroy();
        return;
      }
      sendEngineError(res, err, log);
    } finally {
      if (log.enabled('debug'))
        log.debug('request', { method: req.method, url: req.url, status: res.statusCode });
    }
  };
  const guard = opts.guard;
  const tls = opts.tls;
  return createExchangeServer(
    (ex) => {
      const { req, res } = ex;
      // What this request's code throws where nobody catches it (a timer, a promise nobody
      // awaits) ends this request alone: a 500 when nothing was sent, else a cut connection.
      const fault: RequestFault = {
        req,
        res,
        log: (err, origin) => {
          log.error('uncaught exception in a request', {
            method: req.method,
            url: req.url,
            origin,
            error: errorMessage(err),
            stack: err instanceof Error ? err.stack : undefined,
          });
          // a taken-over connection has no response to answer on: the stream ends
          if ((res as unknown as { hijacked?: boolean }).hijacked)
            (ex.upgrade?.socket ?? req.socket).destroy();
        },
        answer: (err) => sendEngineError(res, systemError(`internal error: ${errorMessage(err)}`), log),
      };
      guardRequest(fault, () => {
        handle(ex).catch((err) => endFaultyRequest(fault, err, 'handler'));
      });
    },
    {
      guard,
      rawBody: buildBodyBelowParser,
      create: tls
        ? (listener) =>
            createHttpsServer(
              { ...tls, ...guard?.tlsServerOptions(), keepAlive: true, allowHalfOpen: true },
              listener,
            )
        : undefined,
    },
  );
}
