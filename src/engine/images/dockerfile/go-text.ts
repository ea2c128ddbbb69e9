import { invalidParameter } from '../../../common/errors.js';

/** Go semantics the Dockerfile code relies on: strings (space classes, quoting as %q prints), path cleaning, durations and integers with Go's parse errors. */
/** unicode.IsSpace */
export const SPACE_CLASS =
  '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
export const SPACE_RE = new RegExp(`^[${SPACE_CLASS}]$`);
export const LEADING_SPACE_RE = new RegExp(`^[${SPACE_CLASS}]+`);
export const TRAILING_SPACE_RE = new RegExp(`[${SPACE_CLASS}]+$`);
/** The parser's reWhitespace. */
export const WHITESPACE_RE = /[\t\v\f\r ]+/;

export const isSpace = (ch: string | undefined): boolean => ch !== undefined && SPACE_RE.test(ch);
export const trimLeftSpace = (s: string): string => s.replace(LEADING_SPACE_RE, '');
export const trimSpace = (s: string): string => trimLeftSpace(s).replace(TRAILING_SPACE_RE, '');
export const isLetter = (ch: string): boolean => /^\p{L}$/u.test(ch);
export const isDigit = (ch: string): boolean => /^\p{Nd}$/u.test(ch);

/**
 * The UTF-8 bytes of `s` as a string of U+0000..U+00FF, for the parser steps that walk bytes.
 * Where such a step copies byte by byte it turns each byte into a rune, so non-ASCII text comes
 * out re-encoded ("µ" becomes "Âµ"); keeping the byte string reproduces that.
 */
export const toBytes = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');
export const fromBytes = (b: string): string => Buffer.from(b, 'latin1').toString('utf8');

export const PRINTABLE_RE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
export const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');

/** strconv.Quote (what `%q` and `%#v` print for a string). */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) as number;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (PRINTABLE_RE.test(ch)) out += ch;
    else if (ch === '\x07') out += '\\a';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\v') out += '\\v';
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (cp >= 0xd800 && cp <= 0xdfff) out += '\ufffd';
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return `${out}"`;
}

/** The time package's own quoting: every non-ASCII or control byte as \xNN. */
export function timeQuote(s: string): string {
  let out = '"';
  for (const b of Buffer.from(s, 'utf8')) {
    if (b >= 0x80 || b < 0x20) out += `\\x${hex(b, 2)}`;
    else if (b === 0x22 || b === 0x5c) out += `\\${String.fromCharCode(b)}`;
    else out += String.fromCharCode(b);
  }
  return `${out}"`;
}

/** Go's path.Clean. */
export function cleanPath(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
      else if (!rooted) out.push('..');
      continue;
    }
    out.push(part);
  }
  const s = out.join('/');
  return rooted ? `/${s}` : s || '.';
}

export const DURATION_UNITS: Record<string, bigint> = {
  ns: 1n,
  us: 1000n,
  [toBytes('µs')]: 1000n, // U+00B5
  [toBytes('μs')]: 1000n, // U+03BC
  ms: 1000000n,
  s: 1000000000n,
  m: 60000000000n,
  h: 3600000000000n,
};
export const MAX_DURATION = 1n << 63n;

/** Go's time.ParseDuration, in nanoseconds; errors are InvalidParameter with Go's text. */
export function parseGoDuration(orig: string): number {
  const invalid = () => invalidParameter(`time: invalid duration ${timeQuote(orig)}`);
  let s = toBytes(orig);
  let neg = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') throw invalid();
  const digit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';
  let d = 0n;
  while (s !== '') {
    if (!(s[0] === '.' || digit(s[0]))) throw invalid();
    // leadingInt
    let i = 0;
    let v = 0n;
    for (; i < s.length && digit(s[i]); i++) {
      if (v > MAX_DURATION / 10n) throw invalid();
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > MAX_DURATION) throw invalid();
    }
    const pre = i > 0;
    s = s.slice(i);
    // leadingFraction
    let f = 0n;
    let scale = 1;
    let post = false;
    if (s !== '' && s[0] === '.') {
      s = s.slice(1);
      let j = 0;
      let overflow = false;
      for (; j < s.length && digit(s[j]); j++) {
        if (overflow) continue;
        if (f > (MAX_DURATION - 1n) / 10n) {
          overflow = true;
          continue;
        }
        const y = f * 10n + BigInt(s.charCodeAt(j) - 48);
        if (y > MAX_DURATION) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = j > 0;
      s = s.slice(j);
    }
    if (!pre && !post) throw invalid();
    let u = 0;
    while (u < s.length && !(s[u] === '.' || digit(s[u]))) u++;
    if (u === 0) throw invalidParameter(`time: missing unit in duration ${timeQuote(orig)}`);
    const unitName = s.slice(0, u);
    s = s.slice(u);
    const unit = DURATION_UNITS[unitName];
    if (unit === undefined) {
      throw invalidParameter(
        `time: unknown unit ${timeQuote(fromBytes(unitName))} in duration ${timeQuote(orig)}`,
      );
    }
    if (v > MAX_DURATION / unit) throw invalid();
    v *= unit;
    if (f > 0n) {
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > MAX_DURATION) throw invalid();
    }
    d += v;
    if (d > MAX_DURATION) throw invalid();
  }
  if (neg) return -Number(d);
  if (d > MAX_DURATION - 1n) throw invalid();
  return Number(d);
}

/** strconv.ParseInt(s, 10, bits). */
export function parseGoInt(s: string, bits: number): number {
  const syntax = () => invalidParameter(`strconv.ParseInt: parsing ${goQuote(s)}: invalid syntax`);
  const range = () => invalidParameter(`strconv.ParseInt: parsing ${goQuote(s)}: value out of range`);
  let digits = s;
  let neg = false;
  if (digits[0] === '+' || digits[0] === '-') {
    neg = digits[0] === '-';
    digits = digits.slice(1);
  }
  if (digits === '') throw syntax();
  const maxUnsigned = 2 ** bits - 1;
  let n = 0;
  for (const c of digits) {
    if (c < '0' || c > '9') throw syntax();
    n = n * 10 + (c.charCodeAt(0) - 48);
    if (n > maxUnsigned) throw range();
  }
  const cutoff = 2 ** (bits - 1);
  if ((!neg && n >= cutoff) || (neg && n > cutoff)) throw range();
  return neg ? -n : n;
}
