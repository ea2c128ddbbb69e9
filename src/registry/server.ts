import { mkdir, readFile } from 'node:fs/promises';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { errorMessage, forbidden } from '../common/errors.js';
import { Logger } from '../common/log.js';
import { hasBody } from '../http/body.js';
import { ConnectionGuard, type ErrorBody, plainErrorBody } from '../http/connection-limits.js';
import { installCrashGuard } from '../http/crash-guard.js';
import { responseOnSocket } from '../http/server.js';
import { createRegistryApp, type ExtraRoute, type RateLimiter, type RegistryApp } from './app.js';
import type { Authorizer } from './auth/authorizer.js';
import { parseAddr, type RegistryConfig } from './config.js';
import { RegistryError, sendError } from './errors.js';
import type { OnlineGc } from './gc/online.js';
import type { Notifier } from './notifications/notifier.js';
import { FilesystemDriver } from './storage/filesystem.driver.js';
import { LEFTOVER_AGE_MS, type LeftoverReport, sweepLeftovers } from './storage/leftovers.js';

/**
 * What the registry answers on its own to a connection past its caps: 429 in the distribution
 * error format (TOOMANYREQUESTS, as the rate limiter), the rest as plain text (Go's net/http,
 * which answers them in the reference registry).
 */
const registryErrorBody: ErrorBody = (status, message) =>
  status === 429
    ? {
        contentType: 'application/json; charset=utf-8',
        body: JSON.stringify({ errors: [{ code: 'TOOMANYREQUESTS', message, detail: null }] }),
      }
    : plainErrorBody(status, message);

/** What an embedding program plugs into the registry (auth, rate limiting, the token endpoint). */
export interface RegistryHooks {
  authorizer?: Authorizer;
  rateLimiter?: RateLimiter;
  extraRoutes?: ExtraRoute[];
  /** Access log sink; default: stdout unless the config disables the access log. */
  accessLog?: (line: string) => void;
  log?: Logger;
}

export interface RunningRegistry {
  /** Base URL, e.g. http://127.0.0.1:5000 (the bound port when the config asked for port 0). */
  url: string;
  host: string;
  port: number;
  app: RegistryApp;
  server: Server;
  /** Purge abandoned uploads now (what the periodic purger does). Returns the purged paths. */
  purgeUploads(): Promise<string[]>;
  /** The sweep of what killed writes left behind, started with the server (storage/leftovers.ts). */
  leftovers: Promise<LeftoverReport>;
  /** Garbage collection inside the registry (`berth.gc`), when configured. */
  gc?: OnlineGc;
  /** The notification senders (`notifications.endpoints`), when configured. */
  notifier?: Notifier;
  /** Sweep leftovers older than a minute now (also done with every upload purge). */
  sweepLeftovers(): Promise<LeftoverReport>;
  close(): Promise<void>;
}

