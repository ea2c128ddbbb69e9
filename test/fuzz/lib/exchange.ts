import { connect, type NetConnectOpts, type Socket } from 'node:net';
import { type ParsedResponse, ResponseParser } from './response-parser.js';
import type { WireRequest } from './wire.js';

/**
 * One request on a fresh connection, raw bytes both ways (node:net, no HTTP client), and what came
 * back: the responses as parsed, how the connection ended, whether it went past the timeout.
 */

export interface ExchangeResult {
  responses: ParsedResponse[];
  /** The bytes are not HTTP (the parser's reason). */
  parseError?: string;
  /** The socket error, if any (ECONNRESET, EPIPE, ECONNREFUSED...). */
  socketError?: string;
  /** The server closed the connection (FIN or reset). */
  closed: boolean;
  /** Nothing final arrived (or the answer did not finish) within the timeout. */
  timedOut: boolean;
  /** The request was not all written when the connection went. */
  unsent: boolean;
  /** The answer switched protocols (101) or the route streams: the head was enough. */
  upgraded: boolean;
  elapsedMs: number;
  /** The first bytes the server sent (for the report). */
  received: Buffer;
}

/** How long a streaming answer is read after its head, before the client leaves. */
const STREAM_GRACE_MS = 150;
const PIECE = 64 * 1024;

/**
 * `pauseMs`: wait that long after each piece of the request (a retry after the server closed while
 * the request was being sent: node's socket drops what the server answered when a write fails).
 */
export function exchange(
  target: NetConnectOpts,
  req: WireRequest,
  timeoutMs: number,
  pauseMs = 0,
): Promise<ExchangeResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    const parser = new ResponseParser(req.methods);
    const received: Buffer[] = [];
    let receivedBytes = 0;
    let socketError: string | undefined;
    let closed = false;
    let timedOut = false;
    let unsent = true;
    let done = false;
    let streamTimer: NodeJS.Timeout | undefined;
    const socket: Socket = connect(target);
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (streamTimer) clearTimeout(streamTimer);
      socket.destroy();
      resolve({
        responses: parser.responses,
        parseError: parser.error,
        socketError,
        closed,
        timedOut,
        unsent,
        upgraded: parser.upgraded,
        elapsedMs: Date.now() - started,
        received: Buffer.concat(received),
      });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      finish();
    }, timeoutMs);
    const enough = () => {
      if (parser.error) return true;
      if (parser.upgraded) return true;
      return parser.completeCount >= req.methods.length;
    };
    socket.on('data', (d: Buffer) => {
      if (receivedBytes < 4096) received.push(d.subarray(0, 4096 - receivedBytes));
      receivedBytes += d.length;
      parser.push(d);
      if (enough()) return finish();
      // a streaming answer: its head is what we wait for; read a little more, then leave
      if (req.streaming && parser.responses.some((r) => r.status >= 200) && !streamTimer)
        streamTimer = setTimeout(finish, STREAM_GRACE_MS);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      socketError = err.code ?? err.message;
    });
    socket.on('close', () => {
      closed = true;
      parser.end();
      finish();
    });
    socket.on('connect', async () => {
      socket.setNoDelay(true);
      // in pieces, yielding between them, so an early answer (413, 400) is read before the next
      // write can fail on a connection the server has closed
      for (let at = 0; at < req.data.length; at += PIECE) {
        if (done || socket.destroyed || parser.responses.some((r) => r.status >= 200)) return;
        const ok = socket.write(req.data.subarray(at, at + PIECE));
        await new Promise<void>((r) => {
          if (ok && pauseMs > 0) setTimeout(r, pauseMs);
          else if (ok) setImmediate(r);
          else {
            const go = () => {
              socket.off('drain', go);
              socket.off('close', go);
              r();
            };
            socket.on('drain', go);
            socket.on('close', go);
          }
        });
      }
      unsent = false;
      if (req.halfClose && !socket.destroyed) socket.end();
    });
  });
}
