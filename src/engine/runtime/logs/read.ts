import { type FSWatcher, watch } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import { LineReader, logFiles, openIfExists } from './files.js';
import {
  compareInstant,
  dockerTime,
  type Instant,
  instantFromNanos,
  type LogStream,
  parseInstant,
} from './k8s-file.js';
import { findTail, type LogPosition } from './tail.js';

export interface ReadLogsOptions {
  /** Only messages at or after this time (unix nanoseconds). */
  since?: number;
  /** Only messages at or before this time (unix nanoseconds). */
  until?: number;
  /** The last N messages (counted before since/until and stream filtering, as docker); -1 or undefined: all. */
  tail?: number;
  /** Keep reading what the container writes, across rotations, until `signal` or `stopFollowing`. */
  follow?: boolean;
  stdout: boolean;
  stderr: boolean;
  /** Stop at once (the client went away). */
  signal?: AbortSignal;
  /** Stop following once everything written so far has been read (the container stopped). */
  stopFollowing?: AbortSignal;
}

export interface LogMessage {
  stream: LogStream;
  /** Docker's form of the message time (RFC 3339, nanoseconds, UTC). */
  time: string;
  /** What the container wrote: a whole line with its newline, or the last unfinished line. */
  line: Buffer;
}

/**
 * A message whose time string is only made when asked for (docker logs without -t never asks):
 * it keeps the raw timestamp as a string, or as the record it starts (bytes 0..tsEnd), decoded
 * only then.
 */
class Message implements LogMessage {
  private t: string | null = null;
  constructor(
    readonly stream: LogStream,
    private ts: string | Buffer,
    private readonly tsEnd: number,
    readonly line: Buffer,
  ) {}
  get time(): string {
    if (this.t === null) {
      const raw = typeof this.ts === 'string' ? this.ts : this.ts.toString('latin1', 0, this.tsEnd);
      this.ts = raw;
      this.t = dockerTime(raw);
    }
    return this.t;
  }
  toJSON(): LogMessage {
    return { stream: this.stream, time: this.time, line: this.line };
  }
}

const SPACE = 0x20;

interface Pending {
  ts: string;
  parts: Buffer[];
}

/** Joins P records into messages, per stream; applies the time and stream filters. */
class Assembler {
  private readonly pending: Record<LogStream, Pending | null> = { stdout: null, stderr: null };
  done = false;

  constructor(
    private readonly want: Record<LogStream, boolean>,
    private readonly since: Instant | null,
    private readonly until: Instant | null,
  ) {}

  /** Feed one raw line (with its newline); add the message it completes to `out`. */
  push(line: Buffer, out: LogMessage[]): void {
    // `<ts> <stdout|stderr> <P|F> <data>`, parsed in place (see k8s-file.ts parseRecord)
    const s1 = line.indexOf(SPACE);
    if (s1 < 20 || line.length < s1 + 10 || line[s1 + 7] !== SPACE || line[s1 + 1] !== 0x73) return;
    let stream: LogStream;
    if (line[s1 + 4] === 0x6f) stream = 'stdout';
    else if (line[s1 + 4] === 0x65) stream = 'stderr';
    else return;
    const tag = line[s1 + 8];
    const from = s1 + 10;
    const p = this.pending[stream];
    if (tag === 0x50 /* P */) {
      const to = line[line.length - 1] === 0x0a ? line.length - 1 : line.length;
      const data = line.subarray(Math.min(from, to), to);
      if (p) p.parts.push(data);
      else this.pending[stream] = { ts: line.toString('latin1', 0, s1), parts: [data] };
      return;
    }
    if (tag !== 0x46 /* F */) return;
    const data = line.subarray(Math.min(from, line.length));
    if (p) {
      this.pending[stream] = null;
      p.parts.push(data);
      this.emit(stream, p.ts, p.ts.length, Buffer.concat(p.parts), out);
    } else this.emit(stream, line, s1, data, out);
  }

  /** Unfinished lines, as messages of their own (end of the log, or caught up while following). */
  flush(out: LogMessage[]): void {
    const order = (['stdout', 'stderr'] as const)
      .filter((s) => this.pending[s])
      .sort((a, b) => this.pending[a]!.ts.localeCompare(this.pending[b]!.ts));
    for (const s of order) {
      const p = this.pending[s]!;
      this.pending[s] = null;
      this.emit(s, p.ts, p.ts.length, Buffer.concat(p.parts), out);
    }
  }

  /** `ts` is the timestamp, or a record whose first `tsEnd` bytes are (decoded only when needed). */
  private emit(stream: LogStream, ts: string | Buffer, tsEnd: number, data: Buffer, out: LogMessage[]): void {
    if (this.done) return;
    if (this.since || this.until) {
      if (typeof ts !== 'string') {
        ts = ts.toString('latin1', 0, tsEnd);
        tsEnd = ts.length;
      }
      const t = parseInstant(ts);
      if (t) {
        if (this.since && compareInstant(t, this.since) < 0) return;
        if (this.until && compareInstant(t, this.until) > 0) {
          this.done = true;
          return;
        }
      }
    }
    if (this.want[stream]) out.push(new Message(stream, ts, tsEnd, data));
  }
}

/** Wakes a waiting reader on file events or aborts; remembers events that came in between. */
class Wakeup {
  private dirty = false;
  private resolve: (() => void) | null = null;

  notify = (): void => {
    this.dirty = true;
    const r = this.resolve;
    this.resolve = null;
    r?.();
  };

