import { type FSWatcher, watch } from 'node:fs';
import { type FileHandle, stat } from 'node:fs/promises';
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
  parseRecord,
} from './k8s-file.js';
import { findTail, type LogPosition } from './tail.js';

export interface ReadLogsOptions {
  /** Only messages at or after this time (unix nanoseconds). */
  since?: number;
  /** Only messages at or before this time (unix nanoseconds). */
  until?: number;
  /** The last N messages (before since/until filtering, as docker); -1 or undefined: all. */
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

  /** Feed one raw line; returns the message it completes, if any passes the filters. */
  push(line: Buffer): LogMessage | null {
    const rec = parseRecord(line);
    if (!rec) return null;
    const p = this.pending[rec.stream];
    if (rec.partial) {
      if (p) p.parts.push(rec.data);
      else this.pending[rec.stream] = { ts: rec.ts, parts: [rec.data] };
      return null;
    }
    if (p) {
      this.pending[rec.stream] = null;
      p.parts.push(rec.data);
      return this.emit(rec.stream, p.ts, Buffer.concat(p.parts));
    }
    return this.emit(rec.stream, rec.ts, rec.data);
  }

  /** Unfinished lines, as messages of their own (end of the log, or caught up while following). */
  flush(): LogMessage[] {
    const out: LogMessage[] = [];
    const order = (['stdout', 'stderr'] as const)
      .filter((s) => this.pending[s])
      .sort((a, b) => this.pending[a]!.ts.localeCompare(this.pending[b]!.ts));
    for (const s of order) {
      const p = this.pending[s]!;
      this.pending[s] = null;
      const m = this.emit(s, p.ts, Buffer.concat(p.parts));
      if (m) out.push(m);
    }
    return out;
  }

  private emit(stream: LogStream, ts: string, data: Buffer): LogMessage | null {
    if (this.done) return null;
    if (this.since || this.until) {
      const t = parseInstant(ts);
      if (t) {
        if (this.since && compareInstant(t, this.since) < 0) return null;
        if (this.until && compareInstant(t, this.until) > 0) {
          this.done = true;
          return null;
        }
      }
    }
    if (!this.want[stream]) return null;
    return { stream, time: dockerTime(ts), line: data };
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
 * The messages of a container log written by conmon (k8s-file format) at `path`, with its rotated
 * files (`path.1` .. `path.N`, oldest last) read first. P records are joined into one message.
 * `tail` reads backwards from the end instead of parsing everything. With `follow`, waits for more
 * (fs.watch, no polling), and goes on in the new file after a rotation or a reopen.
 */
export async function* readLogs(path: string, opts: ReadLogsOptions): AsyncGenerator<LogMessage> {
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

  try {
    const files = await logFiles(path);
    const tail = opts.tail ?? -1;
    const startAt: LogPosition = tail >= 0 ? await findTail(files, tail) : { file: 0, offset: 0 };

    // The rotated files, then the current one.
    let current: LineReader | null = null;
    for (let f = startAt.file; f < files.length; f++) {
      const handle = await openIfExists(files[f]!);
      if (!handle) continue;
      const reader = new LineReader(handle, f === startAt.file ? startAt.offset : 0);
      const isLast = f === files.length - 1;
      for await (const line of reader.lines()) {
        if (opts.signal?.aborted) {
          await handle.close();
          return;
        }
        const m = asm.push(line);
        if (m) yield m;
        if (asm.done) {
          await handle.close();
          return;
        }
      }
      if (isLast && follow) current = reader;
      else await handle.close();
    }
    if (!follow) {
      for (const m of asm.flush()) yield m;
      return;
    }

    // Following.
    let stopping = false;
    for (;;) {
      if (current) {
        for await (const line of current.lines()) {
          if (opts.signal?.aborted) return;
          const m = asm.push(line);
          if (m) yield m;
          if (asm.done) return;
        }
      }
      if (opts.signal?.aborted) return;
      if (stopping) {
        for (const m of asm.flush()) yield m;
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
          if (current) await current.handle.close();
          const handle: FileHandle | null = await openIfExists(path);
          current = handle ? new LineReader(handle, 0) : null;
          continue;
        }
        if (st.size < current!.offset) {
          current!.reset(0);
          continue;
        }
      }
      if (opts.stopFollowing?.aborted) {
        stopping = true;
        continue;
      }
      // caught up: an unfinished line goes out now (a prompt), not when its end arrives
      for (const m of asm.flush()) yield m;
      await wake.wait();
    }
  } finally {
    watcher?.close();
    opts.signal?.removeEventListener('abort', onAbort);
    opts.stopFollowing?.removeEventListener('abort', onAbort);
  }
}
