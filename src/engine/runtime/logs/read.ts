import { type FSWatcher, watch } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import { LineReader, LogFileSet, openIfExists } from './files.js';
import { decodeEntry } from './json-file.js';
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
  /** Only messages at or after this time (unix nanoseconds; a bigint is exact). */
  since?: number | bigint;
  /** Only messages at or before this time (unix nanoseconds; a bigint is exact). */
  until?: number | bigint;
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
  /** What the container wrote: a line with its newline, or a part of one (json-file's partial entries). */
  line: Buffer;
  /** The entry's attributes (json-file's labels/env options), when it has any. */
  readonly attrs?: Record<string, string>;
}

let lastAttrsRaw = '';
let lastAttrs: Record<string, string> | undefined;

/** Attributes of an entry, parsed once per distinct JSON (every entry of a container has the same). */
function parseAttrs(raw: string): Record<string, string> | undefined {
  if (raw !== lastAttrsRaw) {
    lastAttrsRaw = raw;
    try {
      const v: unknown = JSON.parse(raw);
      lastAttrs = v && typeof v === 'object' ? (v as Record<string, string>) : undefined;
    } catch {
      lastAttrs = undefined;
    }
  }
  return lastAttrs;
}

/**
 * A message whose time and attributes are taken from its entry's line only when asked for
 * (docker logs without -t and --details never asks).
 */
class Message implements LogMessage {
  constructor(
    readonly stream: LogStream,
    readonly line: Buffer,
    private readonly src: Buffer,
    private readonly timeStart: number,
    private readonly timeEnd: number,
    private readonly attrsStart: number,
    private readonly attrsEnd: number,
    private readonly parsed?: { time: string; attrs?: Record<string, string> },
  ) {}
  get time(): string {
    return this.parsed
      ? dockerTime(this.parsed.time)
      : this.src.toString('latin1', this.timeStart, this.timeEnd);
  }
  get attrs(): Record<string, string> | undefined {
    if (this.parsed) return this.parsed.attrs;
    if (this.attrsStart < 0) return undefined;
    return parseAttrs(this.src.toString('utf8', this.attrsStart, this.attrsEnd));
  }
  toJSON(): LogMessage {
    const attrs = this.attrs;
    return { stream: this.stream, time: this.time, line: this.line, ...(attrs ? { attrs } : {}) };
  }
}

/** A since/until bound; none for 0 (docker's "no bound"). */
function instant(ns: number | bigint | undefined): Instant | null {
  if (ns === undefined || ns <= 0) return null;
  if (typeof ns === 'number') return instantFromNanos(ns);
  return { sec: Number(ns / 1_000_000_000n), nsec: Number(ns % 1_000_000_000n) };
}

const NL = 0x0a;

/** Decodes entries and applies the time and stream filters. */
class Filter {
  done = false;

  constructor(
    private readonly want: Record<LogStream, boolean>,
    private readonly since: Instant | null,
    private readonly until: Instant | null,
  ) {}

  /** Feed a block of whole lines; add the messages that pass to `out`. */
  push(block: Buffer, out: LogMessage[]): void {
    let start = 0;
    for (let nl = block.indexOf(NL); nl >= 0 && !this.done; nl = block.indexOf(NL, start)) {
      const e = decodeEntry(block, start, nl + 1);
      start = nl + 1;
      if (!e) continue;
      if (this.since || this.until) {
        const t = parseInstant(e.parsed ? e.parsed.time : block.toString('latin1', e.timeStart, e.timeEnd));
        if (t) {
          if (this.since && compareInstant(t, this.since) < 0) continue;
          if (this.until && compareInstant(t, this.until) > 0) {
            this.done = true;
            return;
          }
        }
      }
      if (this.want[e.stream]) {
        out.push(
          new Message(e.stream, e.log, block, e.timeStart, e.timeEnd, e.attrsStart, e.attrsEnd, e.parsed),
        );
      }
    }
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
  const filter = new Filter(
    { stdout: opts.stdout, stderr: opts.stderr },
    instant(opts.since),
    instant(opts.until),
  );
  if (opts.signal?.aborted) return;
  const follow = opts.follow === true;
  if (!follow && !opts.stdout && !opts.stderr) return;

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
  let files: LogFileSet | null = null;
  /** Everything readable now from `current`, in batches; false when the reading is over. */
  async function* drain(reader: LineReader): AsyncGenerator<LogMessage[], boolean> {
    for (let blocks = await reader.nextBlocks(); blocks.length > 0; blocks = await reader.nextBlocks()) {
      const out: LogMessage[] = [];
      for (const block of blocks) filter.push(block, out);
      if (out.length > 0) yield out;
      if (filter.done || opts.signal?.aborted) return false;
    }
    return true;
  }
  try {
    files = await LogFileSet.of(path);
    const tail = opts.tail ?? -1;
    const startAt: LogPosition = tail >= 0 ? await findTail(files, tail) : { file: 0, offset: 0 };

    // The rotated files, then the current one.
    for (let f = startAt.file; f < files.length; f++) {
      const handle = await files.take(f);
      if (!handle) continue;
      current = new LineReader(handle, f === startAt.file ? startAt.offset : 0);
      if (!(yield* drain(current))) return;
      if (f < files.length - 1 || !follow) {
        await current.close();
        current = null;
      }
    }
    await files.close();
    files = null;
    if (!follow) return;

    // Following.
    let stopping = false;
    for (;;) {
      if (current && !(yield* drain(current))) return;
      if (opts.signal?.aborted) return;
      // a rotation put a new file at `path`; a truncation shrank ours
      const st = await stat(path).catch((err) => {
        if (errnoCode(err) === 'ENOENT') return null;
        throw err;
      });
      if (st) {
        const mine = current ? await current.handle.stat() : null;
        if (!mine || mine.ino !== st.ino || mine.dev !== st.dev) {
          // the writer finished the old file before it made the new one: read its last entries
          if (current && !(yield* drain(current))) return;
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
      // stopping: the log is complete (the container's output ended) and read to its end
      if (stopping) return;
      if (opts.stopFollowing?.aborted) {
        stopping = true;
        continue;
      }
      await wake.wait();
    }
  } finally {
    await current?.close().catch(() => undefined);
    await files?.close();
    watcher?.close();
    opts.signal?.removeEventListener('abort', onAbort);
    opts.stopFollowing?.removeEventListener('abort', onAbort);
  }
}

/**
 * The messages of a container's json-file log at `path`, its rotated files (`path.N` ..
 * `path.1`, compressed ones too) first: one message per entry, as dockerd reads them. `tail`
 * counts entries backwards from the end instead of reading everything. With `follow`, waits for
 * more (fs.watch, no polling) and goes on in the new file after a rotation.
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
