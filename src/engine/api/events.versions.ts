import { JSON_RECORD_TYPES, matchAcceptStrict } from '../../http/json-records.js';
import { type EngineEvent, eventJson } from '../events/events.service.js';
import { gates, versionBefore } from './versions.js';

/**
 * What GET /events changes by API version: the stream's media type, which events are shown, and
 * the legacy keys of each record. Pure.
 */

/**
 * The events stream's Content-Type: `application/json` below 1.52 (the records were never one
 * JSON document, but that is what dockerd said), `application/jsonl` from 1.52; an exact Accept of
 * a JSON stream type picks that one at any version.
 */
export function eventsContentType(accept: readonly string[] | undefined, version: string): string {
  const asked = matchAcceptStrict(accept, JSON_RECORD_TYPES);
  if (asked) return asked;
  return versionBefore(version, gates.eventsModern) ? 'application/json' : 'application/jsonl';
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
