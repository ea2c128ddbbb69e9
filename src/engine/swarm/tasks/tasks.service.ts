import { BerthError, errorMessage, invalidParameter, notFound, unavailable } from '../../../common/errors.js';
import type { Filters } from '../../../common/filters.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import { NO_LEADER } from '../messages.js';
import type { ManagerAccess } from '../secrets/object.service.js';
import type { StoredService } from '../services/service.types.js';
import type { ClusterStore, KeyValue } from '../store/cluster-store.js';
import type { SwarmNode } from '../swarm.types.js';
import type { StoredTask, Task } from './task.types.js';
import { filterTasks, taskName } from './task-filters.js';

export interface TasksServiceOptions {
  swarm: ManagerAccess;
  log: Logger;
}

/**
 * The read side of the swarm's tasks (`P/tasks/<id>`, written by the orchestrator and the
 * agents' reports): GET /tasks and /tasks/{id} on a manager, as dockerd answers them.
 */
export class TasksService {
  constructor(private readonly opts: TasksServiceOptions) {}

  async list(filters: Filters = new Map()): Promise<Task[]> {
    const { store } = await this.opts.swarm.managerAccess();
    const resolved: Filters = new Map(filters);
    // dockerd looks each service and node up (ID, name, prefix) and filters by the IDs found
    const services = filters.get('service');
    if (services) resolved.set('service', await Promise.all(services.map((s) => this.serviceId(store, s))));
    const nodes = filters.get('node');
    if (nodes) resolved.set('node', await Promise.all(nodes.map((n) => this.nodeId(store, n))));
    const [tasks, all] = await Promise.all([
      this.call(() => store.range(keys.tasks)),
      this.call(() => store.range(keys.services)),
    ]);
    const byService = new Map(
      all.kvs.map((kv) => {
        const s = JSON.parse(kv.value) as StoredService;
        return [s.ID, s] as const;
      }),
    );
    const byTask = new Map(tasks.kvs.map((kv) => [JSON.parse(kv.value) as StoredTask, kv] as const));
    const kept = filterTasks([...byTask.keys()], resolved, {
      currentSpec: (id) => byService.get(id)?._?.specVersion,
      serviceLabels: (id) => byService.get(id)?.Spec.Labels,
    });
    return kept.map((t) => taskView(byTask.get(t) as KeyValue, t));
  }

  /** By ID, then by name, then by ID prefix (dockerd's getTask). */
  async inspect(ref: string): Promise<Task> {
    const { store } = await this.opts.swarm.managerAccess();
    if (ref !== '' && !ref.includes('/')) {
      const byId = await this.call(() => store.get(keys.task(ref)));
      if (byId) return taskView(byId, JSON.parse(byId.value) as StoredTask);
      const all = await this.call(() => store.range(keys.tasks));
      const parsed = all.kvs.map((kv) => [kv, JSON.parse(kv.value) as StoredTask] as const);
      const named = parsed.filter(([, t]) => taskName(t) === ref);
      const found = named.length > 0 ? named : parsed.filter(([, t]) => t.ID.startsWith(ref));
      if (found.length > 1)
        throw invalidParameter(`task ${ref} is ambiguous (${found.length} matches found)`);
      const [hit] = found;
      if (hit) return taskView(hit[0], hit[1]);
    }
    throw notFound(`task ${ref} not found`);
  }

  private async serviceId(store: ClusterStore, ref: string): Promise<string> {
    if (ref !== '' && !ref.includes('/')) {
      if (await this.call(() => store.get(keys.service(ref)))) return ref;
      const named = await this.call(() => store.get(keys.name('services', ref)));
      if (named) return named.value;
      const all = await this.call(() => store.range(keys.service(ref)));
      if (all.kvs.length > 1)
        throw invalidParameter(`service ${ref} is ambiguous (${all.kvs.length} matches found)`);
      const [one] = all.kvs;
      if (one) return (JSON.parse(one.value) as StoredService).ID;
    }
    throw notFound(`service ${ref} not found`);
  }

  private async nodeId(store: ClusterStore, ref: string): Promise<string> {
    const all = await this.call(() => store.range(keys.nodes));
    const nodes = all.kvs.map((kv) => JSON.parse(kv.value) as SwarmNode);
    const exact = nodes.find((n) => n.ID === ref);
    if (exact) return exact.ID;
    const named = nodes.filter((n) => (n.Spec?.Name || n.Description?.Hostname) === ref);
    const found = named.length > 0 ? named : nodes.filter((n) => ref !== '' && n.ID.startsWith(ref));
    if (found.length > 1) throw invalidParameter(`node ${ref} is ambiguous (${found.length} matches found)`);
    if (found[0]) return found[0].ID;
    throw notFound(`node ${ref} not found`);
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BerthError) throw err;
      this.opts.log.warn('cluster store call for tasks failed', { error: errorMessage(err) });
      throw unavailable(NO_LEADER);
    }
  }
}

/** The task as the API shows it: Version from the key, private fields left out. */
export function taskView(kv: KeyValue, t: StoredTask): Task {
  const { _: _private, ID, ...rest } = t;
  return { ID, Version: { Index: kv.modRevision }, ...rest };
}
