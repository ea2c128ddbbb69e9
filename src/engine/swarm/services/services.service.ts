import {
  BerthError,
  conflict,
  errorMessage,
  invalidParameter,
  notFound,
  unavailable,
} from '../../../common/errors.js';
import type { Filters } from '../../../common/filters.js';
import type { Logger } from '../../../common/log.js';
import { newSwarmId } from '../ca/tokens.js';
import { keys } from '../keys.js';
import { NO_LEADER } from '../messages.js';
import type { ManagerAccess } from '../secrets/object.service.js';
import type { ClusterStore, KeyValue, TxnOp } from '../store/cluster-store.js';
import type { Version } from '../swarm.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { Service, ServiceSpec, ServiceStatus, StoredService } from './service.types.js';
import { filterServices } from './service-filters.js';
import { checkPortConflicts, planPorts, portKeys } from './service-ports.js';
import {
  checkObjectsExist,
  type LocalNetworks,
  resolveNetworks,
  resolveObjectNames,
} from './service-refs.js';
import { modeOf, normalizeServiceSpec, replacesTasks, withDefaults } from './service-spec.js';
import { validateServiceSpec } from './service-validate.js';

export interface ServicesServiceOptions {
  swarm: ManagerAccess;
  /** The engine's local networks (a service may not use them: dockerd's 403). */
  networks?: LocalNetworks;
  log: Logger;
  now?: () => Date;
}

export interface UpdateOptions {
  /** `rollback=previous`: back to PreviousSpec. */
  rollback?: boolean;
  /** X-Registry-Auth of the request, kept for the agents (base64 JSON). */
  registryAuth?: string;
}

export const OUT_OF_SEQUENCE = 'rpc error: code = Unknown desc = update out of sequence';

/**
 * The swarm's services in etcd (`P/services/<id>`, docs/swarm.md): create, list, inspect, update
 * and remove, as a manager's API answers them. Writes are etcd txns by the manager that received
 * them: the name's claim (`P/names/services/<name>`, create revision 0) and the ingress ports'
 * claims go in the object's own txn; an update compares the object's mod revision with the
 * version given. The orchestrator reacts to these writes through its watch; tasks are its.
 */
export class ServicesService {
  private readonly now: () => Date;

  constructor(private readonly opts: ServicesServiceOptions) {
    this.now = opts.now ?? (() => new Date());
  }

  async list(filters: Filters = new Map(), withStatus = false): Promise<Service[]> {
    const { store } = await this.opts.swarm.managerAccess();
    const all = await this.call(() => store.range(keys.services));
    const stored = all.kvs.map((kv) => ({ kv, svc: JSON.parse(kv.value) as StoredService }));
    const kept = new Set(
      filterServices(
        stored.map((s) => s.svc),
        filters,
      ),
    );
    const statuses = withStatus ? await this.statuses(store) : undefined;
    return stored
      .filter((s) => kept.has(s.svc))
      .map((s) =>
        this.view(s.kv, s.svc, statuses ? statusOf(s.svc, statuses.get(s.svc.ID) ?? []) : undefined),
      );
  }

  /** By ID, then by name, then by ID prefix, as dockerd's getService looks a service up. */
  async inspect(ref: string, insertDefaults = false): Promise<Service> {
    const { store } = await this.opts.swarm.managerAccess();
    const kv = await this.find(store, ref);
    const svc = JSON.parse(kv.value) as StoredService;
    const view = this.view(kv, svc);
    if (insertDefaults) view.Spec = withDefaults(view.Spec);
    return view;
  }

  async create(
    input: ServiceSpec,
    registryAuth?: string,
  ): Promise<{ ID: string; Warnings: string[] | null }> {
    const { store } = await this.opts.swarm.managerAccess();
    const spec = await this.prepare(store, input);
    const id = newSwarmId();
    for (let attempt = 0; ; attempt++) {
      const { services, claimed } = await this.snapshot(store);
      checkPortConflicts(spec, services);
      const refs = await this.call(() => checkObjectsExist(store, spec));
      const plan = planPorts(id, spec, claimed, [], nameLookup(services));
      const at = this.now().toISOString();
      const stored: StoredService = {
        ID: id,
        CreatedAt: at,
        UpdatedAt: at,
        Spec: spec,
        Endpoint: endpointOf(spec, plan.ports),
        _: { specVersion: 1, ...(registryAuth ? { registryAuth } : {}) },
      };
      if (spec.Mode?.ReplicatedJob || spec.Mode?.GlobalJob) {
        // the first iteration is index 0, which dockerd shows as `{}` (omitempty)
        stored.JobStatus = { JobIteration: {} as Version, LastExecution: at };
      }
      const name = spec.Name ?? '';
      const res = await this.call(() =>
        store.txn(
          [
            { key: keys.name('services', name), target: 'create', op: 'equal', value: 0 },
            ...plan.compares,
            ...refs.compares,
          ],
          [
            { put: { key: keys.service(id), value: JSON.stringify(stored) } },
            { put: { key: keys.name('services', name), value: id } },
            ...plan.ops,
            ...refs.ops,
          ],
        ),
      );
      if (res.succeeded) return { ID: id, Warnings: null };
      if (await this.call(() => store.get(keys.name('services', name)))) {
        throw conflict(
          `rpc error: code = AlreadyExists desc = name conflicts with an existing object: service ${name} already exists`,
        );
      }
      // a port or a secret changed under us: look again (a second loss is reported as it stands)
      if (attempt >= 2)
        throw conflict('rpc error: code = Aborted desc = the service could not be created, try again');
    }
  }

