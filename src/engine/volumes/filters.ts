import { invalidParameter } from '../../common/errors.js';
import { checkFilterNames } from '../../http/query.js';
import type { VolumeInfo } from './volumes.types.js';

export const LIST_FILTERS = ['name', 'dangling', 'driver', 'label'] as const;
export const PRUNE_FILTERS = ['label', 'label!', 'all'] as const;

export function parseBoolFilter(name: string, value: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw invalidParameter(`invalid filter '${name}=${value}'`);
}

/** dockerd matches the name filter as a regular expression (so a plain part matches too). */
function nameMatches(name: string, pattern: string): boolean {
  try {
    return new RegExp(pattern).test(name);
  } catch {
    return name.includes(pattern);
  }
}

/** `key` or `key=value` against a label map. */
export function labelMatches(labels: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return Object.hasOwn(labels, filter);
  const key = filter.slice(0, i);
  return Object.hasOwn(labels, key) && labels[key] === filter.slice(i + 1);
}

/** GET /volumes filters: name (part), driver (part), dangling, label (all must match). */
export function filterVolumes(
  volumes: VolumeInfo[],
  filters: Map<string, string[]>,
  inUse: (name: string) => boolean,
): VolumeInfo[] {
  checkFilterNames(filters, LIST_FILTERS);
  const dangling = filters.get('dangling') ?? [];
  const wantDangling = dangling.map((v) => parseBoolFilter('dangling', v));
  const names = filters.get('name') ?? [];
  const drivers = filters.get('driver') ?? [];
  const labels = filters.get('label') ?? [];
  return volumes.filter((v) => {
    if (names.length && !names.some((n) => nameMatches(v.Name, n))) return false;
    if (drivers.length && !drivers.some((d) => v.Driver.includes(d))) return false;
    if (wantDangling.length && !wantDangling.some((d) => d === !inUse(v.Name))) return false;
    if (!labels.every((l) => labelMatches(v.Labels, l))) return false;
    return true;
  });
}

/** POST /volumes/prune filters: label, label!, all (the caller reads `all`). */
export function pruneMatches(v: VolumeInfo, filters: Map<string, string[]>): boolean {
  const yes = filters.get('label') ?? [];
  const no = filters.get('label!') ?? [];
  if (!yes.every((l) => labelMatches(v.Labels, l))) return false;
  if (no.some((l) => labelMatches(v.Labels, l))) return false;
  return true;
}
