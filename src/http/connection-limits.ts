import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ConnectionLimits } from '../common/connection-limits.js';
import type { Logger } from '../common/log.js';
import { failBody, hasBody } from './body.js';
import { requestBody } from './raw-body.js';

export type { ConnectionLimits };

/** How a server words an error it answers on its own behalf (its handler never saw the request). */
export type ErrorBody = (status: number, message: string) => { contentType: string; body: string };

/** A plain-text error body, as Go's net/http answers what it refuses before any handler. */
export const plainErrorBody: ErrorBody = (status, message) => ({
  contentType: 'text/plain; charset=utf-8',
  body: `${status} ${STATUS_CODES[status] ?? ''}: ${message}`,
});

/** Sockets taken over by a handler (attach, exec): their body is no request body any more. */
const released = new WeakSet<object>();

/**
 * Tell the guard that a connection's request body is over and what follows is a stream (a
 * hijacked connection, an upgrade request whose body was read): it stops watching it.
 */
export function releaseConnection(socket: Duplex): void {
  released.add(socket);
}

// biome-ignore lint/suspicious/noExplicitAny: an event listener of any signature.
export type Listener = (...args: any[]) => void;

/** Socket listeners of the HTTP kit that a take-over (takeOverConnection) must leave in place. */
export const keptOnTakeOver = new WeakSet<Listener>();

/** Mark a socket listener as the kit's own: it outlives the socket's take-over. */
export function keepOnTakeOver<L extends Listener>(listener: L): L {
  keptOnTakeOver.add(listener);
  return listener;
}

