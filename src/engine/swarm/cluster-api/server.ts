import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { BerthError, errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { serveAgentPath } from './agent-paths.js';
import type { AgentApiHandlers } from './assignments.types.js';
import type { ClusterApiHandlers, JoinCall } from './protocol.js';

/**
 * The cluster API: https on the ListenAddr port, TLS 1.2 or newer, a client certificate from the
 * swarm's CA required on every path but `GET /v1/ca` and `POST /v1/join` (which a node that has
 * no certificate yet calls, its token the proof). Errors are JSON `{message}` with the status of
 * their kind (this server's one mapping).
 */

const STATUS: Record<string, number> = {
  InvalidParameter: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  NotImplemented: 501,
  Unavailable: 503,
  TooLarge: 413,
};

const BODY_LIMIT = 256 * 1024;

export interface ClusterApiServer {
  port: number;
  /** A renewed certificate (with the root's) and key, for the connections from now on. */
  useCertificate(certChainPem: string, keyPem: string): void;
  /** The roots client certificates may chain to, from now on (both during a root rotation). */
  useTrust(caPem: string): void;
  close(): Promise<void>;
}

export interface ClusterApiOptions {
  host: string;
  port: number;
  /** The node's certificate followed by the root's (the chain a joining node verifies). */
  certChainPem: string;
  keyPem: string;
  caPem: string;
  handlers: ClusterApiHandlers;
  /** The agents' paths (`/v1/assignments`, `/v1/status`, `/v1/logs/<subscription>`). */
  agents?: AgentApiHandlers;
  log: Logger;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': data.length });
  res.end(data);
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > BODY_LIMIT) throw new BerthError('TooLarge', 'request body too large');
    chunks.push(c as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  } catch {
    throw new BerthError('InvalidParameter', 'malformed JSON body');
  }
}

/** The node ID of a verified client certificate (its CN), or undefined. */
function clientNode(req: IncomingMessage): string | undefined {
  const socket = req.socket as TLSSocket;
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  const cn = cert?.subject?.CN;
  return typeof cn === 'string' && cn !== '' ? cn : undefined;
}

/** Whether the verified client certificate says swarm-manager. */
function isManager(req: IncomingMessage): boolean {
  const ou = (req.socket as TLSSocket).getPeerCertificate()?.subject?.OU;
  return (Array.isArray(ou) ? ou : [ou]).includes('swarm-manager');
}

function asJoinCall(v: unknown): JoinCall {
  const o = (v && typeof v === 'object' ? v : {}) as Record<string, unknown>;
  const s = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : '');
  const d =
    o.Description && typeof o.Description === 'object'
      ? (o.Description as JoinCall['Description'])
      : undefined;
  if (!d) throw new BerthError('InvalidParameter', 'a join needs the node description');
  return {
    Token: s('Token'),
    CSR: s('CSR'),
    Availability: s('Availability'),
    AdvertiseHost: s('AdvertiseHost'),
    ListenAddr: s('ListenAddr'),
    DataPathAddr: s('DataPathAddr'),
    Description: d,
    ...(typeof o.PeerCSR === 'string' ? { PeerCSR: o.PeerCSR } : {}),
    ...(typeof o.PeerPort === 'number' && Number.isInteger(o.PeerPort) ? { PeerPort: o.PeerPort } : {}),
  };
}

/** Who may call a path: anyone (a node without a certificate yet), any node of the swarm, or a manager. */
type Caller = 'anyone' | 'node' | 'manager';

interface Route {
  method: 'GET' | 'POST';
  path: string;
  caller: Caller;
  /** `node` is the caller's node ID (its certificate's CN); '' for `anyone`. */
  handle(req: IncomingMessage, node: string): Promise<unknown>;
}

function stringField(body: unknown, name: string): string {
  const v = body && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
  return typeof v === 'string' ? v : '';
}

