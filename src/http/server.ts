import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  ServerResponse,
} from 'node:http';
import type { Duplex } from 'node:stream';
import { BerthError, invalidParameter } from '../common/errors.js';
import { onceAny } from '../common/once-any.js';
import {
  type ConnectionGuard,
  keepOnTakeOver,
  keptOnTakeOver,
  type Listener,
  releaseConnection,
} from './connection-limits.js';
import { RawChunkedBody, setRequestBody } from './raw-body.js';

/**
 * The connection of one request. For requests that asked to upgrade (`Upgrade: tcp`, as docker
 * attach and exec start do) `upgrade` holds the raw socket and the bytes read past the headers;
 * a handler may hijack it or answer through `res` as usual.
 */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  upgrade?: { socket: Duplex; head: Buffer };
}

export type ExchangeHandler = (ex: Exchange) => void;

export interface ExchangeServerOptions {
  /** Connection caps (header size, timeouts, connections per client, stalled bodies). */
  guard?: ConnectionGuard;
  /**
   * Make the server (https.createServer for TLS) with node's request listener; default: a plain
   * HTTP server. Its options must include `keepAlive: true`.
   */
  create?: (listener: RequestListener) => Server;
  /**
   * Requests whose body is read below node's HTTP parser (said of each request as its headers
   * are parsed, synchronously): when a chunked HTTP/1.1 request is one, the connection is taken
   * from the parser right after its headers and the body decoded from the socket (RawChunkedBody,
   * `requestBody(req)`); the answer goes through `res` as usual, after which the connection goes
   * back to node's server when it is kept alive and its body was read to its end, else closes.
   */
  rawBody?: (req: IncomingMessage) => boolean;
}

/**
 * An HTTP server whose upgrade requests reach the same handler as plain ones, with a
 * ServerResponse bound to the socket so that errors are answered the ordinary way. An error event
 * on a request or a response (a client gone, a write after the end) is logged by nobody and ends
 * nothing: each gets a listener, so node never throws it.
 */
export function createExchangeServer(handler: ExchangeHandler, opts: ExchangeServerOptions = {}): Server {
  const guard = opts.guard;
  const listener: RequestListener = (req, res) => {
    req.on('error', ignore);
    res.on('error', ignore);
    if (guard && !guard.admit(req, res)) return;
    handler({ req, res });
  };
  const server = opts.create ? opts.create(listener) : createServer({ keepAlive: true }, listener);
  // every connection, taken over ones too (node's server forgets those): closeServer ends them
  const sockets = new Set<Duplex>();
  connections.set(server, sockets);
  server.on('connection', (socket: Duplex) => {
    sockets.add(socket);
    lingerOnClose(socket);
    socket.on(
      'close',
      keepOnTakeOver(() => sockets.delete(socket)),
    );
  });
  // Upgrade requests, and CONNECT (which node hands over the same way; it reaches the router and
  // is answered as any method no route takes, as Go's server does).
  const onRawExchange = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const res = responseOnSocket(req, socket);
    if (guard && !guard.admit(req, res, true)) return;
    handler({ req, res, upgrade: { socket, head } });
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (rawRequests.has(req)) onRawBody(req, socket, head);
    else onRawExchange(req, socket, head);
  });
  server.on('connect', onRawExchange);
  // A request whose body is read below the parser comes the way of an upgrade: node hands its
  // socket over right after the headers, with the bytes it read past them.
  const onRawBody = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const keepAlive = rawRequests.get(req) ?? false;
    rawRequests.delete(req);
    setUpgraded(req, false);
    const res = rawBodyResponse(req, socket, keepAlive);
    const body = new RawChunkedBody(socket, head, () => {
      // read to its end: an answer may keep the connection (http/body.ts's bodyUnread)
      req.complete = true;
    });
    setRequestBody(req, body);
    res.on('finish', () => {
      if (body.complete && res.shouldKeepAlive && !socket.destroyed && socket.writable) {
        // the next request is node's server's again, on a parser of its own
        res.detachSocket(socket as never);
        socket.off('end', endAfterAnswer);
        nodeConnection?.call(server, socket);
        if (opts.rawBody) takeRawBodies(socket, opts.rawBody);
        idleAfterHandBack(socket, server.keepAliveTimeout);
        socket.resume();
        return;
      }
      // a body not read to its end (an answer given early, a failure) is dropped, then the
      // connection closes
      body.discard();
      socket.end();
    });
    res.on('close', () => body.discard());
    const endAfterAnswer = () => {
      if (!res.writableFinished) socket.destroy();
    };
    socket.on('end', endAfterAnswer);
    // watched as a plain request's body: until it is complete (a raw body is the request's)
    if (guard && !guard.admit(req, res)) return;
    handler({ req, res });
  };
  // node's own listener of new connections (a TLS server's is on `secureConnection`): a
  // connection whose raw body was read goes back to it
  const nodeConnection = (server.listeners(opts.create ? 'secureConnection' : 'connection')[0] ??
    server.listeners('connection')[0]) as ((socket: Duplex) => void) | undefined;
  if (opts.rawBody) {
    const wants = opts.rawBody;
    const hook = (socket: Duplex) => takeRawBodies(socket, wants);
    server.on('connection', hook);
    server.on('secureConnection', hook);
  }
  // Clients (the docker CLI) half-close when they have no stdin; keep writing after their FIN.
  server.on('connection', (socket) => {
    socket.setNoDelay(true);
  });
  if (guard) guard.attach(server);
  else {
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 70_000;
    server.requestTimeout = 0;
  }
  return server;
}

