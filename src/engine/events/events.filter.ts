import type { Filters } from '../../common/filters.js';
import { familiarName, tryParseNormalizedNamed } from '../../common/reference.js';
import type { EngineEvent } from './events.service.js';

/**
 * A predicate for GET /events filters, with dockerd's matching rules (daemon/events/filter.go):
 * every filter name given must match; names dockerd does not know, and unknown types or scopes,
 * filter nothing out or everything, as there, without an error.
 * - `container`, `volume`, `network`, `daemon`, `plugin`, `node`, `service`, `secret`, `config`:
 *   the actor's ID or its `name` attribute is one of the values or starts with one (whatever the
 *   event's type: `container=x` leaves out image and network events).
 * - `image`: the actor's ID, or its image name (attribute `image` of container events, `name` of
 *   image events), with or without its tag, is one of the values.
 * - `event`: the action is one of the values (health_status, exec_create and exec_start also
 *   match their `name: detail` actions); `type`, `scope`: one of the values.
 * - `label`: every value matches an attribute (`key` or `key=value`).
 */
export function eventFilter(filters: Filters): (e: EngineEvent) => boolean {
  const exact = (key: string, source: string): boolean => {
    const values = filters.get(key);
    return !values || values.includes(source);
  };
  const fuzzy = (key: string, source: string): boolean => {
    const values = filters.get(key);
    return !values || values.some((v) => source === v || source.startsWith(v));
  };
  const fuzzyName = (key: string, e: EngineEvent): boolean => {
    const values = filters.get(key);
    return !values || fuzzy(key, e.Actor.ID) || fuzzy(key, e.Actor.Attributes.name ?? '');
  };
  const actionPrefixed = (filters.get('event') ?? []).some((v) =>
    ['health_status', 'exec_create', 'exec_start'].includes(v),
  );
  const labels = filters.get('label') ?? [];
  return (e) => {
    const attrs = e.Actor.Attributes;
    const imageName = (e.Type === 'image' ? attrs.name : attrs.image) ?? '';
    return (
      (actionPrefixed ? fuzzy('event', e.Action) : exact('event', e.Action)) &&
      exact('type', e.Type) &&
      exact('scope', e.scope) &&
      ['daemon', 'container', 'plugin', 'volume', 'network', 'node', 'service', 'secret', 'config'].every(
        (key) => fuzzyName(key, e),
      ) &&
      (!filters.has('image') ||
        [e.Actor.ID, imageName, stripTag(e.Actor.ID), stripTag(imageName)].some((v) => exact('image', v))) &&
      labels.every((l) => matchLabel(attrs, l))
    );
  };
}

/** An image reference's familiar name without tag or digest (dockerd's stripTag); as given if it is none. */
function stripTag(ref: string): string {
  const parsed = tryParseNormalizedNamed(ref);
  return parsed ? familiarName(parsed) : ref;
}

function matchLabel(attrs: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return filter in attrs;
  return attrs[filter.slice(0, i)] === filter.slice(i + 1);
}
