import type { JsonEntryEncoder } from './json-file.js';
import { dockerTime, type LogStream } from './k8s-file.js';

/**
 * dockerd's copier cuts a container's output into messages of at most this many bytes: a longer
 * line becomes partial messages of exactly 16 KiB (no newline) and a last one with the newline.
 */
export const MAX_MESSAGE = 16 * 1024;

/**
 * An unfinished line of one stream: its parts so far, the time of its latest part, and the time
 * of its first 16 KiB partial entry once it was cut (every later part of it has that time).
 */
interface Pending {
  latest: Buffer;
  cut: Buffer | null;
  parts: Buffer[];
  length: number;
  seq: number;
}

/**
 * The unfinished lines, as a checkpoint keeps them (time as written, data in base64; `cut` when
 * the line already went out in part, `time` being then that of its parts).
 */
export type PendingState = Partial<Record<LogStream, { time: string; data: string; cut?: boolean }>>;

const SPACE = 0x20;

/**
 * Turns conmon's k8s-file records (`<ts> <stream> <P|F> <data>`, cut wherever conmon's reads
 * ended) back into the lines the container wrote, and hands them to a json-file encoder as
 * dockerd's copier would have logged them: one entry per line (with its newline), lines of
 * 16 KiB or more in 16 KiB partial entries. As the copier stamps a message when it finds its end, a
 * line gets the time conmon read its newline; the parts of a long line all get the time its first
 * 16 KiB were complete (dockerd's partialTS). Unfinished lines wait (per stream) until their
 * newline comes, or until `flush()` (the output ended: the time of their last part).
 */
export class RecordAssembler {
  private readonly pending: Record<LogStream, Pending | null> = { stdout: null, stderr: null };
  private seq = 0;
  /** The last record's timestamp as written, and as json-file writes it. */
  private lastTs: Buffer = Buffer.alloc(0);
  private lastTime: Buffer = Buffer.alloc(0);

  constructor(private readonly enc: JsonEntryEncoder) {}

  /** The json-file time of a record whose timestamp is `line[0:end)` (records of one read share theirs). */
  private timeOf(buf: Buffer, from: number, end: number): Buffer {
    const last = this.lastTs;
    let same = last.length === end - from;
    // compared from the end: the nanoseconds differ first
    for (let i = end - 1; same && i >= from; i--) same = buf[i] === last[i - from];
    if (!same) {
      this.lastTs = Buffer.from(buf.subarray(from, end));
      this.lastTime = Buffer.from(dockerTime(this.lastTs.toString('latin1')), 'latin1');
    }
    return this.lastTime;
  }

  /** Whether a line is waiting for its end on some stream. */
  get hasPending(): boolean {
    return this.pending.stdout !== null || this.pending.stderr !== null;
  }

  /**
   * Feed one record, `buf[start:to)` with its newline. Returns false (and ignores it) when it is
   * not a record.
   */
  push(buf: Buffer, start = 0, to = buf.length): boolean {
    const s1 = buf.indexOf(SPACE, start);
    if (s1 < start + 20 || to < s1 + 11 || buf[s1 + 7] !== SPACE || buf[s1 + 1] !== 0x73) return false;
    let stream: LogStream;
    if (buf[s1 + 4] === 0x6f) stream = 'stdout';
    else if (buf[s1 + 4] === 0x65) stream = 'stderr';
    else return false;
    const tag = buf[s1 + 8];
    if (buf[s1 + 9] !== SPACE || (tag !== 0x50 && tag !== 0x46)) return false;
    const from = s1 + 10;
    const time = this.timeOf(buf, start, s1);
    const p = this.pending[stream];
    if (tag === 0x50 /* P: conmon's newline ends it, not the container's */) {
      const end = buf[to - 1] === 0x0a ? to - 1 : to;
      if (end <= from) return true;
      const data = Buffer.from(buf.subarray(from, end));
      if (p) {
        p.parts.push(data);
        p.length += data.length;
        p.latest = time;
      } else
        this.pending[stream] = {
          latest: time,
          cut: null,
          parts: [data],
          length: data.length,
          seq: this.seq++,
        };
      this.cutLong(stream);
      return true;
    }
    if (!p) {
      if (to - from - 1 < MAX_MESSAGE) this.enc.add(stream, time, buf, from, to);
      else this.emitLine(stream, time, buf.subarray(from, to));
      return true;
    }
    this.pending[stream] = null;
    p.parts.push(buf.subarray(from, to));
    this.emitLine(stream, p.cut ?? time, Buffer.concat(p.parts));
    return true;
  }

  /** A whole line (ending with its newline): 16 KiB partial entries while that much is left. */
  private emitLine(stream: LogStream, time: Buffer, line: Buffer): void {
    let off = 0;
    while (line.length - off - 1 >= MAX_MESSAGE) {
      this.enc.add(stream, time, line, off, off + MAX_MESSAGE);
      off += MAX_MESSAGE;
    }
    this.enc.add(stream, time, line, off, line.length);
  }

  /** An unfinished line that reached 16 KiB goes out in 16 KiB partial entries. */
  private cutLong(stream: LogStream): void {
    const p = this.pending[stream]!;
    if (p.length < MAX_MESSAGE) return;
    const all = p.parts.length === 1 ? p.parts[0]! : Buffer.concat(p.parts);
    p.cut ??= p.latest;
    let off = 0;
    while (all.length - off >= MAX_MESSAGE) {
      this.enc.add(stream, p.cut, all, off, off + MAX_MESSAGE);
      off += MAX_MESSAGE;
    }
    // the line goes on (maybe with nothing yet): its next parts keep the time of the first cut
    const rest = off === all.length ? null : Buffer.from(all.subarray(off));
    p.parts = rest ? [rest] : [];
    p.length = rest?.length ?? 0;
  }

  /** The output ended: unfinished lines become partial entries (no newline), oldest first. */
  flush(): void {
    for (const s of this.waiting()) {
      const p = this.pending[s]!;
      this.pending[s] = null;
      if (p.length === 0) continue;
      const all = Buffer.concat(p.parts);
      this.enc.add(s, p.cut ?? p.latest, all, 0, all.length);
    }
  }

  private waiting(): LogStream[] {
    return (['stdout', 'stderr'] as const)
      .filter((s) => this.pending[s] !== null)
      .sort((a, b) => this.pending[a]!.seq - this.pending[b]!.seq);
  }

  /** The unfinished lines, oldest first. */
  snapshot(): PendingState {
    const out: PendingState = {};
    for (const s of this.waiting()) {
      const p = this.pending[s]!;
      out[s] = {
        time: (p.cut ?? p.latest).toString('latin1'),
        data: Buffer.concat(p.parts).toString('base64'),
      };
      if (p.cut) out[s].cut = true;
    }
    return out;
  }

  /** Take up the unfinished lines of a snapshot (in its order). */
  restore(state: PendingState | undefined): void {
    for (const key of Object.keys(state ?? {})) {
      if (key !== 'stdout' && key !== 'stderr') continue;
      const s: LogStream = key;
      const p = state?.[s];
      if (!p) continue;
      const data = Buffer.from(p.data, 'base64');
      const time = Buffer.from(p.time, 'latin1');
      this.pending[s] = {
        latest: time,
        cut: p.cut ? time : null,
        parts: [data],
        length: data.length,
        seq: this.seq++,
      };
    }
  }
}