/** Start serving a configuration: storage, the app, HTTP(S), the upload purger. */
export async function serveRegistry(
  config: RegistryConfig,
  hooks: RegistryHooks = {},
): Promise<RunningRegistry> {
  const log = hooks.log ?? new Logger(config.log.level, 'registry');
  const root = config.storage.filesystem.rootdirectory;
  await mkdir(root, { recursive: true });
  const driver = new FilesystemDriver(root);
  const { host, port } = parseAddr(config.http.addr);
  let accessLog = config.log.accesslog.disabled ? undefined : hooks.accessLog;
  if (!config.log.accesslog.disabled && !accessLog) {
    // A closed stdout (EPIPE) must not take the registry down.
    if (process.stdout.listenerCount('error') === 0) process.stdout.on('error', () => {});
    accessLog = (line: string) => {
      if (process.stdout.writable) process.stdout.write(`${line}\n`);
    };
  }
  const purging = config.storage.maintenance.uploadpurging;
  // berth.gc: garbage collection inside the registry, and its admin endpoint.
  let onlineGc: OnlineGc | undefined;
  const extraRoutes = [...(hooks.extraRoutes ?? [])];
  if (config.berth.gc?.endpoint)
    extraRoutes.push(gcRoute(() => onlineGc, hooks.authorizer, config.berth.gc.admins));
  const app = createRegistryApp({
    driver,
    authorizer: hooks.authorizer,
    rateLimiter: hooks.rateLimiter,
    extraRoutes,
    deleteEnabled: config.storage.delete.enabled,
    deleteTags: config.berth.deletetags,
    readOnly: config.storage.maintenance.readonly.enabled,
    maxEntries: Math.max(1, config.berth.pagination.maxentries),
    referrersPageSize: Math.max(1, config.berth.pagination.referrers),
    automaticCrossmount: config.berth.crossmount.automatic,
    relativeUrls: config.http.relativeurls,
    tls: config.http.tls !== undefined,
    uploadMaxAgeMs: purging.ageMs,
    manifestCacheEntries: config.berth.cache.manifests.entries,
    manifestCacheBytes: config.berth.cache.manifests.bytes,
    manifestMaxBytes: config.berth.limits.manifestsize,
    blobMaxBytes: config.berth.limits.blobsize,
    uploadsPerClient: config.berth.limits.uploadsperclient,
    log,
    accessLog,
  });

  // The proxy, garbage collection and notifications are loaded only when configured (idle RSS).
  if (config.proxy) {
    const { PullThroughProxy } = await import('./proxy/proxy.js');
    app.state.proxy = new PullThroughProxy(config.proxy, app.state.store, log.child('proxy'));
    if (!config.storage.maintenance.readonly.enabled) app.state.proxy.expiry.start();
    log.info('pull-through cache', { remoteurl: config.proxy.remoteurl });
  }
  if (config.berth.gc) {
    const { OnlineGc } = await import('./gc/online.js');
    onlineGc = new OnlineGc(config.berth.gc, driver, app.state.gcGuard, log.child('gc'));
    if (!config.storage.maintenance.readonly.enabled) onlineGc.start();
  }
  // Notifications: the senders start with what an earlier process left queued.
  let notifier: Notifier | undefined;
  if (config.notifications.endpoints.length > 0) {
    const { Notifier } = await import('./notifications/notifier.js');
    notifier = new Notifier(
      config.notifications.endpoints,
      driver,
      log,
      undefined,
      config.notifications.includeReferences,
    );
    await notifier.start();
    app.state.notifier = notifier;
  }

  // Connection caps (berth.connections): 431, 408, 429 and stalled bodies, before the app sees a
  // request; the guard also answers what node's parser refuses (400).
  const guard = new ConnectionGuard(config.berth.connections, registryErrorBody, log);
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (guard.admit(req, res)) app.handle(req, res);
  };
  let server: Server;
  if (config.http.tls) {
    const [cert, key] = await Promise.all([
      readFile(config.http.tls.certificate),
      readFile(config.http.tls.key),
    ]);
    // node:https (and TLS) is loaded only for a TLS configuration.
    const { createServer: createHttpsServer } = await import('node:https');
    server = createHttpsServer({ cert, key, keepAlive: true, ...guard.tlsServerOptions() }, handle);
  } else {
    server = createHttpServer({ keepAlive: true }, handle);
  }
  guard.attach(server);
  server.on('connection', (socket) => socket.setNoDelay(true));
  // CONNECT is answered as any method no route takes (node would close such a connection)
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    const res = responseOnSocket(req, socket);
    if (guard.admit(req, res, true)) app.handle(req, res);
  });
  // A request that asks to upgrade (no registry API does) is answered as a plain one, as the
  // reference registry does, then the connection closes: node parses nothing more on a
  // connection once it saw an Upgrade, so keeping it open would leave what follows unanswered.
  // Its body would be in the raw stream, not in the request: such a request is refused.
  server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    const res = responseOnSocket(req, socket);
    if (!guard.admit(req, res, true)) return;
    if (hasBody(req)) {
      sendError(
        req,
        res,
        new RegistryError(
          'UNSUPPORTED',
          'a request that asks to upgrade the connection cannot carry a body',
          undefined,
          400,
        ),
      );
      return;
    }
    app.handle(req, res);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => {
      void notifier?.stop();
      reject(err);
    });
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // From here on, an exception a request's code throws where nobody catches it ends that
  // request alone (src/http/crash-guard.ts); released by close().
  const releaseCrashGuard = installCrashGuard();
  const bound = (server.address() as AddressInfo).port;
  notifier?.setSourcePort(bound);
  const scheme = config.http.tls ? 'https' : 'http';
  const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  const url = `${scheme}://${urlHost}:${bound}`;

  const purgeUploads = async (): Promise<string[]> => {
    const purged = await app.state.uploads.purge(purging.ageMs, purging.dryrun);
    if (purged.length > 0) {
      log.info(purging.dryrun ? 'uploads that would be purged' : 'purged abandoned uploads', {
        count: purged.length,
      });
    }
    return purged;
  };
  const readOnly = config.storage.maintenance.readonly.enabled;
  const stopping = new AbortController();
  const sweep = async (): Promise<LeftoverReport> => {
    if (readOnly) return { temporary: [], deadTags: [] };
    const report = await sweepLeftovers(
      driver,
      app.state.store,
      Date.now() - LEFTOVER_AGE_MS,
      false,
      stopping.signal,
    );
    if (report.temporary.length > 0 || report.deadTags.length > 0) {
      log.info('swept what killed writes left behind', {
        temporaryFiles: report.temporary.length,
        deadTags: report.deadTags.map((t) => `${t.repository}:${t.tag}`),
      });
    }
    return report;
  };
  const sweepLogged = () =>
    sweep().catch((err): LeftoverReport => {
      log.warn('sweeping leftovers failed', { error: errorMessage(err) });
      return { temporary: [], deadTags: [] };
    });
  const leftovers = sweepLogged();
  const timers: NodeJS.Timeout[] = [];
  if (purging.enabled && !readOnly) {
    const run = () => {
      purgeUploads().catch((err) => log.warn('upload purge failed', { error: errorMessage(err) }));
      void sweepLogged();
    };
    // Like the reference registry: a first purge soon after start (jittered), then every interval.
    const first = setTimeout(run, Math.min(purging.intervalMs, 5_000 + Math.random() * 55_000));
    const every = setInterval(run, Math.max(1_000, purging.intervalMs));
    first.unref();
    every.unref();
    timers.push(first, every);
  }

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      for (const t of timers) clearTimeout(t);
      stopping.abort();
      server.close(() => {
        releaseCrashGuard();
        void notifier?.stop();
        void onlineGc?.stop();
        void app.state.proxy?.expiry.stop();
        // A sweep in progress stops at its next directory; wait for it before storage goes.
        void leftovers.then(() => resolve());
      });
      server.closeIdleConnections();
      // Give in-flight requests a moment, then cut what is left.
      const force = setTimeout(() => server.closeAllConnections(), 5_000);
      force.unref();
    });
    return closed;
  };
  log.info('registry listening', { url, root });
  return {
    url,
    host,
    port: bound,
    app,
    server,
    purgeUploads,
    leftovers,
    sweepLeftovers: sweep,
    notifier,
    gc: onlineGc,
    close,
  };
}

/**
 * `POST /berth/gc`: one garbage collection now, answered with its counts (200 JSON). With auth
 * on it needs admin credentials: access `registry:gc:*` (any valid htpasswd user; a token that
 * grants it) and, when `admins` is not empty, a user among them (else 403 DENIED). 503
 * UNAVAILABLE while another run goes on.
 */
function gcRoute(
  gc: () => OnlineGc | undefined,
  authorizer: Authorizer | undefined,
  admins: string[],
): ExtraRoute {
  return {
    method: ['POST'],
    path: '/berth/gc',
    async handler(req, res) {
      try {
        if (authorizer) {
          const grant = await authorizer.authorize(req, [{ type: 'registry', name: 'gc', actions: ['*'] }]);
          if (admins.length > 0 && !(grant.user && admins.includes(grant.user)))
            throw forbidden(`${grant.user ?? 'an anonymous user'} may not run the garbage collection`);
        }
        const runner = gc();
        if (!runner)
          throw new RegistryError('UNAVAILABLE', 'garbage collection is not ready', undefined, 503);
        const report = await runner.run();
        const { summarize } = await import('./gc/online.js');
        const body = JSON.stringify(summarize(report));
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      } catch (err) {
        sendError(req, res, err);
      }
    },
  };
}
