import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Readable } from 'node:stream';
import { DISCARD_BYTES, DISCARD_MS } from './body.js';
import { ChunkedDecoder } from './chunked.js';

/** The bodies read below node's HTTP parser, by their request. */
const rawBodies = new WeakMap<IncomingMessage, RawChunkedBody>();

/**
 * A request's body as a stream: the request itself, or, for a request whose body is read below
 * node's HTTP parser (ExchangeServerOptions.rawBody), that body.
 */
export function requestBody(req: IncomingMessage): Readable {
  return rawBodies.get(req) ?? req;
}

/**
 * A chunked request body read from its connection's socket below node's HTTP parser (which copies
 * every body piece into a buffer of its own and feeds it through the request's stream): the
 * socket's reads are decoded in place (ChunkedDecoder), the data pushed as views of them.
 * Backpressure is the socket's (paused while the stream's buffer is full). Once the last chunk is
 * read the socket is paused and what followed put back (`onComplete` told). A framing error, or a client gone before the end, fails the stream;
 * the connection is closed after the answer (`discard`).
 */
export class RawChunkedBody extends Readable {
  /**
   * Every chunk is a view of a buffer nobody else holds (a socket read of its own), and the
   * chunks of one buffer come one after another: a reader that takes them in order may keep or
   * transfer the whole buffer once it has taken the last chunk that shares it.
   */
  readonly lendsBuffers = true;
  /** Whether the whole body was read (its last chunk and trailer). */
  complete = false;
  private readonly decoder = new ChunkedDecoder();
  private head: Buffer | undefined;
  private attached = false;

  /** `onComplete`: told when the last chunk and the trailer are read. */
  constructor(
    private readonly socket: Duplex,
    head: Buffer,
    private readonly onComplete?: () => void,
  ) {
    super({ highWaterMark: 256 * 1024 });
    socket.pause();
    this.head = head.length ? head : undefined;
    socket.on('data', this.onData);
    socket.on('end', this.onGone);
    socket.on('close', this.onGone);
    socket.on('error', this.onError);
    this.attached = true;
  }

  override _read(): void {
    const head = this.head;
    if (head) {
      this.head = undefined;
      this.onData(head);
    }
    if (this.attached) this.socket.resume();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.detach();
    cb(err);
  }

  /**
   * After the answer: the rest of a body not read to its end is read and dropped (for at most
   * DISCARD_MS and DISCARD_BYTES) so that a client still sending reads the answer rather than a
   * reset; the connection then closes.
   */
  discard(): void {
    this.detach();
    if (!this.destroyed && !this.complete) this.destroy();
    const socket = this.socket;
    if (this.complete || socket.destroyed) return;
    let dropped = 0;
    const timer = setTimeout(() => socket.destroy(), DISCARD_MS);
    timer.unref();
    socket.on('data', (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > DISCARD_BYTES) socket.destroy();
    });
    socket.once('close', () => clearTimeout(timer));
    socket.once('end', () => socket.destroy());
    socket.resume();
  }

  private readonly onData = (chunk: Buffer): void => {
    if (!this.attached) return;
    // a buffer of its own (a socket's read is; the bytes node read past the headers may not be)
    const own =
      chunk.byteOffset === 0 && chunk.buffer.byteLength === chunk.length ? chunk : Buffer.from(chunk);
    let pieces: Buffer[];
    try {
      pieces = this.decoder.feed(own);
    } catch (err) {
      this.detach();
      this.destroy(err as Error);
      return;
    }
    let more = true;
    for (const piece of pieces) more = this.push(piece) && more;
    if (this.decoder.done) {
      const rest = this.decoder.rest;
      this.complete = true;
      this.detach();
      // what came after the body is the connection's (a copy: the reader may take the buffer)
      if (rest.length) this.socket.unshift(Buffer.from(rest));
      this.onComplete?.();
      this.push(null);
      return;
    }
    if (!more) this.socket.pause();
  };

  private readonly onGone = (): void => {
    if (!this.attached) return;
    this.detach();
    this.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  };

  private readonly onError = (err: Error): void => {
    if (!this.attached) return;
    this.detach();
    this.destroy(err);
  };

  private detach(): void {
    if (!this.attached) return;
    this.attached = false;
    const s = this.socket;
    s.off('data', this.onData).off('end', this.onGone).off('close', this.onGone).off('error', this.onError);
    s.pause();
    // until somebody else listens, a client gone (EPIPE, ECONNRESET) must not be uncaught
    if (s.listenerCount('error') === 0) s.on('error', () => undefined);
  }
}

/** Marks `body` as `req`'s (requestBody). */
export function setRequestBody(req: IncomingMessage, body: RawChunkedBody): void {
  rawBodies.set(req, body);
}