/** Requests whose body is read below the parser, between their headers and their exchange. */
const rawRequests = new WeakMap<IncomingMessage, boolean>();

/** A parser of node's HTTP server: what it calls with each request's headers. */
interface NodeParser {
  onIncoming?: (req: IncomingMessage, keepAlive: boolean) => number;
}

/**
 * Have node's parser of a new connection stop after the headers of each request `wants` (and
 * whose body is chunked, with nothing else in its framing), handing the connection over as for
 * an upgrade: node's server does so for a request it sees `upgrade` on when its parser calls it
 * with the headers (before it parses any of the body).
 */
function takeRawBodies(socket: Duplex, wants: (req: IncomingMessage) => boolean): void {
  const parser = (socket as Duplex & { parser?: NodeParser | null }).parser;
  const incoming = parser?.onIncoming;
  if (!parser || !incoming) return;
  parser.onIncoming = (req, keepAlive) => {
    // a previous answer still being written on this connection (pipelining) keeps node's way
    const busy = (socket as Duplex & { _httpMessage?: unknown })._httpMessage;
    if (!upgraded(req) && !busy && chunkedOnly(req) && wants(req)) {
      setUpgraded(req, true);
      rawRequests.set(req, keepAlive);
    }
    return incoming(req, keepAlive);
  };
}

/** IncomingMessage's `upgrade` (node's own field, not in its types). */
function upgraded(req: IncomingMessage): boolean {
  return (req as IncomingMessage & { upgrade?: boolean }).upgrade === true;
}
function setUpgraded(req: IncomingMessage, value: boolean): void {
  (req as IncomingMessage & { upgrade?: boolean }).upgrade = value;
}

/** An HTTP/1.1 request whose body is framed by `Transfer-Encoding: chunked` alone. */
function chunkedOnly(req: IncomingMessage): boolean {
  const h = req.headers;
  const te = h['transfer-encoding'];
  return (
    req.httpVersion === '1.1' &&
    req.method !== 'CONNECT' &&
    typeof te === 'string' &&
    te.trim().toLowerCase() === 'chunked' &&
    h['content-length'] === undefined &&
    h.expect === undefined
  );
}

/** How long a closing connection keeps reading what its client still sends (lingerOnClose). */
const LINGER_MS = 2000;

/**
 * A lingering close. Node ends a connection that will not be kept (an answer given before its
 * request's body was read: a 404, a 400, a refusal) with destroySoon: end, then destroy. Closing a
 * socket whose client is still sending makes the kernel answer with a reset, and a reset can
 * discard the answer from the client's receive buffer before it reads it: the client sees a
 * broken pipe instead of the error. So, as Go's server does, the answer is sent and the write
 * side closed, and what the client still sends is read and dropped until it closes its side or
 * LINGER_MS pass; only then is the socket destroyed.
 */
function lingerOnClose(socket: Duplex): void {
  const net = socket as Duplex & { destroySoon?: () => void };
  if (typeof net.destroySoon !== 'function') return;
  net.destroySoon = () => {
    if (socket.destroyed) return;
    if (socket.writable) socket.end();
    const done = () => socket.destroy();
    if (socket.readableEnded) return done();
    const timer = setTimeout(done, LINGER_MS);
    timer.unref();
    socket.once('end', done);
    socket.once('close', () => clearTimeout(timer));
    socket.resume();
  };
}

/**
 * A response written straight on a socket node handed over (an upgrade, or a request whose body
 * is read below the parser), kept alive or not: with `keepAlive` the caller gives the connection
 * back to node's server after the answer, or ends it. Errors of the socket, request and response
 * have listeners (node would throw them).
 */
