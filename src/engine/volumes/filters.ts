import { invalidParameter } from '../../common/errors.js';
import { compileGoRegExp } from '../../common/go-regexp.js';
import type { VolumeInfo } from './volumes.types.js';

export const LIST_FILTERS = ['name', 'dangling', 'driver', 'label'] as const;
/** Prune filters; `all` only from API 1.42 (the caller says whether it is known). */
export const PRUNE_FILTERS = ['label', 'label!'] as const;

/** dockerd 20.10's volume filter error: `Invalid filter 'name'`, or `'name=[v1 v2]'` for values. */
export function invalidFilter(name: string, values?: string[]): Error {
  return invalidParameter(`Invalid filter '${name}${values ? `=[${values.join(' ')}]` : ''}'`);
}

/** Refuse filter names not in `allowed` (dockerd's filters.Validate). */
export function checkFilters(filters: Map<string, string[]>, allowed: readonly string[]): void {
  for (const key of filters.keys()) {
    if (!allowed.includes(key)) throw invalidFilter(key);
  }
}

/**
 * dockerd's `Match`: a value equal to the name, or a regular expression found in it; a value that
 * is not a valid expression matches only exactly.
 */
function nameMatches(name: string, pattern: string): boolean {
  if (name === pattern) return true;
  try {
    return compileGoRegExp(pattern).test(name);
  } catch {
    return false;
  }
}

/** `key` or `key=value` against a label map. */
export function labelMatches(labels: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return Object.hasOwn(labels, filter);
  const key = filter.slice(0, i);
  return Object.hasOwn(labels, key) && labels[key] === filter.slice(i + 1);
}

/**
 * The `dangling` filter as dockerd reads it: `true`/`1` among the values wins, else `false`/`0`;
 * neither is `Invalid filter 'dangling=[values]'`. Undefined without the filter.
 */
function danglingFilter(values: string[] | undefined): boolean | undefined {
  if (values === undefined) return undefined;
  if (values.includes('true') || values.includes('1')) return true;
  if (values.includes('false') || values.includes('0')) return false;
  throw invalidFilter('dangling', values);
}

/**
 * GET /volumes filters: name (exact or regular expression), driver (exact), label (all must
 * match), dangling.
 */
export function filterVolumes(
  volumes: VolumeInfo[],
  filters: Map<string, string[]>,
  inUse: (name: string) => boolean,
): VolumeInfo[] {
  checkFilters(filters, LIST_FILTERS);
  const dangling = danglingFilter(filters.get('dangling'));
  const names = filters.get('name') ?? [];
  const drivers = filters.get('driver') ?? [];
  const labels = filters.get('label') ?? [];
  return volumes.filter((v) => {
    if (names.length && !names.some((n) => nameMatches(v.Name, n))) return false;
    if (drivers.length && !drivers.includes(v.Driver)) return false;
    if (dangling !== undefined && dangling === inUse(v.Name)) return false;
    if (!labels.every((l) => labelMatches(v.Labels, l))) return false;
    return true;
  });
}

/**
 * POST /volumes/prune filters: `label`, `label!`, and `all` when `allFilter` (API 1.42+;
 * before, it is `Invalid filter 'all'` as dockerd 20.10). Answers whether named volumes go too
 * (`all`, or `allNamed` without it).
 */
export function pruneScope(
  filters: Map<string, string[]>,
  o: { allNamed: boolean; allFilter: boolean },
): boolean {
  checkFilters(filters, o.allFilter ? [...PRUNE_FILTERS, 'all'] : PRUNE_FILTERS);
  let all = o.allNamed;
  for (const v of filters.get('all') ?? []) {
    if (v === 'true' || v === '1') all = true;
    else if (v === 'false' || v === '0') all = false;
    else throw invalidParameter(`invalid filter 'all=${v}'`);
  }
  return all;
}

/**
 * POST /volumes/prune label filters: every `label` matches, and not every `label!` does (dockerd
 * keeps a volume only when it matches the whole `label!` list).
 */
export function pruneMatches(v: VolumeInfo, filters: Map<string, string[]>): boolean {
  const yes = filters.get('label') ?? [];
  const no = filters.get('label!') ?? [];
  if (!yes.every((l) => labelMatches(v.Labels, l))) return false;
  if (no.length > 0 && no.every((l) => labelMatches(v.Labels, l))) return false;
  return true;
}
