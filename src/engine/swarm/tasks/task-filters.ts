import { invalidParameter } from '../../../common/errors.js';
import type { Filters } from '../../../common/filters.js';
import { labelHolds } from '../services/service-filters.js';
import type { StoredTask } from './task.types.js';

/**
 * GET /tasks?filters= as dockerd 20.10 reads them: `id` and `name` by prefix (a task's name is
 * `<service>.<slot>.<id>`, or `<service>.<node id>.<id>` for global services, as swarmkit's
 * naming.Task), `service` and `node` (IDs: the routes resolve names and prefixes first), `label`,
 * `desired-state` (running, shutdown, accepted), `runtime`, and the CLI's private
 * `_up-to-date`: tasks made from their service's current spec.
 */

const ALLOWED = ['_up-to-date', 'desired-state', 'id', 'label', 'name', 'node', 'runtime', 'service'];
const DESIRED = ['running', 'shutdown', 'accepted'];

/** A task's name as swarmkit's naming.Task gives it. */
export function taskName(t: StoredTask): string {
  if (t.Name) return t.Name;
  const slot = t.Slot ? String(t.Slot) : (t.NodeID ?? '');
  return `${t._?.serviceName ?? ''}.${slot}.${t.ID}`;
}

export function checkTaskFilters(filters: Filters): void {
  for (const key of filters.keys()) {
    if (!ALLOWED.includes(key)) throw invalidParameter(`Invalid filter '${key}'`);
  }
  for (const v of filters.get('desired-state') ?? []) {
    if (!DESIRED.includes(v)) throw invalidParameter(`Invalid desired-state filter: '${v}'`);
  }
}

/** What the filters need to know of a task's service. */
export interface TaskServiceLookup {
  /** The service's `_.specVersion` (for `_up-to-date`; a task whose service is gone is never up to date). */
  currentSpec(serviceId: string): number | undefined;
  /**
   * The service's labels: swarmkit's `label` filter matches a task's ServiceAnnotations.Labels
   * (what `docker stack ps` lists tasks by), not the task's own.
   */
  serviceLabels(serviceId: string): Record<string, string> | undefined;
}

/** The tasks that pass. */
export function filterTasks(tasks: StoredTask[], filters: Filters, lookup: TaskServiceLookup): StoredTask[] {
  checkTaskFilters(filters);
  const any = (name: string, test: (v: string) => boolean) => {
    const values = filters.get(name);
    return !values || values.length === 0 || values.some(test);
  };
  const labels = filters.get('label') ?? [];
  const upToDate = (filters.get('_up-to-date') ?? []).length > 0;
  return tasks.filter(
    (t) =>
      any('id', (v) => t.ID.startsWith(v)) &&
      any('name', (v) => taskName(t).startsWith(v)) &&
      any('service', (v) => t.ServiceID === v) &&
      any('node', (v) => t.NodeID === v) &&
      any('desired-state', (v) => t.DesiredState === v) &&
      any('runtime', (v) => v === (t.Spec?.NetworkAttachmentSpec ? 'attachment' : 'container')) &&
      labels.every((l) => labelHolds(lookup.serviceLabels(t.ServiceID) ?? {}, l)) &&
      (!upToDate || lookup.currentSpec(t.ServiceID) === t._?.specVersion),
  );
}
