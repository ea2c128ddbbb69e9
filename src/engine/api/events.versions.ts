import { type EngineEvent, eventJson } from '../events/events.service.js';
import { gates, versionBefore } from './versions.js';

/**
 * What GET /events changes by API version: the stream's media type, which events are shown, and
 * the legacy keys of each record. Pure.
 */

/** The streaming types a client may ask for by an exact Accept (any version), best first on ties. */
export const EVENT_STREAM_TYPES = [
  'application/jsonl',
  'application/x-ndjson',
  'application/json-seq',
] as const;

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
 * The events stream's Content-Type: `application/json` below 1.52 (the records were never one
 * JSON document, but that is what dockerd said), `application/jsonl` from 1.52; an exact Accept of
 * a JSON stream type picks that one at any version.
 */
export function eventsContentType(accept: readonly string[] | undefined, version: string): string {
  const asked = matchAcceptStrict(accept, EVENT_STREAM_TYPES);
  if (asked) return asked;
  return versionBefore(version, gates.eventsModern) ? 'application/json' : 'application/jsonl';
}

/** One record framed for the stream's type: RFC 7464 (RS + JSON + LF) for json-seq, else a line. */
export function frameRecord(contentType: string, json: string): string {
  return contentType === 'application/json-seq' ? `\x1e${json}\n` : `${json}\n`;
}

/** Whether a client of `version` sees the event: image `create` events only from 1.46. */
export function eventShown(e: EngineEvent, version: string): boolean {
  return !(e.Type === 'image' && e.Action === 'create' && versionBefore(version, gates.imageCreateEvents));
}

/**
 * The record's JSON as `version` has it: below 1.52 container and image events lead with the
 * legacy `status` (the action), `id` (the actor's, left out when empty as dockerd 20.10 did) and,
 * for containers, `from` (the image attribute), in dockerd's key order.
 */
export function eventRecord(e: EngineEvent, version: string): string {
  const json = eventJson(e);
  if (!versionBefore(version, gates.eventsModern) || (e.Type !== 'container' && e.Type !== 'image')) {
    return json;
  }
  const legacy: Record<string, string> = { status: e.Action };
  if (e.Actor.ID) legacy.id = e.Actor.ID;
  const image = e.Actor.Attributes.image;
  if (e.Type === 'container' && image !== undefined) legacy.from = image;
  return `${JSON.stringify(legacy).slice(0, -1)},${json.slice(1)}`;
}
