/**
 * dockerd's json-file log format: one JSON object per line,
 * `{"log":"hello\n","stream":"stdout","attrs":{...},"time":"2026-11-21T10:00:00.123456789Z"}`,
 * byte for byte as moby's jsonlog.JSONLogs.MarshalJSONBuf writes it (its own string escaping,
 * `attrs` only when the container has some, the time in UTC as Go's RFC3339Nano), and the
 * reading side: a decoder that unescapes the message in place.
 */

import type { LogStream } from './k8s-file.js';

const HEX = Buffer.from('0123456789abcdef', 'latin1');

/** Bytes below 0x80 that are copied as they are (moby escapes <, >, & as well). */
const PLAIN = new Uint8Array(128);
for (let b = 0x20; b < 0x80; b++) PLAIN[b] = 1;
for (const c of '"\\<>&') PLAIN[c.charCodeAt(0)] = 0;

/**
 * Length of the valid UTF-8 sequence at `i` (2 to 4), 0 when it is not one (Go's
 * utf8.DecodeRune rules: no overlong forms, no surrogates, nothing above U+10FFFF).
 */
function utf8Length(s: Uint8Array, i: number, end: number): number {
  const b = s[i]!;
  const cont = (k: number) => i + k < end && (s[i + k]! & 0xc0) === 0x80;
  if (b >= 0xc2 && b <= 0xdf) return cont(1) ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) {
    if (i + 1 >= end) return 0;
    const b1 = s[i + 1]!;
    if (b === 0xe0 && b1 < 0xa0) return 0;
    if (b === 0xed && b1 > 0x9f) return 0;
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    if (i + 1 >= end) return 0;
    const b1 = s[i + 1]!;
    if (b === 0xf0 && b1 < 0x90) return 0;
    if (b === 0xf4 && b1 > 0x8f) return 0;
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

/**
 * Write `s[start:end]` as a JSON string body (no quotes) at `out[o]`, escaped as moby's
 * ffjsonWriteJSONBytesAsString does: `\"`, `\\`, `\n`, `\r`, other control characters and <, >, &
 * as `\u00XX`, U+2028/U+2029 as `\u2028`/`\u2029`, each invalid UTF-8 byte as `\ufffd`.
 * `goStd` escapes as Go's encoding/json does instead (`\t` too; used for attrs). `out` must
 * have room for 6 bytes per input byte. Returns the new end.
 */
export function escapeInto(
  out: Buffer,
  o: number,
  s: Uint8Array,
  start: number,
  end: number,
  goStd = false,
): number {
  let i = start;
  while (i < end) {
    // a run of bytes copied as they are, at once
    let j = i;
    while (j < end && PLAIN[s[j]!] === 1) j++;
    if (j > i) {
      out.set(j - i > 1 ? s.subarray(i, j) : [s[i]!], o);
      o += j - i;
      i = j;
      if (i === end) break;
    }
    const b = s[i]!;
    if (b < 0x80) {
      out[o++] = 0x5c;
      if (b === 0x22 || b === 0x5c) out[o++] = b;
      else if (b === 0x0a) out[o++] = 0x6e;
      else if (b === 0x0d) out[o++] = 0x72;
      else if (b === 0x09 && goStd) out[o++] = 0x74;
      else {
        out[o++] = 0x75;
        out[o++] = 0x30;
        out[o++] = 0x30;
        out[o++] = HEX[b >> 4]!;
        out[o++] = HEX[b & 15]!;
      }
      i++;
      continue;
    }
    const n = utf8Length(s, i, end);
    if (n === 0) {
      o += out.write('\\ufffd', o, 'latin1');
      i++;
      continue;
    }
    if (n === 3 && b === 0xe2 && s[i + 1] === 0x80 && (s[i + 2] === 0xa8 || s[i + 2] === 0xa9)) {
      o += out.write(s[i + 2] === 0xa8 ? '\\u2028' : '\\u2029', o, 'latin1');
      i += 3;
      continue;
    }
    for (let k = 0; k < n; k++) out[o++] = s[i + k]!;
    i += n;
  }
  return o;
}

/** A JSON string as Go's encoding/json writes it (quotes included). */
export function goJsonString(value: string): string {
  const src = Buffer.from(value, 'utf8');
  const out = Buffer.allocUnsafe(src.length * 6 + 2);
  out[0] = 0x22;
  const end = escapeInto(out, 1, src, 0, src.length, true);
  out[end] = 0x22;
  return out.toString('utf8', 0, end + 1);
}

/** `,"attrs":{...}` as json-file writes it (keys sorted, as Go marshals a map), or '' without attrs. */
export function attrsField(attrs: Record<string, string> | undefined): string {
  if (!attrs) return '';
  const keys = Object.keys(attrs).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)) as number);
  if (keys.length === 0) return '';
  return `,"attrs":{${keys.map((k) => `${goJsonString(k)}:${goJsonString(attrs[k] ?? '')}`).join(',')}}`;
}

