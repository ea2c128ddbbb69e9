import { invalidParameter } from '../common/errors.js';

/** Docker's boolean query values: 1/true/True are true, 0/false/False/empty are false. */
export function parseBool(value: string | null | undefined, name: string, fallback = false): boolean {
  if (value === null || value === undefined) return fallback;
  switch (value) {
    case '1':
    case 'true':
    case 'True':
      return true;
    case '':
    case '0':
    case 'false':
    case 'False':
      return false;
    default:
      throw invalidParameter(`invalid boolean value ${JSON.stringify(value)} for query parameter ${name}`);
  }
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
  return Number(value);
}

/** Filters as Docker sends them: a JSON map of name to values. */
export type Filters = Map<string, string[]>;

/**
 * Parse the `filters` query parameter. Accepts the map-of-arrays form ({"status":["running"]}) and
 * the legacy map-of-bools form ({"status":{"running":true}}).
 */
export function parseFilters(raw: string | null | undefined): Filters {
  const filters: Filters = new Map();
  if (!raw) return filters;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw invalidParameter(`invalid filter: ${(err as Error).message}`);
  }
  if (parsed === null) return filters;
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw invalidParameter('invalid filter: expected a JSON object');
  }
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (Array.isArray(value)) {
      filters.set(
        key,
        value.map((v) => String(v)),
      );
    } else if (value && typeof value === 'object') {
      const values = Object.entries(value as Record<string, unknown>)
        .filter(([, on]) => on === true)
        .map(([v]) => v);
      filters.set(key, values);
    } else {
      throw invalidParameter(`invalid filter ${JSON.stringify(key)}: expected an array of strings`);
    }
  }
  return filters;
}

/** Refuse filter names the endpoint does not know, as dockerd does ("invalid filter 'x'"). */
export function checkFilterNames(filters: Filters, allowed: readonly string[]): void {
  for (const key of filters.keys()) {
    if (!allowed.includes(key)) throw invalidParameter(`invalid filter '${key}'`);
  }
}
