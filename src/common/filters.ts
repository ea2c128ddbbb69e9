import { invalidParameter } from './errors.js';

/** List filters as Docker's API carries them: a filter name to its values (filters.Args). */
export type Filters = Map<string, string[]>;

/** Refuse filter names the endpoint does not know, as dockerd does ("invalid filter 'x'"). */
export function checkFilterNames(filters: Filters, allowed: readonly string[]): void {
  for (const key of filters.keys()) {
    if (!allowed.includes(key)) throw invalidParameter(`invalid filter '${key}'`);
  }
}