const LOG_OPEN = Buffer.from('{"log":"', 'latin1');
const STREAM_OUT = Buffer.from('","stream":"stdout"', 'latin1');
const STREAM_ERR = Buffer.from('","stream":"stderr"', 'latin1');
const NO_LOG_OUT = Buffer.from('{"stream":"stdout"', 'latin1');
const NO_LOG_ERR = Buffer.from('{"stream":"stderr"', 'latin1');
const TIME_OPEN = Buffer.from(',"time":"', 'latin1');
const CLOSE = Buffer.from('"}\n', 'latin1');

const EMPTY = Buffer.alloc(0);
const MIN_BUFFER = 64 * 1024;

/**
 * Encodes log entries one after the other into one growing buffer (written to the file at once).
 */
export class JsonEntryEncoder {
  private buf: Buffer;
  /** Bytes encoded so far. */
  length = 0;
  private readonly attrs: Buffer;

  /** The end of an entry (`","stream":...,"time":"..."}\n`) for the last stream and time seen. */
  private suffixTime: Buffer | null = null;
  private suffixStream: LogStream = 'stdout';
  private suffix: Buffer = Buffer.alloc(0);

  constructor(attrs?: Record<string, string>) {
    this.attrs = Buffer.from(attrsField(attrs), 'utf8');
    this.buf = EMPTY;
  }

  private suffixFor(stream: LogStream, time: Buffer): Buffer {
    if (this.suffixTime !== time || this.suffixStream !== stream) {
      this.suffixTime = time;
      this.suffixStream = stream;
      this.suffix = Buffer.concat([
        stream === 'stdout' ? STREAM_OUT : STREAM_ERR,
        this.attrs,
        TIME_OPEN,
        time,
        CLOSE,
      ]);
    }
    return this.suffix;
  }

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n, MIN_BUFFER));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }

  /**
   * One entry: `data[start:end]` (the message, with its newline unless partial), its stream and
   * time (Go's RFC3339Nano; pass the same Buffer for the same time, the end of the entry is kept).
   */
  add(stream: LogStream, time: Buffer, data: Uint8Array, start = 0, end = data.length): void {
    this.reserve((end - start) * 6 + this.attrs.length + time.length + 48);
    const b = this.buf;
    let o = this.length;
    if (end > start) {
      for (let k = 0; k < 8; k++) b[o + k] = LOG_OPEN[k]!;
      o = escapeInto(b, o + 8, data, start, end);
      const suffix = this.suffixFor(stream, time);
      b.set(suffix, o);
      o += suffix.length;
    } else {
      // moby leaves out an empty "log"
      o += (stream === 'stdout' ? NO_LOG_OUT : NO_LOG_ERR).copy(b, o);
      o += this.attrs.copy(b, o);
      o += TIME_OPEN.copy(b, o);
      o += time.copy(b, o);
      o += CLOSE.copy(b, o);
    }
    this.length = o;
  }

  /**
   * What was encoded since the last take; the caller owns it (the encoder goes on in a new buffer,
   * made when it is needed: an idle encoder holds none).
   */
  take(): Buffer {
    const out = this.buf.subarray(0, this.length);
    this.buf = EMPTY;
    this.length = 0;
    return out;
  }
}