  async update(ref: string, version: number, input: ServiceSpec, opts: UpdateOptions = {}): Promise<void> {
    const { store } = await this.opts.swarm.managerAccess();
    // dockerd looks the service up first (404), then converts and checks the body, even for a
    // rollback
    await this.find(store, ref);
    const spec = await this.prepare(store, input);
    for (let attempt = 0; ; attempt++) {
      const kv = await this.find(store, ref);
      if (kv.modRevision !== version) throw conflict(OUT_OF_SEQUENCE);
      const cur = JSON.parse(kv.value) as StoredService;
      const at = this.now().toISOString();
      const next: StoredService = { ...cur, UpdatedAt: at, _: { ...cur._ } };
      if (opts.rollback) {
        if (!cur.PreviousSpec) {
          throw invalidParameter(
            `rpc error: code = FailedPrecondition desc = service ${cur.ID} does not have a previous spec`,
          );
        }
        const back: ServiceSpec = structuredClone(cur.PreviousSpec);
        // swarmkit keeps the current ForceUpdate so that a rollback is not undone by it
        if (back.TaskTemplate) back.TaskTemplate.ForceUpdate = cur.Spec.TaskTemplate?.ForceUpdate ?? 0;
        next.Spec = back;
        next.PreviousSpec = cur.Spec;
        next.UpdateStatus = {
          State: 'rollback_started',
          StartedAt: at,
          Message: 'manually requested rollback',
        };
      } else {
        if (spec.Name !== cur.Spec.Name) {
          throw invalidParameter('rpc error: code = Unimplemented desc = renaming services is not supported');
        }
        if (modeOf(spec) !== modeOf(cur.Spec)) {
          throw invalidParameter('rpc error: code = Unimplemented desc = service mode change is not allowed');
        }
        next.Spec = spec;
        next.PreviousSpec = cur.Spec;
        // swarmkit resets the update status; the orchestrator sets it as it rolls the tasks
        delete next.UpdateStatus;
      }
      if (replacesTasks(cur.Spec, next.Spec)) next._.specVersion = cur._.specVersion + 1;
      if (opts.registryAuth) next._.registryAuth = opts.registryAuth;
      if (next.JobStatus) {
        // any change to a job runs it again: a new iteration
        next.JobStatus = { JobIteration: { Index: kv.modRevision }, LastExecution: at };
      }
      const { services, claimed } = await this.snapshot(store);
      const others = services.filter((s) => s.ID !== cur.ID);
      checkPortConflicts(next.Spec, others);
      const refs = await this.call(() => checkObjectsExist(store, next.Spec));
      const plan = planPorts(cur.ID, next.Spec, claimed, cur.Endpoint?.Ports, nameLookup(services));
      next.Endpoint = {
        ...endpointOf(next.Spec, plan.ports),
        ...(cur.Endpoint?.VirtualIPs ? { VirtualIPs: cur.Endpoint.VirtualIPs } : {}),
      };
      const res = await this.call(() =>
        store.txn(
          [{ key: kv.key, target: 'mod', op: 'equal', value: version }, ...plan.compares, ...refs.compares],
          [{ put: { key: kv.key, value: JSON.stringify(next) } }, ...plan.ops, ...refs.ops],
        ),
      );
      if (res.succeeded) return;
      const now = await this.call(() => store.get(kv.key));
      if (!now) throw notFound(`service ${ref} not found`);
      if (now.modRevision !== version) throw conflict(OUT_OF_SEQUENCE);
      if (attempt >= 2) throw conflict(OUT_OF_SEQUENCE);
    }
  }

  /** Deletes the service, its name and its port claims; the orchestrator's reaper removes its tasks. */
  async remove(ref: string): Promise<void> {
    const { store } = await this.opts.swarm.managerAccess();
    for (let attempt = 0; ; attempt++) {
      const kv = await this.find(store, ref);
      const svc = JSON.parse(kv.value) as StoredService;
      const claims = await this.call(() => store.range(portKeys.all));
      const ops: TxnOp[] = claims.kvs
        .filter((c) => c.value === svc.ID)
        .map((c) => ({ delete: { key: c.key } }) as TxnOp);
      const res = await this.call(() =>
        store.txn(
          [{ key: kv.key, target: 'mod', op: 'equal', value: kv.modRevision }],
          [
            { delete: { key: kv.key } },
            { delete: { key: keys.name('services', svc.Spec.Name ?? '') } },
            ...ops,
          ],
        ),
      );
      if (res.succeeded) return;
      if (attempt >= 2) throw conflict(OUT_OF_SEQUENCE);
    }
  }