function rawBodyResponse(req: IncomingMessage, socket: Duplex, keepAlive: boolean): ServerResponse {
  socket.on('error', ignore);
  req.on('error', ignore);
  const res = new ServerResponse(req);
  res.on('error', ignore);
  // biome-ignore lint/suspicious/noExplicitAny: assignSocket takes a net.Socket; upgrade sockets are.
  res.assignSocket(socket as any);
  res.shouldKeepAlive = keepAlive;
  return res;
}

/**
 * A connection given back to node's server after a raw body: node arms its keep-alive timeout
 * only after answers it wrote itself, so this one is closed when no byte came within `ms`.
 */
function idleAfterHandBack(socket: Duplex, ms: number): void {
  if (!(ms > 0)) return;
  const net = socket as Duplex & { bytesRead?: number; _httpMessage?: unknown };
  const read = net.bytesRead;
  const timer = setTimeout(() => {
    if (net.bytesRead === read && !net._httpMessage) socket.destroy();
  }, ms);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/** An error listener for streams whose errors are answered elsewhere (or by nobody). */
function ignore(): void {}

/**
 * A ServerResponse bound to the raw socket node hands over for an upgrade or CONNECT request, so
 * that a handler that does not take the connection over answers as usual; the socket ends with
 * the answer. Errors of the socket, request and response have listeners (node would throw them).
 */
export function responseOnSocket(req: IncomingMessage, socket: Duplex): ServerResponse {
  const res = rawBodyResponse(req, socket, false);
  const hijacked = () => (res as unknown as { hijacked?: boolean }).hijacked === true;
  res.on('finish', () => {
    if (!hijacked()) socket.end();
  });
  // the client left (its FIN) during an ordinary answer: end it, as node's server does for plain
  // requests (else a streamed answer nobody reads blocks for ever, holding what it holds)
  socket.on('end', () => {
    if (!hijacked()) socket.destroy();
  });
  return res;
}

const connections = new WeakMap<Server, Set<Duplex>>();

/**
 * Stop a server made by createExchangeServer: no new connections, and every open one ended,
 * taken-over ones (attach sessions) included, which node's close() would wait for forever.
 */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
    for (const socket of connections.get(server) ?? []) socket.destroy();
  });
}

/** Mark an exchange as taken over so the server does not end its socket. */
export function markHijacked(ex: Exchange): void {
  (ex.res as unknown as { hijacked?: boolean }).hijacked = true;
  releaseConnection(ex.upgrade?.socket ?? ex.req.socket);
  if (ex.upgrade) ex.res.detachSocket(ex.upgrade.socket as never);
}

/** Exchanges whose request body has been read (by readUpgradeBody) or dropped already. */
const bodyDone = new WeakSet<Exchange>();

function declaredLength(req: IncomingMessage): number {
  const declared = Number(req.headers['content-length'] ?? 0);
  return Number.isSafeInteger(declared) && declared > 0 ? declared : 0;
}

/**
 * The body of an upgrade request (`Content-Length` bytes; docker exec start sends its options so):
 * node hands such a request over right after its headers, so the body is in the bytes read past
 * them and what follows on the socket. Read once; what comes after it stays for the stream.
 */
export async function readUpgradeBody(ex: Exchange, limit = 1024 * 1024): Promise<Buffer> {
  const up = ex.upgrade;
  if (!up || bodyDone.has(ex)) return Buffer.alloc(0);
  bodyDone.add(ex);
  const declared = declaredLength(ex.req);
  if (declared > limit)
    throw new BerthError('TooLarge', `request body of ${declared} bytes exceeds the limit of ${limit}`);
  up.socket.pause();
  const inHead = Math.min(declared, up.head.length);
  const first = up.head.subarray(0, inHead);
  up.head = up.head.subarray(inHead);
  const rest = await readBytes(up.socket, declared - inHead, true);
  if (first.length + rest.length < declared) {
    throw invalidParameter('the client closed the connection before the request body was complete');
  }
  // the request is in; what comes next on the socket is the stream's
  releaseConnection(up.socket);
  return Buffer.concat([first, rest]);
}

/**
 * The raw connection of an exchange, taken away from node's HTTP server, returned paused and
 * positioned after the request: the caller attaches its listeners, then resumes it. For an upgrade
 * request that is the upgraded socket, with the bytes node read past the headers put back. For a
 * plain request it is the request's socket, taken as node does it for upgrades: detached from the
 * response, without the server's listeners (so a half-close does not end it and bytes after the
 * headers are not parsed as a next request) and with the parser unconsumed. dockerd hijacks
 * attach connections with or without `Upgrade`, and clients send stdin on both.
 *
 * A request body not read by the handler (`Content-Length`; dockerode sends its attach options as
 * JSON) belongs to the request, not to the stream: it is read and dropped first, as dockerd never
 * lets it reach the container.
 */
