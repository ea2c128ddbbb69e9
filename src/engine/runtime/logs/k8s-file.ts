/**
 * conmon's k8s-file log format: one record per line,
 * `<RFC3339Nano local time> <stdout|stderr> <P|F> <bytes>\n`. `F` ends a line the container wrote
 * (its newline is the record's); `P` is a part of a longer or unfinished line (the newline after
 * it is conmon's, not the container's).
 */

export type LogStream = 'stdout' | 'stderr';

export interface LogRecord {
  stream: LogStream;
  /** The timestamp as written (with conmon's numeric offset). */
  ts: string;
  partial: boolean;
  /** The bytes the container wrote (with their newline for F records). */
  data: Buffer;
}

const SPACE = 0x20;

/**
 * Parse one record; `line` ends with its newline. Returns null for lines that are not records
 * (torn or foreign lines are skipped, as docker skips undecodable json-file lines). The data is a
 * view into `line`, not a copy.
 */
export function parseRecord(line: Buffer): LogRecord | null {
  const s1 = line.indexOf(SPACE);
  if (s1 < 20) return null;
  const s2 = line.indexOf(SPACE, s1 + 1);
  if (s2 < 0) return null;
  let stream: LogStream;
  if (s2 - s1 === 7 && line[s1 + 1] === 0x73 /* s */ && line[s1 + 4] === 0x6f /* o */) stream = 'stdout';
  else if (s2 - s1 === 7 && line[s1 + 1] === 0x73 && line[s1 + 4] === 0x65 /* e */) stream = 'stderr';
  else return null;
  const tag = line[s2 + 1];
  if (tag !== 0x50 /* P */ && tag !== 0x46 /* F */) return null;
  const ts = line.toString('latin1', 0, s1);
  const from = Math.min(line.length, s2 + 3);
  if (tag === 0x50) {
    // conmon's own newline ends a partial record
    const to = line[line.length - 1] === 0x0a ? line.length - 1 : line.length;
    return { stream, ts, partial: true, data: line.subarray(from, Math.max(from, to)) };
  }
  return { stream, ts, partial: false, data: line.subarray(from) };
}

/** Whether a raw line is an F record (cheap: for the backward tail scan). */
export function isFinalRecord(line: Buffer): boolean | null {
  const s1 = line.indexOf(SPACE);
  if (s1 < 20) return null;
  const s2 = line.indexOf(SPACE, s1 + 1);
  if (s2 < 0 || s2 + 1 >= line.length) return null;
  const tag = line[s2 + 1];
  if (tag === 0x46) return true;
  if (tag === 0x50) return false;
  return null;
}

/** A timestamp as seconds and nanoseconds since the epoch (exact, unlike one float of nanos). */
export interface Instant {
  sec: number;
  nsec: number;
}

/** Parse an RFC 3339 timestamp with up to nanosecond precision. */
export function parseInstant(ts: string): Instant | null {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(ts);
  if (!m) return null;
  const ms = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(ms)) return null;
  const frac = (m[2] ?? '').padEnd(9, '0');
  return { sec: Math.floor(ms / 1000), nsec: Number(frac) };
}

export function instantFromNanos(nanos: number): Instant {
  const sec = Math.floor(nanos / 1e9);
  return { sec, nsec: Math.max(0, Math.round(nanos - sec * 1e9)) };
}

export function compareInstant(a: Instant, b: Instant): number {
  return a.sec - b.sec || a.nsec - b.nsec;
}

/**
 * Docker's timestamp form (Go's RFC3339Nano in UTC: trailing zeros of the fraction dropped, no
 * fraction when it is zero), e.g. `2024-05-01T10:00:00.12345Z`.
 */
export function dockerTime(ts: string): string {
  if (ts.length === 35 && ts.endsWith('+00:00') && ts[19] === '.') {
    const frac = ts.slice(20, 29).replace(/0+$/, '');
    return `${ts.slice(0, 19)}${frac ? `.${frac}` : ''}Z`;
  }
  const i = parseInstant(ts);
  if (!i) return ts;
  const base = new Date(i.sec * 1000).toISOString().slice(0, 19);
  const frac = String(i.nsec).padStart(9, '0').replace(/0+$/, '');
  return `${base}${frac ? `.${frac}` : ''}Z`;
}

/** Format a record line as conmon does (tests, and tools that write logs). */
export function formatRecord(
  date: Date,
  nsec: number,
  stream: LogStream,
  partial: boolean,
  text: string,
): string {
  const base = date.toISOString().slice(0, 19);
  return `${base}.${String(nsec).padStart(9, '0')}+00:00 ${stream} ${partial ? 'P' : 'F'} ${text}\n`;
}
