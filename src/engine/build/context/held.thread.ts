import { Worker } from 'node:worker_threads';

/**
 * The thread that holds and hashes the large files of build contexts (DeferredContents): the
 * request's chunks are handed over whole (their memory transferred, never copied) in batches, and
 * the thread takes each file's sha256 from them and keeps them until the file is written out or
 * dropped. The event loop that reads the socket then neither hashes those bytes nor holds them:
 * its garbage collector does not see 50 MiB of chunks per context, and the hashing runs on the
 * other core while the client is still sending.
 *
 * Messages to the thread: `{ ops, buffers }` where each op is one of
 * - `['d', ctx, file, buffer, offset, length]`: a piece of a file's content (`buffer` an index in
 *   `buffers`);
 * - `['k', ctx, file, path, sha256]`: the file's content is the one at `path` (whose digest is
 *   `sha256`): its bytes were found equal to it as they arrived (stored-compare.ts) and are not
 *   handed over; it is written out from `path`;
 * - `['e', ctx, file]`: the file's content is complete (its digest is taken);
 * - `['w', ctx, file, req, path, create, mode, mtimeMs]`: write the content to `path` (a new file,
 *   or the existing placeholder when `create` is false), with its mode and time; answers
 *   `{ req, stat: [dev, ino, size, mtimeNs] }`;
 * - `['s', ctx, req]`: answers `{ req, digests: [[file, sha256, same]…] }` of the files ended so
 *   far (`same`: a `k` file);
 * - `['x', ctx, file]`: drop a file (file -1: every file of the context).
 * A failure answers `{ req, error }`.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const contexts = new Map();
const WINDOW = 1024 * 1024;
const fileOf = (ctx, id) => {
  let files = contexts.get(ctx);
  if (!files) contexts.set(ctx, (files = new Map()));
  let f = files.get(id);
  if (!f) files.set(id, (f = { hash: undefined, pieces: [], digest: undefined, same: undefined }));
  return f;
};
function write(f, path, create, mode, mtimeMs) {
  const flags = fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW | (create ? fs.constants.O_CREAT | fs.constants.O_EXCL : 0);
  const fd = fs.openSync(path, flags, 0o600);
  try {
    if (f.same) {
      // equal to the stored content: written from it
      const src = fs.openSync(f.same.path, fs.constants.O_RDONLY);
      try {
        const b = Buffer.allocUnsafe(WINDOW);
        for (let pos = 0; ; ) {
          const n = fs.readSync(src, b, 0, WINDOW, pos);
          if (n === 0) break;
          for (let done = 0; done < n; ) done += fs.writeSync(fd, b, done, n - done, pos + done);
          pos += n;
        }
      } finally {
        fs.closeSync(src);
      }
    }
    let pos = 0;
    for (let i = 0; i < f.pieces.length; i += 512) {
      let batch = f.pieces.slice(i, i + 512);
      while (batch.length) {
        let n = fs.writevSync(fd, batch, pos);
        pos += n;
        while (batch.length && n >= batch[0].length) n -= batch.shift().length;
        if (n > 0) batch[0] = batch[0].subarray(n);
      }
    }
    fs.fchmodSync(fd, mode);
    const t = new Date(mtimeMs);
    fs.futimesSync(fd, t, t);
    const st = fs.fstatSync(fd, { bigint: true });
    return [String(st.dev), String(st.ino), Number(st.size), String(st.mtimeNs)];
  } finally {
    fs.closeSync(fd);
  }
}
parentPort.on('message', ({ ops, buffers }) => {
  for (const op of ops) {
    const [kind, ctx] = op;
    try {
      if (kind === 'd') {
        const piece = Buffer.from(buffers[op[3]], op[4], op[5]);
        const f = fileOf(ctx, op[2]);
        (f.hash ??= createHash('sha256')).update(piece);
        f.pieces.push(piece);
      } else if (kind === 'k') {
        const f = fileOf(ctx, op[2]);
        f.same = { path: op[3] };
        f.digest = op[4];
      } else if (kind === 'e') {
        const f = fileOf(ctx, op[2]);
        if (f.digest === undefined) f.digest = (f.hash ??= createHash('sha256')).digest('hex');
      } else if (kind === 'w') {
        const f = contexts.get(ctx)?.get(op[2]);
        if (!f || !f.digest) throw new Error('no such held content');
        const stat = write(f, op[4], op[5], op[6], op[7]);
        parentPort.postMessage({ req: op[3], stat });
      } else if (kind === 's') {
        const digests = [];
        for (const [id, f] of contexts.get(ctx) ?? []) if (f.digest) digests.push([id, f.digest, !!f.same]);
        parentPort.postMessage({ req: op[2], digests });
      } else if (kind === 'x') {
        if (op[2] === -1) contexts.delete(ctx);
        else contexts.get(ctx)?.delete(op[2]);
      }
    } catch (err) {
      const req = kind === 'w' ? op[3] : kind === 's' ? op[2] : undefined;
      if (req !== undefined) parentPort.postMessage({ req, error: String(err && err.message || err), code: err && err.code });
    }
  }
});
`;

/** How many bytes of pieces are handed over in one message. */
const BATCH_BYTES = 1024 * 1024;
/** The size of the buffers pieces are copied into. */
const COPY_BUFFER = 1024 * 1024;

