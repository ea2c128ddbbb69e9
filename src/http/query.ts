import { invalidParameter } from '../common/errors.js';
import type { Filters } from '../common/filters.js';

/**
 * A boolean query value as dockerd reads it (httputils.BoolValue): trimmed and lowercased, "",
 * "0", "no", "false" and "none" are false and anything else is true; `fallback` when the
 * parameter is absent.
 */
export function parseBool(value: string | null | undefined, fallback = false): boolean {
  if (value === null || value === undefined) return fallback;
  const s = value.trim().toLowerCase();
  return !(s === '' || s === '0' || s === 'no' || s === 'false' || s === 'none');
}

export function parseIntParam(
  value: string | null | undefined,
  name: string,
  fallback: number | undefined = undefined,
): number | undefined {
  if (value === null || value === undefined || value === '') return fallback;
  if (!/^-?\d+$/.test(value)) {
    throw invalidParameter(
      `invalid value ${JSON.stringify(value)} for query parameter ${name}: not an integer`,
    );
  }
  const n = Number(value);
  // beyond 2^53 a number is not that integer any more (and a wait of that many seconds is for ever)
  if (!Number.isSafeInteger(n)) {
    throw invalidParameter(
      `invalid value ${JSON.stringify(value)} for query parameter ${name}: value out of range`,
    );
  }
  return n;
}

/**
 * Parse the `filters` query parameter: dockerd's map of values to booleans
 * ({"status":{"running":true}}) or the older map of arrays ({"status":["running"]}). As dockerd's
 * matchers do, the values count whatever their booleans say, and a name with no values filters
 * nothing (it is left out).
 */
export function parseFilters(raw: string | null | undefined): Filters {
  const filters: Filters = new Map();
  if (!raw) return filters;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw invalidParameter(`invalid filter: not a JSON object: ${raw.slice(0, 100)}`);
  }
  if (parsed === null) return filters;
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw invalidParameter('invalid filter: expected a JSON object');
  }
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    let values: unknown[];
    if (Array.isArray(value)) values = value;
    else if (value && typeof value === 'object') values = Object.keys(value);
    else if (value === null) continue;
    else throw invalidParameter(`invalid filter ${JSON.stringify(key)}: expected an array of strings`);
    if (!values.every((v) => typeof v === 'string')) {
      throw invalidParameter(`invalid filter ${JSON.stringify(key)}: expected an array of strings`);
    }
    if (values.length) filters.set(key, values as string[]);
  }
  return filters;
}
