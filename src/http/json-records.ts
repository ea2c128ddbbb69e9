import type { IncomingMessage } from 'node:http';

/**
 * Streams of JSON records (events, logs as JSON): the media types a client may ask for, its Accept
 * header read as moby reads it (gddo's header.ParseAccept), and each record's framing.
 */

export const JSON_LINES = 'application/jsonl';
export const NDJSON = 'application/x-ndjson';
export const JSON_SEQ = 'application/json-seq';
/** The record streams, in the order of preference at equal weight. */
export const JSON_RECORD_TYPES = [JSON_LINES, NDJSON, JSON_SEQ] as const;

/** A request's Accept header values, every header line (node's headersDistinct). */
export function acceptValues(req: IncomingMessage): string[] | undefined {
  return req.headersDistinct.accept;
}

/** RFC 2616 token characters (gddo's octet table), with `/` as expectTokenSlash allows. */
function tokenSlashLength(s: string): number {
  let i = 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 32 || c >= 127 || (c !== 47 && '()<>@,;:\\"/[]?={}'.includes(s[i] as string))) break;
  }
  return i;
}

function skipSpace(s: string): string {
  let i = 0;
  while (i < s.length && (s[i] === ' ' || s[i] === '\t')) i++;
  return s.slice(i);
}

/** gddo's expectQuality: `0` or `1`, then optionally `.` and digits; -1 when it is not one. */
function quality(s: string): { q: number; rest: string } {
  if (s[0] !== '0' && s[0] !== '1') return { q: -1, rest: '' };
  let q = s[0] === '1' ? 1 : 0;
  let rest = s.slice(1);
  if (!rest.startsWith('.')) return { q, rest };
  rest = rest.slice(1);
  let i = 0;
  let n = 0;
  let d = 1;
  for (; i < rest.length && rest[i] !== undefined && /[0-9]/.test(rest[i] as string); i++) {
    n = n * 10 + Number(rest[i]);
    d *= 10;
  }
  q += n / d;
  return { q, rest: rest.slice(i) };
}

/** gddo's header.ParseAccept: media ranges with their q; a value stops at anything unexpected. */
export function parseAccept(values: readonly string[]): Array<{ value: string; q: number }> {
  const specs: Array<{ value: string; q: number }> = [];
  for (const header of values) {
    let s = header;
    for (;;) {
      const n = tokenSlashLength(s);
      const value = s.slice(0, n);
      if (!value) break;
      s = skipSpace(s.slice(n));
      let q = 1;
      if (s.startsWith(';')) {
        s = skipSpace(s.slice(1));
        if (!s.startsWith('q=')) break;
        ({ q, rest: s } = quality(s.slice(2)));
        if (q < 0) break;
      }
      specs.push({ value, q });
      s = skipSpace(s);
      if (!s.startsWith(',')) break;
      s = skipSpace(s.slice(1));
    }
  }
  return specs;
}

/**
 * moby's MatchAcceptStrict: the offer with the highest q among those the Accept header names
 * exactly (no wildcards, q=0 ignored; earlier offers win ties); undefined when none is named.
 */
export function matchAcceptStrict(
  values: readonly string[] | undefined,
  offers: readonly string[],
): string | undefined {
  if (!values?.length || values.every((v) => v === '')) return undefined;
  const specs = parseAccept(values);
  let best: string | undefined;
  let bestQ = -1;
  for (const offer of offers) {
    for (const spec of specs) {
      if (spec.q === 0 || spec.value !== offer) continue;
      if (spec.q > bestQ) {
        bestQ = spec.q;
        best = offer;
      }
    }
  }
  return best;
}

/**
 * The best offer for the Accept header, wildcards included (`type/*` before `*``/*` at equal
 * weight, earlier offers first); `fallback` when the header matches none or is absent. moby's
 * contenttype.Negotiate (gddo's NegotiateContentType).
 */
export function negotiate(
  values: readonly string[] | undefined,
  offers: readonly string[],
  fallback: string,
): string {
  const specs = parseAccept(values ?? []);
  let best = fallback;
  let bestQ = -1;
  let bestWild = 2;
  for (const offer of offers) {
    for (const spec of specs) {
      let wild: number;
      if (spec.value === '*/*') wild = 2;
      else if (spec.value.endsWith('/*') && offer.startsWith(spec.value.slice(0, -1))) wild = 1;
      else if (spec.value === offer) wild = 0;
      else continue;
      if (spec.q > bestQ || (spec.q === bestQ && wild < bestWild)) {
        bestQ = spec.q;
        bestWild = wild;
        best = offer;
      }
    }
  }
  return bestQ > 0 ? best : fallback;
}

/** One record framed for the stream's type: RFC 7464 (RS + JSON + LF) for json-seq, else a line. */
export function frameRecord(contentType: string, json: string): string {
  return contentType === JSON_SEQ ? `\x1e${json}\n` : `${json}\n`;
}