/** The cluster API's paths and who may call them. */
function routesOf(h: ClusterApiHandlers): Route[] {
  return [
    { method: 'GET', path: '/v1/ca', caller: 'anyone', handle: async () => ({ RootCA: await h.rootCa() }) },
    {
      method: 'POST',
      path: '/v1/join',
      caller: 'anyone',
      handle: async (req) => h.join(asJoinCall(await readBody(req)), req.socket.remoteAddress ?? ''),
    },
    { method: 'POST', path: '/v1/heartbeat', caller: 'node', handle: (_req, node) => h.heartbeat(node) },
    {
      method: 'POST',
      path: '/v1/renew',
      caller: 'node',
      handle: async (req, node) => {
        const body = await readBody(req);
        const peerCsr = stringField(body, 'PeerCSR');
        const trustRoot = stringField(body, 'TrustRoot');
        return h.renew(node, {
          CSR: stringField(body, 'CSR'),
          ...(peerCsr ? { PeerCSR: peerCsr } : {}),
          ...(trustRoot ? { TrustRoot: trustRoot } : {}),
        });
      },
    },
    {
      method: 'POST',
      path: '/v1/promote',
      caller: 'manager',
      handle: async (req, node) => {
        await h.promote(node, stringField(await readBody(req), 'MemberID'));
        return {};
      },
    },
    {
      method: 'POST',
      path: '/v1/manager',
      caller: 'manager',
      handle: async (req, node) => {
        const body = await readBody(req);
        const port = body && typeof body === 'object' ? (body as { PeerPort?: unknown }).PeerPort : undefined;
        return h.addManager(node, {
          PeerCSR: stringField(body, 'PeerCSR'),
          PeerPort: typeof port === 'number' ? port : 0,
          AdvertiseHost: stringField(body, 'AdvertiseHost'),
        });
      },
    },
  ];
}

export async function startClusterApi(opts: ClusterApiOptions): Promise<ClusterApiServer> {
  const routes = routesOf(opts.handlers);
  const server: Server = createServer(
    {
      cert: opts.certChainPem,
      key: opts.keyPem,
      ca: opts.caPem,
      requestCert: true,
      // join and the CA come before a node has a certificate: each path checks for itself
      rejectUnauthorized: false,
      minVersion: 'TLSv1.2',
    },
    (req, res) => {
      void (async () => {
        const path = (req.url ?? '').split('?')[0];
        const route = routes.find((r) => r.method === req.method && r.path === path);
        if (!route) {
          // the agents' paths (agent-paths.ts): any node of the swarm, for itself
          if (
            opts.agents &&
            (path === '/v1/assignments' ||
              path === '/v1/status' ||
              path?.startsWith('/v1/logs/') ||
              path?.startsWith('/v1/attachments'))
          ) {
            const caller = clientNode(req);
            if (!caller)
              return send(res, 401, { message: 'a client certificate from this swarm is required' });
            if (await serveAgentPath(opts.agents, caller, req, res, readBody)) return;
          }
          return send(res, 404, { message: `no such path: ${req.method} ${path}` });
        }
        let node = '';
        if (route.caller !== 'anyone') {
          node = clientNode(req) ?? '';
          if (!node) return send(res, 401, { message: 'a client certificate from this swarm is required' });
          if (route.caller === 'manager' && !isManager(req))
            return send(res, 403, { message: 'only a manager certificate may do this' });
        }
        return send(res, 200, await route.handle(req, node));
      })().catch((err: unknown) => {
        const status = err instanceof BerthError ? (STATUS[err.kind] ?? 500) : 500;
        if (status === 500)
          opts.log.warn('cluster API request failed', { url: req.url, error: errorMessage(err) });
        if (!res.headersSent) send(res, status, { message: errorMessage(err) });
        else res.destroy();
      });
    },
  );
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const current = { cert: opts.certChainPem, key: opts.keyPem, ca: opts.caPem };
  const apply = () => server.setSecureContext({ ...current, minVersion: 'TLSv1.2' });
  return {
    port: typeof address === 'object' && address ? address.port : opts.port,
    useCertificate: (certChainPem, keyPem) => {
      current.cert = certChainPem;
      current.key = keyPem;
      apply();
    },
    useTrust: (caPem) => {
      if (caPem === current.ca) return;
      current.ca = caPem;
      apply();
    },
    close: () =>
      new Promise<void>((resolve) => {
        // a socket still in its TLS handshake is no HTTP connection yet: close() would wait on it
        const timer = setTimeout(() => {
          for (const s of open) s.destroy();
          resolve();
        }, 2000);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
