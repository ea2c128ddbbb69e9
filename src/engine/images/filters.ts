import { invalidParameter } from '../../common/errors.js';
import { parseGoDuration } from './dockerfile/go-text.js';

/**
 * A filter timestamp as dockerd reads it (timetypes.GetTimestamp): Unix seconds (fraction
 * allowed), an RFC 3339 date or date-time, or a Go duration before now. Milliseconds.
 */
export function parseTimestamp(value: string, now = Date.now()): number {
  if (/^\d+(\.\d+)?$/.test(value)) return Math.floor(Number(value) * 1000);
  if (/^\d+(\.\d+)?(ns|us|µs|ms|s|m|h)/.test(value)) {
    try {
      return now - parseGoDuration(value) / 1e6;
    } catch {
      // not a duration after all
    }
  }
  const ms = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00Z` : value);
  if (Number.isFinite(ms)) return ms;
  throw invalidParameter(`failed to parse value as time or duration: "${value}"`);
}

/**
 * The `dangling` filter as dockerd reads it: true when one of its values is true (or 1), else
 * false when one is false (or 0), `fallback` when it has none; anything else is a 400.
 */
export function danglingFilter(values: string[] | undefined, fallback: boolean): boolean {
  if (!values?.length) return fallback;
  if (values.some((v) => v === 'true' || v === '1')) return true;
  if (values.some((v) => v === 'false' || v === '0')) return false;
  throw invalidParameter(`invalid filter 'dangling=[${values.join(' ')}]'`);
}

/** A `label` filter value (`key` or `key=value`) against an image's labels. */
export function labelMatches(have: Record<string, string>, filter: string): boolean {
  const eq = filter.indexOf('=');
  return eq < 0 ? Object.hasOwn(have, filter) : have[filter.slice(0, eq)] === filter.slice(eq + 1);
}

/** A 400 for a filter key outside `known`, as dockerd's filters.Validate. */
export function checkFilterKeys(filters: Map<string, string[]>, known: readonly string[]): void {
  for (const key of filters.keys())
    if (!known.includes(key)) throw invalidParameter(`invalid filter '${key}'`);
}
