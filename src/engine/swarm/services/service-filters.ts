import { invalidParameter } from '../../../common/errors.js';
import type { Filters } from '../../../common/filters.js';
import type { StoredService } from './service.types.js';
import { modeOf } from './service-spec.js';

/**
 * GET /services?filters= as dockerd 20.10 reads them: `id` and `name` by prefix (docker-py lists
 * `name=dockerpytest_`), `label` (`key` or `key=value`, all must hold), `mode` (replicated,
 * global, replicated-job, global-job; another value matches nothing). Values of one filter: any.
 */

const ALLOWED = ['id', 'label', 'mode', 'name'];

/** `key` or `key=value` against labels (swarmkit's filterMatchLabels). */
export function labelHolds(labels: Record<string, string> | undefined, expr: string): boolean {
  const eq = expr.indexOf('=');
  const all = labels ?? {};
  if (eq < 0) return Object.hasOwn(all, expr);
  const key = expr.slice(0, eq);
  return Object.hasOwn(all, key) && all[key] === expr.slice(eq + 1);
}

export function filterServices(services: StoredService[], filters: Filters): StoredService[] {
  for (const key of filters.keys()) {
    if (!ALLOWED.includes(key)) throw invalidParameter(`Invalid filter '${key}'`);
  }
  const any = (name: string, test: (v: string) => boolean) => {
    const values = filters.get(name);
    return !values || values.length === 0 || values.some(test);
  };
  const labels = filters.get('label') ?? [];
  return services.filter(
    (s) =>
      any('id', (v) => s.ID.startsWith(v)) &&
      any('name', (v) => (s.Spec.Name ?? '').startsWith(v)) &&
      any('mode', (v) => modeOf(s.Spec) === v) &&
      labels.every((l) => labelHolds(s.Spec.Labels, l)),
  );
}