  wait(): Promise<void> {
    if (this.dirty) {
      this.dirty = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.resolve = () => {
        this.dirty = false;
        resolve();
      };
    });
  }
}

/**
 * readLogs in batches (one per chunk read): the fast path for consumers that write many messages
 * at once. Same options and semantics as readLogs.
 */
export async function* readLogBatches(path: string, opts: ReadLogsOptions): AsyncGenerator<LogMessage[]> {
  const want = { stdout: opts.stdout, stderr: opts.stderr };
  const asm = new Assembler(
    want,
    opts.since !== undefined && opts.since > 0 ? instantFromNanos(opts.since) : null,
    opts.until !== undefined && opts.until > 0 ? instantFromNanos(opts.until) : null,
  );
  if (opts.signal?.aborted) return;
  const follow = opts.follow === true;
  if (!follow && !want.stdout && !want.stderr) return;

  // Follow: watch first, so nothing written between reading and waiting is missed.
  const wake = new Wakeup();
  let watcher: FSWatcher | null = null;
  const onAbort = () => wake.notify();
  if (follow) {
    const base = basename(path);
    try {
      watcher = watch(dirname(path), { persistent: false }, (_e, name) => {
        if (!name || name.toString().startsWith(base)) wake.notify();
      });
      watcher.on('error', () => wake.notify());
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    opts.signal?.addEventListener('abort', onAbort);
    opts.stopFollowing?.addEventListener('abort', onAbort);
  }

  let current: LineReader | null = null;
  try {
    const files = await logFiles(path);
    const tail = opts.tail ?? -1;
    const startAt: LogPosition = tail >= 0 ? await findTail(files, tail) : { file: 0, offset: 0 };

    // The rotated files, then the current one.
    for (let f = startAt.file; f < files.length; f++) {
      const handle = await openIfExists(files[f]!);
      if (!handle) continue;
      current = new LineReader(handle, f === startAt.file ? startAt.offset : 0);
      for (let lines = await current.next(); lines.length > 0; lines = await current.next()) {
        const out: LogMessage[] = [];
        for (const line of lines) asm.push(line, out);
        if (out.length > 0) yield out;
        if (asm.done || opts.signal?.aborted) return;
      }
      if (f < files.length - 1 || !follow) {
        await current.close();
        current = null;
      }
    }
    if (!follow) {
      const out: LogMessage[] = [];
      asm.flush(out);
      if (out.length > 0) yield out;
      return;
    }

    // Following.
    let stopping = false;
    for (;;) {
      if (current) {
        for (let lines = await current.next(); lines.length > 0; lines = await current.next()) {
          const out: LogMessage[] = [];
          for (const line of lines) asm.push(line, out);
          if (out.length > 0) yield out;
          if (asm.done || opts.signal?.aborted) return;
        }
      }
      if (opts.signal?.aborted) return;
      if (stopping) {
        const out: LogMessage[] = [];
        asm.flush(out);
        if (out.length > 0) yield out;
        return;
      }
      // a rotation or a reopen put a new file at `path`; a truncation shrank ours
      const st = await stat(path).catch((err) => {
        if (errnoCode(err) === 'ENOENT') return null;
        throw err;
      });
      if (st) {
        const mine = current ? await current.handle.stat() : null;
        if (!mine || mine.ino !== st.ino || mine.dev !== st.dev) {
          await current?.close();
          current = null;
          const handle = await openIfExists(path);
          if (handle) current = new LineReader(handle, 0);
          continue;
        }
        if (st.size < current!.offset) {
          await current!.reset(0);
          continue;
        }
      }
      if (opts.stopFollowing?.aborted) {
        stopping = true;
        continue;
      }
      // caught up: an unfinished line goes out now (a prompt), not when its end arrives
      const out: LogMessage[] = [];
      asm.flush(out);
      if (out.length > 0) yield out;
      await wake.wait();
    }
  } finally {
    await current?.close().catch(() => undefined);
    watcher?.close();
    opts.signal?.removeEventListener('abort', onAbort);
    opts.stopFollowing?.removeEventListener('abort', onAbort);
  }
}

/**
 * The messages of a container log written by conmon (k8s-file format) at `path`, its rotated files
 * (`path.N` .. `path.1`) first. P records are joined into one message. `tail` reads backwards from
 * the end instead of parsing everything. With `follow`, waits for more (fs.watch, no polling) and
 * goes on in the new file after a rotation or a reopen.
 */
export function readLogs(path: string, opts: ReadLogsOptions): AsyncIterableIterator<LogMessage> {
  // A hand-made iterator over the batches: one settled promise per message, not a generator's.
  const batches = readLogBatches(path, opts);
  let batch: LogMessage[] = [];
  let i = 0;
  let finished = false;
  const it: AsyncIterableIterator<LogMessage> = {
    next(): Promise<IteratorResult<LogMessage>> {
      if (i < batch.length) return Promise.resolve({ value: batch[i++]!, done: false });
      if (finished) return Promise.resolve({ value: undefined, done: true });
      return batches.next().then((r) => {
        if (r.done) {
          finished = true;
          return { value: undefined, done: true };
        }
        batch = r.value;
        i = 1;
        return { value: batch[0]!, done: false };
      });
    },
    async return(): Promise<IteratorResult<LogMessage>> {
      finished = true;
      batch = [];
      await batches.return(undefined);
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return it;
    },
  };
  return it;
}
