import { invalidParameter } from '../../../common/errors.js';
import type { Filters } from '../../../common/filters.js';
import type { ObjectKind, SwarmObject } from './secrets.types.js';

/**
 * GET /secrets and /configs ?filters= as dockerd reads them: `id` (prefix), `name` (prefix),
 * `names` (exact; secrets only, as in dockerd 20.10), `label` (`key` or `key=value`, all must hold).
 */

const ALLOWED: Record<ObjectKind, readonly string[]> = {
  secret: ['id', 'label', 'name', 'names'],
  config: ['id', 'label', 'name'],
};

function labelHolds(labels: Record<string, string>, expr: string): boolean {
  const eq = expr.indexOf('=');
  if (eq < 0) return Object.hasOwn(labels, expr);
  const key = expr.slice(0, eq);
  return Object.hasOwn(labels, key) && labels[key] === expr.slice(eq + 1);
}

export function checkObjectFilters(kind: ObjectKind, filters: Filters): void {
  // dockerd's swarm routes word it with a capital (filters.Validate), unlike its other lists
  for (const key of filters.keys()) {
    if (!ALLOWED[kind].includes(key)) throw invalidParameter(`Invalid filter '${key}'`);
  }
}

export function filterObjects(kind: ObjectKind, objects: SwarmObject[], filters: Filters): SwarmObject[] {
  checkObjectFilters(kind, filters);
  const any = (name: string, test: (v: string) => boolean) => {
    const values = filters.get(name);
    return !values || values.length === 0 || values.some(test);
  };
  const labels = filters.get('label') ?? [];
  return objects.filter(
    (o) =>
      any('id', (v) => o.ID.startsWith(v)) &&
      any('name', (v) => o.Spec.Name.startsWith(v)) &&
      any('names', (v) => o.Spec.Name === v) &&
      labels.every((l) => labelHolds(o.Spec.Labels, l)),
  );
}
