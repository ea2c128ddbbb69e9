import type { IncomingHttpHeaders } from 'node:http';

/**
 * Streams of JSON records (events, logs in JSON): the media types a client may ask for, the
 * negotiation of its Accept header, and each record's framing.
 */

export const JSON_LINES = 'application/jsonl';
export const NDJSON = 'application/x-ndjson';
export const JSON_SEQ = 'application/json-seq';
/** The record streams, in the order of preference at equal weight. */
export const JSON_RECORD_TYPES = [JSON_LINES, NDJSON, JSON_SEQ] as const;

interface AcceptSpec {
  value: string;
  q: number;
}

/** The media ranges of an Accept header with their weights (q=1 when not given). */
export function parseAccept(header: string | string[] | undefined): AcceptSpec[] {
  const text = Array.isArray(header) ? header.join(',') : (header ?? '');
  const out: AcceptSpec[] = [];
  for (const part of text.split(',')) {
    const [type = '', ...params] = part.split(';').map((p) => p.trim());
    if (!type) continue;
    let q = 1;
    for (const p of params) {
      const m = /^q\s*=\s*([0-9.]+)$/i.exec(p);
      if (m) q = Math.min(1, Number(m[1]) || 0);
    }
    out.push({ value: type.toLowerCase(), q });
  }
  return out;
}

/**
 * The offer the Accept header names exactly (wildcards do not count), the one of highest weight
 * (earlier offers win ties); '' when none is named. moby's contenttype.MatchAcceptStrict.
 */
export function matchAcceptStrict(headers: IncomingHttpHeaders, offers: readonly string[]): string {
  let best = '';
  let bestQ = -1;
  const specs = parseAccept(headers.accept);
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
 * The best offer for the Accept header, wildcards included (`type/*` before `*`/`*` at equal
 * weight, earlier offers first); `fallback` when the header matches none or is absent.
 */
export function negotiate(headers: IncomingHttpHeaders, offers: readonly string[], fallback: string): string {
  const specs = parseAccept(headers.accept);
  if (specs.length === 0) return fallback;
  let best = fallback;
  let bestQ = 0;
  let bestSpecificity = -1;
  for (const offer of offers) {
    for (const spec of specs) {
      const specificity =
        spec.value === offer
          ? 2
          : spec.value === `${offer.split('/')[0]}/*`
            ? 1
            : spec.value === '*/*'
              ? 0
              : -1;
      if (specificity < 0 || spec.q === 0) continue;
      if (spec.q > bestQ || (spec.q === bestQ && specificity > bestSpecificity)) {
        bestQ = spec.q;
        bestSpecificity = specificity;
        best = offer;
      }
    }
  }
  return best;
}

/** One record of a stream of the given media type: RS-framed for json-seq, a line otherwise. */
export function encodeRecord(value: unknown, contentType: string): string {
  const json = JSON.stringify(value);
  return contentType === JSON_SEQ ? `\u001e${json}\n` : `${json}\n`;
}
