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
import { seal, unseal } from '../seal.js';
import type { StoredService } from '../services/service.types.js';
import { useKey, usesObject } from '../services/service-refs.js';
import type { ClusterStore, KeyValue } from '../store/cluster-store.js';
import { filterObjects } from './object-filters.js';
import { objectKeys } from './object-keys.js';
import type { ObjectKind, ObjectSpec, ObjectSpecInput, StoredObject, SwarmObject } from './secrets.types.js';
import { checkData, checkName, decodeBase64, rpcInvalid } from './validate.js';

/** What the objects need of the swarm: a manager's store and the cluster's DEK (or dockerd's 503). */
export interface ManagerAccess {
  managerAccess(): Promise<{ store: ClusterStore; dek: Buffer }>;
}

export interface ObjectServiceOptions {
  swarm: ManagerAccess;
  log: Logger;
  now?: () => Date;
}

/**
 * The secrets or the configs of the swarm, in etcd: `P/<kind>s/<id>` with the data sealed under
 * the DEK, and `P/names/<kind>s/<name>` claimed in the same transaction (create revision 0), so a
 * name is unique under races. Version.Index is the object key's mod revision.
 */
export class ObjectService {
  private readonly keys;
  private readonly now: () => Date;

  constructor(
    readonly kind: ObjectKind,
    private readonly opts: ObjectServiceOptions,
  ) {
    this.keys = objectKeys(kind);
    this.now = opts.now ?? (() => new Date());
  }

  async list(filters: Filters = new Map()): Promise<SwarmObject[]> {
    const { store, dek } = await this.opts.swarm.managerAccess();
    const all = await this.call(() => store.range(this.keys.all));
    return filterObjects(
      this.kind,
      all.kvs.map((kv) => this.view(kv, dek)),
      filters,
    );
  }

  /** By ID, then by name, then by ID prefix, as dockerd's getSecret/getConfig look it up. */
  async inspect(ref: string): Promise<SwarmObject> {
    const { store, dek } = await this.opts.swarm.managerAccess();
    return this.view(await this.find(store, ref), dek);
  }

  async create(input: ObjectSpecInput): Promise<string> {
    const { store, dek } = await this.opts.swarm.managerAccess();
    const name = input.Name ?? '';
    checkName(name);
    const data = decodeBase64(input.Data ?? '');
    if (this.kind === 'secret' && input.Driver?.Name) {
      // berth has no secret driver plugins; dockerd answers a missing plugin so (with 500)
      throw invalidParameter(`plugin ${JSON.stringify(input.Driver.Name)} not found`);
    }
    checkData(this.kind, data);
    const id = newSwarmId();
    const at = this.now().toISOString();
    const spec: Omit<ObjectSpec, 'Data'> = { Name: name, Labels: { ...(input.Labels ?? {}) } };
    if (input.Driver) spec.Driver = input.Driver;
    if (input.Templating) spec.Templating = input.Templating;
    const stored: StoredObject = {
      ID: id,
      CreatedAt: at,
      UpdatedAt: at,
      Spec: spec,
      _: { data: seal(dek, data.toString('base64')) },
    };
    const res = await this.call(() =>
      store.txn(
        [{ key: this.keys.name(name), target: 'create', op: 'equal', value: 0 }],
        [
          { put: { key: this.keys.object(id), value: JSON.stringify(stored) } },
          { put: { key: this.keys.name(name), value: id } },
        ],
      ),
    );
    if (!res.succeeded) {
      throw conflict(`rpc error: code = AlreadyExists desc = ${this.kind} ${name} already exists`);
    }
    return id;
  }

  /** Only Labels may change (Data only to the same bytes), by compare-and-swap on the version. */
  async update(ref: string, version: number, input: ObjectSpecInput): Promise<void> {
    const { store, dek } = await this.opts.swarm.managerAccess();
    const kv = await this.find(store, ref);
    const stored = JSON.parse(kv.value) as StoredObject;
    const sameData =
      input.Data === undefined ||
      input.Data === null ||
      decodeBase64(input.Data).equals(Buffer.from(unseal(dek, stored._.data), 'base64'));
    if ((input.Name ?? '') !== stored.Spec.Name || !sameData) {
      throw rpcInvalid('only updates to Labels are allowed');
    }
    const next: StoredObject = {
      ...stored,
      UpdatedAt: this.now().toISOString(),
      Spec: { ...stored.Spec, Labels: { ...(input.Labels ?? {}) } },
    };
    const res = await this.call(() =>
      store.txn(
        [{ key: kv.key, target: 'mod', op: 'equal', value: version }],
        [{ put: { key: kv.key, value: JSON.stringify(next) } }],
      ),
    );
    if (!res.succeeded) throw conflict('rpc error: code = Unknown desc = update out of sequence');
  }