type Op = Array<string | number | boolean>;

interface Reply {
  req: number;
  stat?: [string, string, number, string];
  digests?: Array<[number, string, boolean]>;
  error?: string;
  code?: string;
}

/** What a written-out file is: its inode and time, as the context's digests key them. */
export interface WrittenStat {
  dev: bigint;
  ino: bigint;
  size: number;
  mtimeNs: bigint;
}

/** The one thread of the engine's contexts and the requests waiting for its answers. */
class HeldThread {
  private worker: Worker | undefined;
  /** Which worker this is (a context's contents live in the one it started with). */
  generation = 0;
  private readonly waiting = new Map<number, { resolve(r: Reply): void; reject(e: Error): void }>();
  private nextReq = 0;
  private nextCtx = 0;

  newContext(): number {
    return ++this.nextCtx;
  }

  post(ops: Op[], buffers: ArrayBuffer[]): void {
    this.thread().postMessage({ ops, buffers }, buffers);
  }

  /** The worker's generation, started when there is none. */
  current(): number {
    this.thread();
    return this.generation;
  }

  /** A new request's number and its answer (the op that carries it is posted by the caller). */
  expect(): { req: number; answer: Promise<Reply> } {
    const req = ++this.nextReq;
    const answer = new Promise<Reply>((resolve, reject) => this.waiting.set(req, { resolve, reject }));
    this.thread().ref();
    return { req, answer };
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(WORKER_SOURCE, { eval: true });
    w.unref();
    // an unref before the thread is online does not hold for its port: again once it is
    w.once('online', () => {
      if (this.waiting.size === 0) w.unref();
    });
    w.on('message', (r: Reply) => {
      const p = this.waiting.get(r.req);
      if (!p) return;
      this.waiting.delete(r.req);
      if (this.waiting.size === 0) w.unref();
      if (r.error !== undefined) p.reject(Object.assign(new Error(r.error), r.code ? { code: r.code } : {}));
      else p.resolve(r);
    });
    const fail = (err: Error) => {
      if (this.worker === w) this.worker = undefined;
      for (const p of this.waiting.values()) p.reject(err);
      this.waiting.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the context thread ended (${code})`)));
    this.worker = w;
    this.generation++;
    return w;
  }
}

let shared: HeldThread | undefined;

/** The engine's one held-contents thread (started with its first use). */
function heldThread(): HeldThread {
  shared ??= new HeldThread();
  return shared;
}

/**
 * One context's share of the thread: pieces of its files are batched and handed over (their
 * buffers transferred: the caller must not use them again); everything else is ordered after
 * what was handed over before.
 */
export class HeldFiles {
  private readonly thread = heldThread();
  private readonly ctx = this.thread.newContext();
  /** The worker this context's contents went to (a new one after it ended has none of them). */
  private readonly generation = this.thread.current();
  private ops: Op[] = [];
  private buffers: ArrayBuffer[] = [];
  private index = new Map<ArrayBuffer, number>();
  private bytes = 0;
  /** The buffer copied pieces go into (in the batch once used), and how much of it is used. */
  private copies: Uint8Array<ArrayBuffer> | undefined;
  private copied = 0;
  /** A request is batched: it goes at the next chunk boundary whatever the batch's size. */
  private asking = false;

  /**
   * A piece of file `file`'s content. `owned`: the piece's whole buffer is the caller's to give
   * (a request chunk of its own); otherwise the piece is copied into a buffer of the batch's (one
   * of a MiB, several pieces each: one transfer per MiB rather than per piece).
   */
  data(file: number, piece: Buffer, owned: boolean): void {
    if (owned) {
      this.piece(file, piece.buffer as ArrayBuffer, piece.byteOffset, piece.length);
      return;
    }
    // copied, filling each buffer (a piece that does not fit is split)
    for (let at = 0; at < piece.length; ) {
      if (!this.copies || this.copied === COPY_BUFFER) {
        this.copies = new Uint8Array(COPY_BUFFER);
        this.copied = 0;
      }
      const n = Math.min(piece.length - at, COPY_BUFFER - this.copied);
      this.copies.set(piece.subarray(at, at + n), this.copied);
      this.piece(file, this.copies.buffer, this.copied, n);
      this.copied += n;
      at += n;
    }
  }

  private piece(file: number, buf: ArrayBuffer, offset: number, length: number): void {
    let i = this.index.get(buf);
    if (i === undefined) {
      i = this.buffers.push(buf) - 1;
      this.index.set(buf, i);
    }
    this.ops.push(['d', this.ctx, file, i, offset, length]);
    this.bytes += length;
  }

  /** File `file`'s content is complete. */
  end(file: number): void {
    this.ops.push(['e', this.ctx, file]);
  }

  /**
   * Hand over what was batched once it is large enough or a request waits in it. Only between
   * chunks: what is handed over leaves this thread, and the chunk being read is among it.
   */
  flushIfFull(): void {
    if (this.bytes >= BATCH_BYTES || this.asking) this.flush();
  }

  /**
   * File `file`'s content is the one at `path` (its digest `sha256`): its bytes were found equal
   * to it as they arrived (see the thread's `k`).
   */
  stored(file: number, path: string, sha256: string): void {
    this.ops.push(['k', this.ctx, file, path, sha256]);
  }

  /**
   * Every ended file's sha256 (between chunks, or once the archive is read), and whether it was
   * equal to the content it was compared with.
   */
  async digests(): Promise<Map<number, { sha256: string; same: boolean }>> {
    const r = await this.ask((req) => ['s', this.ctx, req], true);
    return new Map((r.digests ?? []).map(([id, sha256, same]) => [id, { sha256, same }]));
  }

  /**
   * Write file `file`'s content to `path` (a new file, or an existing one when `create` is
   * false). `now` false (inside a chunk): it goes at the next chunk boundary.
   */
  async write(
    file: number,
    target: { path: string; create: boolean; mode: number; mtime: Date },
    now = true,
  ): Promise<WrittenStat> {
    const { path, create, mode, mtime } = target;
    const r = await this.ask((req) => ['w', this.ctx, file, req, path, create, mode, mtime.getTime()], now);
    const [dev, ino, size, mtimeNs] = r.stat as [string, string, number, string];
    return { dev: BigInt(dev), ino: BigInt(ino), size, mtimeNs: BigInt(mtimeNs) };
  }

  /** Drop a file's content (every file's without one: `now`, once the context goes). */
  drop(file?: number, now = false): void {
    this.ops.push(['x', this.ctx, file ?? -1]);
    if (now) this.flush();
  }

  /** Hand over whatever is batched. */
  flush(): void {
    this.asking = false;
    if (this.ops.length === 0) return;
    const { ops, buffers, copies } = this;
    if (copies && this.copied < COPY_BUFFER / 2) {
      // a copy buffer little used: only its used part goes (the thread keeps what it is given)
      const i = this.index.get(copies.buffer);
      if (i !== undefined) buffers[i] = copies.buffer.slice(0, this.copied);
    }
    this.ops = [];
    this.buffers = [];
    this.index = new Map();
    this.bytes = 0;
    // transferred with the batch (a piece may be in it)
    this.copies = undefined;
    this.thread.post(ops, buffers);
  }

  /** The contents are where they were put: a thread that ended took them with it. */
  private check(): void {
    if (this.thread.current() !== this.generation) {
      throw new Error("the build context's held contents were lost: their thread ended");
    }
  }

  private ask(op: (req: number) => Op, now: boolean): Promise<Reply> {
    this.check();
    const { req, answer } = this.thread.expect();
    this.ops.push(op(req));
    this.asking = true;
    if (now) this.flush();
    return answer;
  }
}
