import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
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
  /** The agents' paths (`/v1/assignments`, `/v1/status`). */
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

export async function startClusterApi(opts: ClusterApiOptions): Promise<ClusterApiServer> {
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
        if (req.method === 'GET' && path === '/v1/ca')
          return send(res, 200, { RootCA: opts.handlers.rootCa() });
        if (req.method === 'POST' && path === '/v1/join') {
          const call = asJoinCall(await readBody(req));
          return send(res, 200, await opts.handlers.join(call, req.socket.remoteAddress ?? ''));
        }
        const node = clientNode(req);
        if (!node) return send(res, 401, { message: 'a client certificate from this swarm is required' });
        if (req.method === 'POST' && path === '/v1/heartbeat')
          return send(res, 200, await opts.handlers.heartbeat(node));
        if (req.method === 'POST' && path === '/v1/promote') {
          if (!isManager(req)) return send(res, 403, { message: 'only a manager certificate may do this' });
          const body = (await readBody(req)) as { MemberID?: unknown };
          await opts.handlers.promote(node, typeof body.MemberID === 'string' ? body.MemberID : '');
          return send(res, 200, {});
        }
        if (opts.agents && (await serveAgentPath(opts.agents, node, req, res, readBody))) return;
        return send(res, 404, { message: `no such path: ${req.method} ${path}` });
      })().catch((err: unknown) => {
        const status = err instanceof BerthError ? (STATUS[err.kind] ?? 500) : 500;
        if (status === 500)
          opts.log.warn('cluster API request failed', { url: req.url, error: errorMessage(err) });
        if (!res.headersSent) send(res, status, { message: errorMessage(err) });
        else res.destroy();
      });
    },
  );
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
  return {
    port: typeof address === 'object' && address ? address.port : opts.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
