import { invalidParameter } from '../../../common/errors.js';
import { checkFilterNames, type Filters } from '../../../common/filters.js';
import type { SwarmNode } from '../swarm.types.js';

/**
 * GET /nodes?filters= as dockerd reads them: `id` (prefix), `name` (prefix of the hostname or the
 * spec name), `label` (engine labels), `node.label` (the node's own, `key`, `key=value` or
 * `key!=value`), `role` (manager|worker), `membership` (accepted|pending). Values of one filter
 * are alternatives; filters all hold.
 */

const NODE_FILTERS = ['id', 'name', 'label', 'node.label', 'role', 'membership'] as const;

function labelMatches(labels: Record<string, string> | undefined, expr: string): boolean {
  const neq = expr.indexOf('!=');
  if (neq > 0) {
    const key = expr.slice(0, neq);
    return labels?.[key] !== expr.slice(neq + 2);
  }
  const eq = expr.indexOf('=');
  if (eq < 0) return labels !== undefined && Object.hasOwn(labels, expr);
  const key = expr.slice(0, eq);
  return labels !== undefined && Object.hasOwn(labels, key) && labels[key] === expr.slice(eq + 1);
}

export function checkNodeFilters(filters: Filters): void {
  checkFilterNames(filters, NODE_FILTERS);
  for (const role of filters.get('role') ?? []) {
    if (role !== 'manager' && role !== 'worker')
      throw invalidParameter(`Invalid role filter value: "${role}"`);
  }
  for (const m of filters.get('membership') ?? []) {
    if (m !== 'accepted' && m !== 'pending')
      throw invalidParameter(`Invalid membership filter value: "${m}"`);
  }
}

export function filterNodes(nodes: SwarmNode[], filters: Filters): SwarmNode[] {
  checkNodeFilters(filters);
  const any = (name: string, test: (v: string) => boolean) => {
    const values = filters.get(name);
    return !values || values.some(test);
  };
  return nodes.filter(
    (n) =>
      any('id', (v) => n.ID.startsWith(v)) &&
      any('name', (v) => n.Description.Hostname.startsWith(v)) &&
      any('label', (v) => labelMatches(n.Description.Engine.Labels, v)) &&
      any('node.label', (v) => labelMatches(n.Spec.Labels, v)) &&
      any('role', (v) => n.Spec.Role === v) &&
      // every node berth knows was admitted (no manual acceptance): accepted
      any('membership', (v) => v === 'accepted'),
  );
}