/** One decoded entry; `log` is unescaped in place (a view into the line). */
export interface JsonEntry {
  stream: LogStream;
  log: Buffer;
  /** The time as written (Go's RFC3339Nano), bytes [timeStart, timeEnd) of the line. */
  timeStart: number;
  timeEnd: number;
  /** The raw JSON of `attrs`, bytes [attrsStart, attrsEnd) of the line; attrsStart < 0 without. */
  attrsStart: number;
  attrsEnd: number;
  /** Set when the line was not in moby's layout and went through JSON.parse. */
  parsed?: { time: string; attrs?: Record<string, string> };
}

const Q = 0x22;
const BS = 0x5c;

function matches(line: Uint8Array, at: number, what: Buffer): boolean {
  if (at < 0 || at + what.length > line.length) return false;
  for (let i = 0; i < what.length; i++) if (line[at + i] !== what[i]) return false;
  return true;
}

const STREAM_KEY = Buffer.from('","stream":"std', 'latin1');
const TIME_KEY = Buffer.from(',"time":"', 'latin1');
const ATTRS_KEY = Buffer.from(',"attrs":', 'latin1');
const EMPTY_STREAM_KEY = Buffer.from('{"stream":"std', 'latin1');

function hex4(line: Uint8Array, i: number): number {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const c = line[i + k]!;
    const d =
      c >= 0x30 && c <= 0x39
        ? c - 0x30
        : c >= 0x61 && c <= 0x66
          ? c - 87
          : c >= 0x41 && c <= 0x46
            ? c - 55
            : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

function putUtf8(line: Uint8Array, w: number, cp: number): number {
  if (cp < 0x80) line[w++] = cp;
  else if (cp < 0x800) {
    line[w++] = 0xc0 | (cp >> 6);
    line[w++] = 0x80 | (cp & 0x3f);
  } else if (cp < 0x10000) {
    line[w++] = 0xe0 | (cp >> 12);
    line[w++] = 0x80 | ((cp >> 6) & 0x3f);
    line[w++] = 0x80 | (cp & 0x3f);
  } else {
    line[w++] = 0xf0 | (cp >> 18);
    line[w++] = 0x80 | ((cp >> 12) & 0x3f);
    line[w++] = 0x80 | ((cp >> 6) & 0x3f);
    line[w++] = 0x80 | (cp & 0x3f);
  }
  return w;
}

/**
 * Unescape the JSON string body `line[from:to)` in place (the result is never longer; `from` is
 * its first backslash); returns its new end, or -1 when it is not a valid string body. Lone
 * surrogates become U+FFFD, as Go's decoder makes them.
 */
function unescapeInPlace(line: Uint8Array, from: number, to: number): number {
  let r = from;
  let w = from;
  while (r < to) {
    const c = line[r]!;
    if (c !== BS) {
      line[w++] = c;
      r++;
      continue;
    }
    if (r + 1 >= to) return -1;
    const e = line[r + 1]!;
    r += 2;
    switch (e) {
      case 0x6e:
        line[w++] = 0x0a;
        break;
      case 0x72:
        line[w++] = 0x0d;
        break;
      case 0x74:
        line[w++] = 0x09;
        break;
      case 0x22:
      case 0x5c:
      case 0x2f:
        line[w++] = e;
        break;
      case 0x62:
        line[w++] = 0x08;
        break;
      case 0x66:
        line[w++] = 0x0c;
        break;
      case 0x75: {
        if (r + 4 > to) return -1;
        let cp = hex4(line, r);
        if (cp < 0) return -1;
        r += 4;
        if (cp >= 0xd800 && cp < 0xdc00) {
          const lo = r + 6 <= to && line[r] === BS && line[r + 1] === 0x75 ? hex4(line, r + 2) : -1;
          if (lo >= 0xdc00 && lo < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            r += 6;
          } else cp = 0xfffd;
        } else if (cp >= 0xdc00 && cp < 0xe000) cp = 0xfffd;
        w = putUtf8(line, w, cp);
        break;
      }
      default:
        return -1;
    }
  }
  return w;
}

/** The entry of an object that is not in moby's layout (another writer's key order...). */
function decodeSlow(buf: Buffer, from: number, to: number): JsonEntry | null {
  let obj: unknown;
  try {
    obj = JSON.parse(buf.toString('utf8', from, to));
  } catch {
    return null;
  }
  if (!obj || typeof obj !== 'object') return null;
  const o = obj as { log?: unknown; stream?: unknown; time?: unknown; attrs?: unknown };
  if (o.stream !== 'stdout' && o.stream !== 'stderr') return null;
  if (typeof o.time !== 'string') return null;
  const attrs = o.attrs && typeof o.attrs === 'object' ? (o.attrs as Record<string, string>) : undefined;
  return {
    stream: o.stream,
    log: Buffer.from(typeof o.log === 'string' ? o.log : '', 'utf8'),
    timeStart: 0,
    timeEnd: 0,
    attrsStart: -1,
    attrsEnd: -1,
    parsed: attrs ? { time: o.time, attrs } : { time: o.time },
  };
}

/**
 * Decode the line `buf[from:to)` (with or without its newline). Lines in moby's layout are decoded
 * without a JSON parser, the message unescaped in place (the line's bytes change); others go
 * through JSON.parse. Null for lines that are not log entries (docker skips those too). Offsets
 * in the result are offsets in `buf`.
 */
export function decodeEntry(buf: Buffer, from = 0, to = buf.length): JsonEntry | null {
  let end = to;
  if (end > from && buf[end - 1] === 0x0a) end--;
  if (end - from < 30 || buf[end - 1] !== 0x7d /* } */ || buf[end - 2] !== Q)
    return decodeSlow(buf, from, to);
  const body = from + LOG_OPEN.length;
  // {"log":"<escaped>","stream":"std... or, for an empty message, {"stream":"std...
  let logEnd = -1;
  let tag: number;
  if (matches(buf, from, LOG_OPEN)) {
    // the closing quote of "log": one not escaped by an odd run of backslashes
    let q = buf.indexOf(Q, body);
    for (;;) {
      if (q < 0 || q >= end) return decodeSlow(buf, from, to);
      let k = 0;
      while (q - 1 - k >= body && buf[q - 1 - k] === BS) k++;
      if ((k & 1) === 0) break;
      q = buf.indexOf(Q, q + 1);
    }
    if (!matches(buf, q, STREAM_KEY)) return decodeSlow(buf, from, to);
    logEnd = q;
    tag = q + STREAM_KEY.length;
  } else if (matches(buf, from, EMPTY_STREAM_KEY)) {
    tag = from + EMPTY_STREAM_KEY.length;
  } else return decodeSlow(buf, from, to);
  let stream: LogStream;
  if (buf[tag] === 0x6f && buf[tag + 1] === 0x75 && buf[tag + 2] === 0x74) stream = 'stdout';
  else if (buf[tag] === 0x65 && buf[tag + 1] === 0x72 && buf[tag + 2] === 0x72) stream = 'stderr';
  else return decodeSlow(buf, from, to);
  if (buf[tag + 3] !== Q) return decodeSlow(buf, from, to);
  // ,"time":"<ts>"} or ,"attrs":{...},"time":"<ts>"}
  const after = tag + 4;
  const timeEnd = end - 2;
  let timeStart: number;
  let attrsStart = -1;
  let attrsEnd = -1;
  if (matches(buf, after, TIME_KEY)) timeStart = after + TIME_KEY.length;
  else if (matches(buf, after, ATTRS_KEY)) {
    attrsStart = after + ATTRS_KEY.length;
    timeStart = buf.lastIndexOf(Q, timeEnd - 1) + 1;
    attrsEnd = timeStart - TIME_KEY.length;
    if (attrsEnd <= attrsStart || !matches(buf, attrsEnd, TIME_KEY)) return decodeSlow(buf, from, to);
  } else return decodeSlow(buf, from, to);
  if (timeEnd <= timeStart || buf.indexOf(Q, timeStart) !== timeEnd) return decodeSlow(buf, from, to);
  let log: Buffer;
  if (logEnd < 0) log = buf.subarray(from, from);
  else {
    const firstEscape = buf.indexOf(BS, body);
    if (firstEscape < 0 || firstEscape >= logEnd) log = buf.subarray(body, logEnd);
    else {
      const w = unescapeInPlace(buf, firstEscape, logEnd);
      if (w < 0) return null;
      log = buf.subarray(body, w);
    }
  }
  return { stream, log, timeStart, timeEnd, attrsStart, attrsEnd };
}