/** The key of one live TCP connection, the same on its raw and its TLS socket. */
function connectionKey(socket: Socket): string | undefined {
  return socket.remotePort === undefined ? undefined : `${socket.remoteAddress}|${socket.remotePort}`;
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/**
 * The caps of one server. `attach` once, after the server is made and before it listens; call
 * `admit` first thing in the request (and upgrade) handler: when it answers false, the request
 * was answered (429) and must not be handled.
 */
export class ConnectionGuard {
  /** Open connections by client key (its address, or `local` for a unix socket). */
  private readonly open = new Map<string, number>();
  /** Connections accepted past their client's cap: their first request is answered 429. */
  private readonly overTcp = new Set<string>();
  private readonly overLocal = new WeakSet<object>();

  constructor(
    readonly limits: ConnectionLimits,
    private readonly errorBody: ErrorBody,
    private readonly log: Logger,
  ) {}

  /** Options for https.createServer: a TLS handshake is part of getting the headers in. */
  tlsServerOptions(): { handshakeTimeout?: number } {
    return this.limits.headersTimeoutMs > 0 ? { handshakeTimeout: this.limits.headersTimeoutMs } : {};
  }

  attach(server: Server): void {
    const l = this.limits;
    // node reads maxHeaderSize from the server for every new connection's parser
    (server as Server & { maxHeaderSize?: number }).maxHeaderSize = l.maxHeaderBytes || undefined;
    server.requestTimeout = 0;
    server.headersTimeout = l.headersTimeoutMs;
    server.keepAliveTimeout = l.keepAliveTimeoutMs;
    // how often node looks for connections past headersTimeout (read when it starts listening)
    if (l.headersTimeoutMs > 0) {
      (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(
        30_000,
        Math.max(25, Math.floor(l.headersTimeoutMs / 4)),
      );
    }
    server.on('connection', (socket: Socket) => this.count(socket));
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) =>
      this.answerClientError(err, socket),
    );
  }

  private count(socket: Socket): void {
    const key = socket.remoteAddress ?? 'local';
    const local = socket.remoteAddress === undefined;
    const cap = local ? this.limits.maxLocalConnections : this.limits.maxConnectionsPerClient;
    const n = (this.open.get(key) ?? 0) + 1;
    this.open.set(key, n);
    const tcpKey = connectionKey(socket);
    if (cap > 0 && n > cap) {
      if (local) this.overLocal.add(socket);
      else if (tcpKey) this.overTcp.add(tcpKey);
    }
    socket.once(
      'close',
      keepOnTakeOver(() => {
        const left = (this.open.get(key) ?? 1) - 1;
        if (left > 0) this.open.set(key, left);
        else this.open.delete(key);
        if (tcpKey) this.overTcp.delete(tcpKey);
      }),
    );
  }

  /** Open connections of one client key (its address, or `local`), for tests and logs. */
  openConnections(key: string): number {
    return this.open.get(key) ?? 0;
  }

  /**
   * Admit a request: false when its connection is past its client's cap (answered 429, closed).
   * Otherwise the request's body, if any, is watched for stalls. `upgrade`: the request came
   * through node's upgrade event (its body, if any, is on the socket, not in `req`).
   */
  admit(req: IncomingMessage, res: ServerResponse, upgrade = false): boolean {
    const socket = req.socket;
    const key = connectionKey(socket);
    if ((key !== undefined && this.overTcp.has(key)) || this.overLocal.has(socket)) {
      const local = key === undefined;
      const cap = local ? this.limits.maxLocalConnections : this.limits.maxConnectionsPerClient;
      const message = local
        ? `too many open connections on this socket (the limit is ${cap})`
        : `too many open connections from ${socket.remoteAddress} (the limit is ${cap} per client)`;
      this.log.warn('connection refused: over the connection limit', {
        client: socket.remoteAddress ?? 'local',
        limit: cap,
      });
      req.resume();
      this.answer(res, 429, message);
      return false;
    }
    if (this.limits.bodyIdleTimeoutMs > 0 && hasBody(req)) this.watchBody(req, res, upgrade);
    return true;
  }

  /** Answer on a response the handler has not started, then close the connection. */
  private answer(res: ServerResponse, status: number, message: string): void {
    if (res.headersSent || res.writableEnded) {
      res.socket?.destroy();
      return;
    }
    const { contentType, body } = this.errorBody(status, message);
    res.statusCode = status;
    res.shouldKeepAlive = false;
    res.setHeader('Connection', 'close');
    res.setHeader('Content-Type', contentType);
    res.setHeader('Content-Length', Buffer.byteLength(body));
    const socket = res.socket;
    res.end(body, () => socket?.destroy());
  }

  /**
   * Cut a request whose client stopped sending its body: no byte arrived for bodyIdleTimeoutMs
   * while nothing read was left waiting for the server (a server reading slowly holds bytes in
   * the request's buffer, and its client is not to blame). An upgrade request's body is on its
   * socket (readUpgradeBody): watched until it was read or the connection was taken over.
   */
  private watchBody(req: IncomingMessage, res: ServerResponse, upgrade: boolean): void {
    const idle = this.limits.bodyIdleTimeoutMs;
    const socket = req.socket;
    // a body read below the parser (RawChunkedBody) is watched as a request's: bytes it holds
    // wait for the server, and it is done once complete
    const body = requestBody(req);
    const buffered = (): number => (upgrade ? socket.readableLength : body.readableLength);
    const done = (): boolean =>
      socket.destroyed || released.has(socket) || (!upgrade && (req.complete || req.destroyed));
    let seen = socket.bytesRead;
    let lastProgress = Date.now();
    const timer = setInterval(
      () => {
        if (done()) {
          clearInterval(timer);
          return;
        }
        const now = Date.now();
        if (socket.bytesRead !== seen || buffered() > 0) {
          seen = socket.bytesRead;
          lastProgress = now;
          return;
        }
        if (now - lastProgress < idle) return;
        clearInterval(timer);
        this.log.warn('request body stalled: connection closed', {
          client: socket.remoteAddress ?? 'local',
          method: req.method,
          url: req.url,
          idle: seconds(idle),
        });
        this.answer(res, 408, `the request body stalled: no data received for ${seconds(idle)}`);
        // whatever the answer's fate, the connection goes
        setTimeout(() => socket.destroy(), 1000).unref();
      },
      Math.max(10, Math.floor(idle / 4)),
    );
    timer.unref();
    // the socket outlives the request on a keep-alive connection: its listener goes with the
    // watch (else one per request piles up there, each holding its request and response)
    const stop = (): void => {
      clearInterval(timer);
      socket.off('close', stop);
    };
    socket.once('close', stop);
    if (!upgrade) req.once('end', stop);
  }

  /**
   * What node's parser refused before any handler: headers too large (431), headers too slow
   * (408), malformed (400). Answered when the socket can still take it, as node's own default.
   */
  private answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
    const code = err.code ?? '';
    const limits = this.limits;
    let status = 400;
    let message = `malformed request: ${err.message}`;
    if (code === 'HPE_HEADER_OVERFLOW') {
      status = 431;
      message = `request headers exceed the limit of ${limits.maxHeaderBytes} bytes`;
    } else if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      status = 408;
      message = `request headers not received within ${seconds(limits.headersTimeoutMs)}`;
    } else if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'HPE_INVALID_EOF_STATE') {
      socket.destroy();
      return;
    }
    const remote = (socket as Socket).remoteAddress ?? 'local';
    if (status === 400) this.log.debug('malformed request', { client: remote, error: err.message });
    else this.log.warn('request refused', { client: remote, status, reason: message });
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const body = inFlight?.req;
    if (inFlight?.headersSent && body && !body.complete) {
      // the body of a request whose answer has begun is malformed (a bad chunk): it can never
      // end, so whatever reads it fails now instead of waiting for ever; its answer finishes
      // (below), then the refusal, and the connection, whose framing is lost, closes
      failBody(body, err);
    }
    if (inFlight?.headersSent && !inFlight.writableFinished) {
      // bytes after a request whose answer is still being written (a stream, a progress): that
      // answer finishes first, then this one, in order, and the connection closes
      inFlight.once('finish', () => this.writeRefusal(socket, status, message));
      inFlight.once('close', () => {
        if (!inFlight.writableFinished) socket.destroy();
      });
      return;
    }
    this.writeRefusal(socket, status, message);
  }

  /** A raw answer to a request node's parser refused, then the connection closes. */
  private writeRefusal(socket: Duplex, status: number, message: string): void {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const { contentType, body } = this.errorBody(status, message);
    try {
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: ${contentType}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    } catch {
      socket.destroy();
      return;
    }
    setTimeout(() => socket.destroy(), 1000).unref();
  }
}
