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
 * - `['c', ctx, file, path, sha256]`: the file's pieces are compared with the content at `path`
 *   (whose digest is `sha256`) rather than hashed and kept; at the first byte that differs, the
 *   bytes equal so far are read back from `path` and the file is hashed and kept as any other;
 * - `['e', ctx, file]`: the file's content is complete (its digest is taken, or, every byte
 *   equal to the compared content, is that content's);
 * - `['w', ctx, file, req, path, create, mode, mtimeMs]`: write the content to `path` (a new file,
 *   or the existing placeholder when `create` is false), with its mode and time; answers
 *   `{ req, stat: [dev, ino, size, mtimeNs] }`;
 * - `['s', ctx, req]`: answers `{ req, digests: [[file, sha256, same]…] }` of the files ended so
 *   far (`same`: equal to the content it was compared with);
 * - `['x', ctx, file]`: drop a file (file -1: every file of the context).
 * A failure answers `{ req, error }`.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const contexts = new Map();
const WINDOW = 1024 * 1024;
const win = Buffer.allocUnsafe(WINDOW);
let winOwner;
let winStart = 0;
let winLength = 0;
const fileOf = (ctx, id) => {
  let files = contexts.get(ctx);
  if (!files) contexts.set(ctx, (files = new Map()));
  let f = files.get(id);
  if (!f) files.set(id, (f = { hash: undefined, pieces: [], digest: undefined, same: undefined }));
  return f;
};
// a piece compared with the stored content at the file's position: whether it is equal
function equal(f, piece) {
  const s = f.same;
  let pos = s.pos;
  for (let i = 0; i < piece.length; ) {
    if (winOwner !== s || pos < winStart || pos >= winStart + winLength) {
      winOwner = s;
      winStart = pos;
      winLength = fs.readSync(s.fd, win, 0, WINDOW, pos);
      if (winLength === 0) return false;
    }
    const n = Math.min(piece.length - i, winStart + winLength - pos);
    const at = pos - winStart;
    if (piece.compare(win, at, at + n, i, i + n) !== 0) return false;
    i += n;
    pos += n;
  }
  s.pos = pos;
  return true;
}
// the file differs from the stored content: the bytes equal so far are read back, hashed and kept
function differs(f) {
  const s = f.same;
  f.same = undefined;
  if (winOwner === s) winOwner = undefined;
  f.hash = createHash('sha256');
  try {
    for (let pos = 0; pos < s.pos; ) {
      const b = Buffer.allocUnsafe(Math.min(WINDOW, s.pos - pos));
      const n = fs.readSync(s.fd, b, 0, b.length, pos);
      if (n === 0) throw new Error('a stored content was cut');
      const piece = b.subarray(0, n);
      f.hash.update(piece);
      f.pieces.push(piece);
      pos += n;
    }
  } finally {
    fs.closeSync(s.fd);
  }
}
function closeStored(f) {
  if (f.same && f.same.fd !== undefined) {
    if (winOwner === f.same) winOwner = undefined;
    const fd = f.same.fd;
    f.same.fd = undefined;
    try {
      fs.closeSync(fd);
    } catch {}
  }
}
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
        if (f.broken) continue;
        if (f.same) {
          try {
            if (equal(f, piece)) continue;
            differs(f);
          } catch {
            // the stored content could not be read: no digest is ever told for this file (its
            // build fails with its held contents lost), never one of bytes that were skipped
            closeStored(f);
            f.same = undefined;
            f.broken = true;
            f.pieces = [];
            continue;
          }
        }
        (f.hash ??= createHash('sha256')).update(piece);
        f.pieces.push(piece);
      } else if (kind === 'c') {
        const f = fileOf(ctx, op[2]);
        f.same = { path: op[3], sha256: op[4], fd: fs.openSync(op[3], fs.constants.O_RDONLY), pos: 0 };
      } else if (kind === 'e') {
        const f = fileOf(ctx, op[2]);
        if (f.broken) continue;
        if (f.same) {
          // every byte equal: the stored content's digest (its whole length, no more)
          if (f.same.pos !== fs.fstatSync(f.same.fd).size) differs(f);
          else {
            closeStored(f);
            f.digest = f.same.sha256;
            continue;
          }
        }
        f.digest = (f.hash ??= createHash('sha256')).digest('hex');
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
        const files = contexts.get(ctx);
        for (const [id, f] of files ?? []) if (op[2] === -1 || op[2] === id) closeStored(f);
        if (op[2] === -1) contexts.delete(ctx);
        else files?.delete(op[2]);
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
  /** A request is batched: it goes at the next chunk boundary whatever the batch's size. */
  private asking = false;

  /**
   * A piece of file `file`'s content. `owned`: the piece's whole buffer is the caller's to give
   * (a request chunk of its own); otherwise the piece is copied into one that is.
   */
  data(file: number, piece: Buffer, owned: boolean): void {
    let buf = piece.buffer as ArrayBuffer;
    let offset = piece.byteOffset;
    if (!owned) {
      const copy = new Uint8Array(piece.length);
      copy.set(piece);
      buf = copy.buffer;
      offset = 0;
    }
    let i = this.index.get(buf);
    if (i === undefined) {
      i = this.buffers.push(buf) - 1;
      this.index.set(buf, i);
    }
    this.ops.push(['d', this.ctx, file, i, offset, piece.length]);
    this.bytes += piece.length;
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
   * File `file`'s pieces are compared with the content at `path` (its digest `sha256`) rather
   * than hashed and kept (see the thread's `c`).
   */
  compare(file: number, path: string, sha256: string): void {
    this.ops.push(['c', this.ctx, file, path, sha256]);
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
    const { ops, buffers } = this;
    this.ops = [];
    this.buffers = [];
    this.index = new Map();
    this.bytes = 0;
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