  /** Normalizes and checks a request's spec, resolving its networks and object names. */
  private async prepare(store: ClusterStore, input: ServiceSpec): Promise<ServiceSpec> {
    const spec = normalizeServiceSpec(input);
    await this.call(() => resolveNetworks(store, this.opts.networks, spec));
    await this.call(() => resolveObjectNames(store, spec));
    validateServiceSpec(spec);
    return spec;
  }

  private async snapshot(
    store: ClusterStore,
  ): Promise<{ services: StoredService[]; claimed: Map<string, string> }> {
    const [services, ports] = await Promise.all([
      this.call(() => store.range(keys.services)),
      this.call(() => store.range(portKeys.all)),
    ]);
    return {
      services: services.kvs.map((kv) => JSON.parse(kv.value) as StoredService),
      claimed: new Map(ports.kvs.map((kv) => [kv.key.slice(portKeys.all.length), kv.value])),
    };
  }

  private async statuses(store: ClusterStore): Promise<Map<string, StoredTask[]>> {
    const tasks = await this.call(() => store.range(keys.tasks));
    const by = new Map<string, StoredTask[]>();
    for (const kv of tasks.kvs) {
      const t = JSON.parse(kv.value) as StoredTask;
      const list = by.get(t.ServiceID) ?? [];
      list.push(t);
      by.set(t.ServiceID, list);
    }
    return by;
  }

  private async find(store: ClusterStore, ref: string): Promise<KeyValue> {
    if (ref !== '' && !ref.includes('/')) {
      const byId = await this.call(() => store.get(keys.service(ref)));
      if (byId) return byId;
      const named = await this.call(() => store.get(keys.name('services', ref)));
      const byName = named ? await this.call(() => store.get(keys.service(named.value))) : undefined;
      if (byName) return byName;
      const all = await this.call(() => store.range(keys.service(ref)));
      if (all.kvs.length > 1)
        throw invalidParameter(`service ${ref} is ambiguous (${all.kvs.length} matches found)`);
      if (all.kvs[0]) return all.kvs[0];
    }
    throw notFound(`service ${ref} not found`);
  }

  private view(kv: KeyValue, svc: StoredService, status?: ServiceStatus): Service {
    const out: Service = {
      ID: svc.ID,
      Version: { Index: kv.modRevision },
      CreatedAt: svc.CreatedAt,
      UpdatedAt: svc.UpdatedAt,
      Spec: svc.Spec,
      Endpoint: svc.Endpoint,
    };
    if (svc.PreviousSpec) out.PreviousSpec = svc.PreviousSpec;
    // Endpoint after PreviousSpec, as dockerd orders them
    const { Endpoint, ...head } = out;
    const ordered: Service = { ...head, Endpoint } as Service;
    if (svc.UpdateStatus) ordered.UpdateStatus = svc.UpdateStatus;
    if (status) ordered.ServiceStatus = status;
    if (svc.JobStatus) ordered.JobStatus = svc.JobStatus;
    return ordered;
  }

  /** A store that cannot answer is the swarm without a leader (dockerd's 503). */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BerthError) throw err;
      this.opts.log.warn('cluster store call for services failed', { error: errorMessage(err) });
      throw unavailable(NO_LEADER);
    }
  }
}

function nameLookup(services: StoredService[]): (id: string) => string {
  const names = new Map(services.map((s) => [s.ID, s.Spec.Name ?? '']));
  return (id) => names.get(id) ?? '';
}

/** Endpoint as swarmkit's allocator shows it: the spec (`{}` when none) and the assigned ports. */
function endpointOf(
  spec: ServiceSpec,
  ports: StoredService['Endpoint']['Ports'] & object,
): StoredService['Endpoint'] {
  const out: StoredService['Endpoint'] = { Spec: spec.EndpointSpec ?? {} };
  if (ports.length > 0) out.Ports = ports;
  return out;
}

/**
 * ServiceStatus as swarmkit's ListServiceStatuses counts it: running tasks, completed tasks, and
 * the desired count (replicas; for global services the tasks meant to run; for jobs what the
 * current iteration still needs, at most MaxConcurrent).
 */
export function statusOf(svc: StoredService, tasks: StoredTask[]): ServiceStatus {
  const iteration = svc.JobStatus?.JobIteration?.Index ?? 0;
  const current = svc.JobStatus ? tasks.filter((t) => (t.JobIteration?.Index ?? 0) === iteration) : tasks;
  const running = current.filter((t) => t.Status?.State === 'running').length;
  const completed = current.filter((t) => t.Status?.State === 'complete').length;
  let desired = 0;
  const mode = svc.Spec.Mode ?? {};
  if (mode.Replicated) desired = mode.Replicated.Replicas ?? 1;
  else if (mode.Global) desired = current.filter((t) => t.DesiredState === 'running').length;
  else if (mode.ReplicatedJob) {
    const total = mode.ReplicatedJob.TotalCompletions ?? 1;
    desired = Math.max(0, Math.min(mode.ReplicatedJob.MaxConcurrent ?? 1, total - completed));
  } else if (mode.GlobalJob) desired = current.filter((t) => t.DesiredState === 'complete').length;
  return { RunningTasks: running, DesiredTasks: desired, CompletedTasks: completed };
}