  /**
   * Removes the object and its name; one that a service uses is refused with swarmkit's words
   * (`secret 's1' is in use by the following service: web`).
   */
  async remove(ref: string): Promise<void> {
    const { store } = await this.opts.swarm.managerAccess();
    for (let attempt = 0; ; attempt++) {
      const kv = await this.find(store, ref);
      const stored = JSON.parse(kv.value) as StoredObject;
      // the use key first: a service that comes to use the object after this read changes it
      const use = await this.call(() => store.get(useKey(this.kind, stored.ID)));
      const services = await this.call(() => store.range(keys.services));
      const users = services.kvs
        .map((s) => JSON.parse(s.value) as StoredService)
        .filter((s) => usesObject(s.Spec, this.kind, stored.ID))
        .map((s) => s.Spec.Name ?? '');
      if (users.length > 0) {
        throw rpcInvalid(
          `${this.kind} '${stored.Spec.Name}' is in use by the following service${users.length > 1 ? 's' : ''}: ${users.join(', ')}`,
        );
      }
      const res = await this.call(() =>
        store.txn(
          [
            { key: kv.key, target: 'mod', op: 'equal', value: kv.modRevision },
            { key: useKey(this.kind, stored.ID), target: 'mod', op: 'equal', value: use?.modRevision ?? 0 },
          ],
          [
            { delete: { key: kv.key } },
            { delete: { key: this.keys.name(stored.Spec.Name) } },
            { delete: { key: useKey(this.kind, stored.ID) } },
          ],
        ),
      );
      if (res.succeeded) return;
      // changed meanwhile (gone, updated, or taken into use): look again
      if (attempt >= 2)
        throw conflict(`rpc error: code = Aborted desc = ${this.kind} ${ref} changed, try again`);
    }
  }

  private async find(store: ClusterStore, ref: string): Promise<KeyValue> {
    if (ref !== '' && !ref.includes('/')) {
      const byId = await this.call(() => store.get(this.keys.object(ref)));
      if (byId) return byId;
      const named = await this.call(() => store.get(this.keys.name(ref)));
      const byName = named ? await this.call(() => store.get(this.keys.object(named.value))) : undefined;
      if (byName) return byName;
      const all = await this.call(() => store.range(this.keys.object(ref)));
      if (all.kvs.length > 1) {
        throw invalidParameter(`${this.kind} ${ref} is ambiguous (${all.kvs.length} matches found)`);
      }
      if (all.kvs[0]) return all.kvs[0];
    }
    throw notFound(`${this.kind} ${ref} not found`);
  }

  private view(kv: KeyValue, dek: Buffer): SwarmObject {
    const stored = JSON.parse(kv.value) as StoredObject;
    const spec: ObjectSpec = { Name: stored.Spec.Name, Labels: stored.Spec.Labels };
    // a secret's data never leaves the manager by this API; a config's does
    if (this.kind === 'config') spec.Data = unseal(dek, stored._.data);
    if (stored.Spec.Driver) spec.Driver = stored.Spec.Driver;
    if (stored.Spec.Templating) spec.Templating = stored.Spec.Templating;
    return {
      ID: stored.ID,
      Version: { Index: kv.modRevision },
      CreatedAt: stored.CreatedAt,
      UpdatedAt: stored.UpdatedAt,
      Spec: spec,
    };
  }

  /** A store that cannot answer is the swarm without a leader (dockerd's 503). */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BerthError) throw err;
      this.opts.log.warn(`cluster store call for ${this.kind}s failed`, { error: errorMessage(err) });
      throw unavailable(NO_LEADER);
    }
  }
}
