import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Request bodies in the registry are read without destroying the request when reading stops
 * early (a size limit, a refused upload): a destroyed request leaves its keep-alive connection
 * wedged (Node stops parsing it), so the connection would have to be cut, and a client still
 * sending would lose the answer to the reset. Instead the rest is discarded, bounded, and the
 * connection stays usable (`discardUnreadBody`).
 */

/** Read a whole body of at most `limit` bytes; beyond it (declared or streamed) `tooLarge()` is thrown. */
export async function readBodyUpTo(
  req: IncomingMessage,
  limit: number,
  tooLarge: () => Error,
): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: false })) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > limit) throw tooLarge();
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

/** How long, and how much, an unread rest of a body is discarded before the connection is cut. */
export const DISCARD_MS = 2_000;
export const DISCARD_BYTES = 64 * 1024 * 1024;

/**
 * Before an answer that leaves the body unread: discard the rest so the connection can carry
 * the next request, for at most DISCARD_MS and DISCARD_BYTES; past either, the socket is
 * destroyed. A request already destroyed cannot be drained: its answer closes the connection.
 */
export function discardUnreadBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete || req.readableEnded) return;
  if (req.destroyed) {
    if (!res.headersSent) res.shouldKeepAlive = false;
    return;
  }
  const socket = req.socket;
  let discarded = 0;
  const cleanup = () => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', cleanup);
    req.off('close', cleanup);
  };
  const cut = () => {
    cleanup();
    socket?.destroy();
  };
  const onData = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_BYTES) cut();
  };
  const timer = setTimeout(cut, DISCARD_MS);
  timer.unref();
  req.on('data', onData);
  req.once('end', cleanup);
  req.once('close', cleanup);
  req.resume();
}
