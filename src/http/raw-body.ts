import type { IncomingMessage } from 'node:http';
import { Duplex, Readable } from 'node:stream';
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

/** The size of the buffers a raw body reads its socket into. */
const READ_BUFFER = 64 * 1024;
/** How many given-back buffers a body keeps for its next reads. */
const SPARE_BUFFERS = 8;

/**
 * A chunked request body read from its connection's socket below node's HTTP parser (which copies
 * every body piece into a buffer of its own and feeds it through the request's stream): the
 * socket's reads are decoded in place (ChunkedDecoder), the data pushed as views of them. On a
 * plain connection the socket is read into buffers of the body's own (socketReads): a reader that
 * is done with every chunk of one gives it back (`recycle`) and later reads go into it again, so
 * a large upload allocates a few buffers rather than one per read (node's 64 KiB per read were
 * ~25 ms of the event loop's time per 50 MiB, most of it in the collector).
 * Backpressure is the socket's (paused while the stream's buffer is full). Once the last chunk is
 * read the socket is paused and what followed put back (`onComplete` told). A framing error, or a client gone before the end, fails the stream;
 * the connection is closed after the answer (`discard`).
 */
export class RawChunkedBody extends Readable {
  /**
   * Every chunk is a view of a buffer nobody else holds (a socket read of its own), and the
   * chunks of one buffer come one after another: a reader that takes them in order may give the
   * buffer back (`recycle`) once it has taken the last chunk that shares it and keeps none.
   */
  readonly lendsBuffers = true;
  /** The buffers given back (`recycle`), read into again before a new one is made. */
  private readonly spare: Buffer[] = [];
  /** The buffers this body read into (only those are taken back). */
  private readonly own = new WeakSet<ArrayBufferLike>();
  private reads: SocketReads | undefined;
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
    this.reads = socketReads(socket);
    if (this.reads) this.reads.route = { next: this.nextBuffer, read: this.onOwnRead };
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

  /**
   * Every chunk of `buffer`'s (a chunk's `.buffer`) has been read and none is kept: the socket may
   * read into it again. A buffer this body did not read into is ignored.
   */
  recycle(buffer: ArrayBufferLike): void {
    if (!this.own.has(buffer) || this.spare.length >= SPARE_BUFFERS) return;
    this.own.delete(buffer);
    this.spare.push(Buffer.from(buffer as ArrayBuffer));
  }

  /** The buffer the socket's next read goes into: a given-back one, or a new one. */
  private readonly nextBuffer = (): Buffer => this.spare.pop() ?? Buffer.allocUnsafeSlow(READ_BUFFER);

  /** A read into one of the body's buffers: whether the socket may read on. */
  private readonly onOwnRead = (read: Buffer): boolean => {
    this.own.add(read.buffer);
    this.onData(read, true);
    // a body that ended with this read has let the socket go: it reads on (its end must be seen)
    return !this.attached || !this.socket.isPaused();
  };

  private readonly onData = (chunk: Buffer, ours = false): void => {
    if (!this.attached) return;
    // a buffer of its own (a socket's read is; the bytes node read past the headers may not be)
    const own =
      ours || (chunk.byteOffset === 0 && chunk.buffer.byteLength === chunk.length)
        ? chunk
        : Buffer.from(chunk);
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
    if (this.reads) this.reads.route = undefined;
    s.off('data', this.onData).off('end', this.onGone).off('close', this.onGone).off('error', this.onError);
    // paused as a stream, not at the handle: a socket reading into given buffers stops reading
    // at once on pause(), and a client that goes away while the answer is made (a build's long
    // step) would not be seen until the next write; the handle still reads, into the stream's
    // buffer up to its mark, so the client's end arrives ('end', the answer's close)
    Duplex.prototype.pause.call(s);
    // (a read stopped for backpressure starts again: read(0) asks the stream for more)
    if (!s.destroyed) s.read(0);
    // until somebody else listens, a client gone (EPIPE, ECONNRESET) must not be uncaught
    if (s.listenerCount('error') === 0) s.on('error', () => undefined);
  }
}

/** Marks `body` as `req`'s (requestBody). */
export function setRequestBody(req: IncomingMessage, body: RawChunkedBody): void {
  rawBodies.set(req, body);
}

/** Node's own fields of a net.Socket reading into buffers given by the user (net.connect's `onread`). */
interface NodeSocketReads {
  kBuffer: symbol;
  kBufferCb: symbol;
  kBufferGen: symbol;
}

/** Where a socket's reads go: a raw body's own buffers, or (`route` unset) the socket's stream. */
interface SocketReads {
  route: { next(): Buffer; read(data: Buffer): boolean } | undefined;
}

const socketsRead = new WeakMap<Duplex, SocketReads>();

/**
 * A plain connection's socket set to read into buffers of the caller's choosing, as node's
 * `onread` option of net.connect does for a client socket (the handle's `useUserBuffer` and the
 * socket's fields for it, found by their names; undefined where they are not, or for TLS). While
 * `route` is set each read goes into `route.next()`'s buffer and to `route.read` (false: the
 * socket stops reading until resumed); unset, each read is copied and pushed through the
 * socket's stream as node would, so node's server and any later reader see an ordinary socket.
 * Set up once per socket.
 */
function socketReads(socket: Duplex): SocketReads | undefined {
  const known = socketsRead.get(socket);
  if (known) return known;
  const s = socket as Duplex &
    Record<symbol, unknown> & { _handle?: { useUserBuffer?: unknown }; encrypted?: unknown };
  const fields = nodeSocketReads(s);
  const handle = s._handle;
  if (!fields || s.encrypted || typeof handle?.useUserBuffer !== 'function' || s[fields.kBuffer])
    return undefined;
  const reads: SocketReads = { route: undefined };
  // read into while nobody routes the reads (its bytes are copied out at once)
  const common = Buffer.allocUnsafeSlow(READ_BUFFER);
  s[fields.kBuffer] = common;
  s[fields.kBufferCb] = (nread: number, buf: Buffer): boolean => {
    const data = buf.subarray(0, nread);
    if (reads.route && buf !== common) return reads.route.read(data);
    return socket.push(Buffer.from(data));
  };
  s[fields.kBufferGen] = (): Buffer => (reads.route ? reads.route.next() : common);
  (handle.useUserBuffer as (b: Buffer) => void).call(handle, common);
  socketsRead.set(socket, reads);
  return reads;
}

function nodeSocketReads(s: object): NodeSocketReads | undefined {
  const syms = Object.getOwnPropertySymbols(s);
  const find = (name: string) => syms.find((k) => k.description === name);
  const kBuffer = find('kBuffer');
  const kBufferCb = find('kBufferCb');
  const kBufferGen = find('kBufferGen');
  return kBuffer && kBufferCb && kBufferGen ? { kBuffer, kBufferCb, kBufferGen } : undefined;
}
