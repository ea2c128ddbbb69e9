import { invalidParameter } from '../../common/errors.js';
import { checkFilterNames, type Filters } from '../../http/query.js';
import type { EngineEvent } from './events.service.js';

const allowed = [
  'container',
  'event',
  'image',
  'label',
  'type',
  'volume',
  'network',
  'daemon',
  'plugin',
  'node',
  'service',
  'secret',
  'config',
  'scope',
] as const;

const types = [
  'container',
  'image',
  'volume',
  'network',
  'daemon',
  'plugin',
  'node',
  'service',
  'secret',
  'config',
  'builder',
];

/** Build a predicate for GET /events filters, with dockerd's matching rules. */
export function eventFilter(filters: Filters): (e: EngineEvent) => boolean {
  checkFilterNames(filters, allowed);
  for (const t of filters.get('type') ?? []) {
    if (!types.includes(t)) throw invalidParameter(`unknown event type '${t}'`);
  }
  for (const s of filters.get('scope') ?? []) {
    if (s !== 'local' && s !== 'swarm') throw invalidParameter(`invalid scope filter '${s}'`);
  }
  const any = (key: string, test: (v: string) => boolean): boolean => {
    const values = filters.get(key);
    return !values || values.length === 0 || values.some(test);
  };
  return (e) => {
    const attrs = e.Actor.Attributes;
    const name = attrs.name ?? '';
    return (
      any('type', (t) => t === e.Type) &&
      any('scope', (s) => s === e.scope) &&
      any('event', (a) => a === e.Action || e.Action.startsWith(`${a}:`)) &&
      any('label', (l) => matchLabel(attrs, l)) &&
      objectMatch(filters, 'container', e, 'container', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'image', e, 'image', (v) =>
        e.Type === 'container'
          ? sameImage(v, attrs.image ?? '')
          : idOrName(v, e.Actor.ID, name) || sameImage(v, name),
      ) &&
      objectMatch(filters, 'volume', e, 'volume', (v) => v === e.Actor.ID) &&
      objectMatch(filters, 'network', e, 'network', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'daemon', e, 'daemon', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'plugin', e, 'plugin', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'node', e, 'node', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'service', e, 'service', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'secret', e, 'secret', (v) => idOrName(v, e.Actor.ID, name)) &&
      objectMatch(filters, 'config', e, 'config', (v) => idOrName(v, e.Actor.ID, name))
    );
  };
}

/**
 * An object filter (container=x) keeps events of that object type that match, and drops other
 * events of that type; events of other types pass unless only that kind was asked for. dockerd:
 * `--filter container=x` shows only x's container events (and, with image filters, image events).
 */
function objectMatch(
  filters: Filters,
  key: string,
  e: EngineEvent,
  type: string,
  test: (v: string) => boolean,
): boolean {
  const values = filters.get(key);
  if (!values || values.length === 0) return true;
  if (key === 'image' && e.Type === 'container') return values.some(test);
  if (e.Type !== type) return false;
  return values.some(test);
}

function idOrName(value: string, id: string, name: string): boolean {
  return value === name || (value.length > 0 && id.startsWith(value)) || id === `sha256:${value}`;
}

function normaliseImage(ref: string): string {
  let r = ref.replace(/^docker\.io\//, '').replace(/^library\//, '');
  const lastSlash = r.lastIndexOf('/');
  if (!r.includes('@') && !r.slice(lastSlash + 1).includes(':')) r += ':latest';
  return r;
}

function sameImage(filter: string, image: string): boolean {
  if (!image) return false;
  return filter === image || normaliseImage(filter) === normaliseImage(image);
}

function matchLabel(attrs: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return filter in attrs;
  return attrs[filter.slice(0, i)] === filter.slice(i + 1);
}