export async function takeOverConnection(ex: Exchange): Promise<Duplex> {
  markHijacked(ex);
  let bodyLeft = bodyDone.has(ex) ? 0 : declaredLength(ex.req);
  bodyDone.add(ex);
  let socket: Duplex;
  let head: Buffer = Buffer.alloc(0);
  if (ex.upgrade) {
    socket = ex.upgrade.socket;
    socket.pause();
    head = ex.upgrade.head;
    ex.upgrade.head = Buffer.alloc(0);
  } else {
    const plain = ex.req.socket;
    socket = plain;
    plain.pause();
    ex.res.detachSocket(plain);
    for (const event of ['data', 'end', 'close', 'drain', 'error', 'timeout']) {
      // node's server's listeners go; the kit's own (connection counts, closeServer's set) stay
      const own = plain.listeners(event).filter((l) => keptOnTakeOver.has(l as Listener));
      plain.removeAllListeners(event);
      for (const l of own) plain.on(event, l as Listener);
    }
    plain.setTimeout(0);
    // Node's server hands a socket back from its C++ parser when a 'data' listener is added.
    const unconsume = (): void => undefined;
    plain.on('data', unconsume);
    plain.off('data', unconsume);
    (plain as unknown as { parser: unknown }).parser = null;
    // The parser read on the socket's behalf; reset the stream's read state as node's own
    // upgrade path does, so that resuming starts reading from the handle again.
    const state = (plain as unknown as { _readableState: { reading: boolean } })._readableState;
    state.reading = false;
    // The parser may be amid the packet that held the headers: what of the body it holds goes
    // to the request once that call is over (a tick later), and is the request's, not the stream's.
    await new Promise<void>((resolve) => setImmediate(resolve));
    bodyLeft = ex.req.complete ? 0 : Math.max(0, bodyLeft - ex.req.readableLength);
  }
  // the handler adds its own; until then a client gone (EPIPE, ECONNRESET) must not be uncaught
  socket.on('error', () => undefined);
  const dropped = Math.min(bodyLeft, head.length);
  head = head.subarray(dropped);
  await readBytes(socket, bodyLeft - dropped, false);
  if (head.length) socket.unshift(head);
  return socket;
}

/**
 * Read `n` bytes of a paused stream (fewer if it ends first), keeping them or dropping them; what
 * was read past them goes back, and the stream stays paused.
 */
async function readBytes(stream: Duplex, n: number, keep: boolean): Promise<Buffer> {
  const kept: Buffer[] = [];
  let left = n;
  while (left > 0 && !stream.destroyed && !stream.readableEnded) {
    const chunk = stream.read() as Buffer | null;
    if (chunk === null) {
      await onceAny(stream, ['readable', 'close', 'end']);
      continue;
    }
    if (chunk.length > left) stream.unshift(chunk.subarray(left));
    if (keep) kept.push(chunk.subarray(0, left));
    left -= Math.min(left, chunk.length);
  }
  stream.pause();
  return Buffer.concat(kept);
}

/** Send a JSON body with the right headers. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** End an answer without a body (a Content-Length of 0 unless the status has no body). */
export function sendEmpty(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | number> = {},
): void {
  res.statusCode = status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  if (status !== 204 && status !== 304) res.setHeader('Content-Length', 0);
  res.end();
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** Listen on a unix socket path or a tcp host:port. */
export interface ListenAddress {
  kind: 'unix' | 'tcp';
  path?: string;
  host?: string;
  port?: number;
}

/** Parse `unix:///path` or `tcp://host[:port]` (`defaultPort` when none: dockerd's 2375, 2376 with TLS). */
export function parseListenAddress(spec: string, defaultPort = 2375): ListenAddress {
  if (spec.startsWith('unix://')) return { kind: 'unix', path: spec.slice('unix://'.length) };
  if (spec.startsWith('tcp://')) {
    const rest = spec.slice('tcp://'.length);
    const i = rest.lastIndexOf(':');
    if (i < 0 || rest.endsWith(']'))
      return { kind: 'tcp', host: rest.replace(/^\[|\]$/g, '') || '127.0.0.1', port: defaultPort };
    const host = rest.slice(0, i).replace(/^\[|\]$/g, '') || '127.0.0.1';
    const port = Number(rest.slice(i + 1));
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port in ${spec}`);
    return { kind: 'tcp', host, port };
  }
  if (spec.startsWith('/')) return { kind: 'unix', path: spec };
  throw new Error(`invalid listen address ${JSON.stringify(spec)}: use unix:///path or tcp://host:port`);
}
