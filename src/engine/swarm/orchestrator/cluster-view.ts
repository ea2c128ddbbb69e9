import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys, PREFIX } from '../keys.js';
import type { IpamOwner, StoredSwarmNetwork } from '../networks/network.types.js';
import { networkKeys } from '../networks/network-keys.js';
import type { StoredService } from '../services/service.types.js';
import type { ClusterStore, KeyValue, Watch, WatchEvent } from '../store/cluster-store.js';
import type { SwarmNode } from '../swarm.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { Clock } from './clock.js';

/** A Node as `P/nodes/<id>` holds it (its state comes from the liveness key, not from here). */
export type StoredNode = Omit<SwarmNode, 'Version' | 'ManagerStatus'>;

export interface Versioned<T> {
  value: T;
  modRevision: number;
}

/** What one reconcile pass reads: the cluster as the leader last saw it. */
export interface ClusterSnapshot {
  services: ReadonlyMap<string, Versioned<StoredService>>;
  tasks: ReadonlyMap<string, Versioned<StoredTask>>;
  nodes: ReadonlyMap<string, Versioned<StoredNode>>;
  /** Swarm networks (`P/networks/<id>`). */
  networks: ReadonlyMap<string, Versioned<StoredSwarmNetwork>>;
  /** Address claims, by `<networkID>/<ip>` (`P/ipam/<networkID>/<ip>`). */
  ipam: ReadonlyMap<string, Versioned<IpamOwner>>;
  /** Nodes whose liveness key exists. */
  live: ReadonlySet<string>;
  /** When each node without a liveness key was first seen without it (ms). */
  downSince: ReadonlyMap<string, number>;
  /** The swarm's TaskHistoryRetentionLimit (5 when unset). */
  taskHistoryLimit: number;
}

const DEFAULT_TASK_HISTORY = 5;

/**
 * The leader's copy of the cluster: one range of `P/`, then one watch from the revision after it.
 * Every event (and every write of the leader's own, applied at once through `applyWrite`) updates
 * it; an older event never replaces a newer value. A watch that ends is started again.
 */
export class ClusterView implements ClusterSnapshot {
  readonly services = new Map<string, Versioned<StoredService>>();
  readonly tasks = new Map<string, Versioned<StoredTask>>();
  readonly nodes = new Map<string, Versioned<StoredNode>>();
  readonly networks = new Map<string, Versioned<StoredSwarmNetwork>>();
  readonly ipam = new Map<string, Versioned<IpamOwner>>();
  readonly live = new Set<string>();
  readonly downSince = new Map<string, number>();
  taskHistoryLimit = DEFAULT_TASK_HISTORY;
  private watch?: Watch;
  private stopped = false;
  /**
   * The delete revision of keys deleted ahead of the watch (the leader's own deletes), so that an
   * older put still on its way does not bring them back; dropped once the watch has passed them.
   */
  private readonly tombstones = new Map<string, number>();

  constructor(
    private readonly store: ClusterStore,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly onChange: () => void,
  ) {}

  async start(): Promise<void> {
    this.stopped = false;
    const all = await this.store.range(`${PREFIX}/`);
    this.services.clear();
    this.tasks.clear();
    this.nodes.clear();
    this.networks.clear();
    this.ipam.clear();
    this.live.clear();
    this.tombstones.clear();
    for (const kv of all.kvs) this.put(kv);
    const now = this.clock.now();
    for (const id of this.nodes.keys())
      if (!this.live.has(id) && !this.downSince.has(id)) this.downSince.set(id, now);
    this.watch = this.store.watch(`${PREFIX}/`, all.revision + 1, {
      onEvents: (events, revision) => {
        let changed = false;
        for (const e of events) changed = this.apply(e) || changed;
        // the watch has passed these deletions: no older put of those keys can come any more
        for (const [key, rev] of this.tombstones) if (rev <= revision) this.tombstones.delete(key);
        if (changed) this.onChange();
      },
      onError: (err) => {
        if (this.stopped) return;
        this.log.debug('the orchestrator watch ended; reading the cluster again', {
          error: errorMessage(err),
        });
        this.clock.after(500, () => {
          if (!this.stopped) void this.start().then(this.onChange, () => {});
        });
      },
    });
  }

  stop(): void {
    this.stopped = true;
    this.watch?.close();
    this.watch = undefined;
  }

  /** A write of the leader's own, applied before its watch event arrives. */
  applyWrite(key: string, value: string | undefined, revision: number): void {
    if (value === undefined) this.remove(key, revision);
    else this.put({ key, value, createRevision: revision, modRevision: revision, version: 1, lease: '0' });
  }

  private apply(e: WatchEvent): boolean {
    if (e.type === 'delete') return this.remove(e.kv.key, e.kv.modRevision);
    return this.put(e.kv);
  }

  private put(kv: KeyValue): boolean {
    const dead = this.tombstones.get(kv.key);
    if (dead !== undefined && dead >= kv.modRevision) return false;
    const { key } = kv;
    if (key.startsWith(keys.lives)) {
      const id = key.slice(keys.lives.length);
      this.downSince.delete(id);
      if (this.live.has(id)) return false;
      this.live.add(id);
      return true;
    }
    if (key === keys.cluster) return this.setCluster(kv.value);
    const map = this.mapOf(key);
    if (!map) return false;
    const id = key.slice(map.prefix.length);
    const old = map.map.get(id);
    if (old && old.modRevision >= kv.modRevision) return false;
    try {
      map.map.set(id, { value: JSON.parse(kv.value), modRevision: kv.modRevision });
    } catch {
      this.log.warn('not JSON in the cluster store; ignored', { key });
      return false;
    }
    if (map.prefix === keys.nodes && !this.live.has(id) && !this.downSince.has(id))
      this.downSince.set(id, this.clock.now());
    return true;
  }

  private remove(key: string, revision: number): boolean {
    this.tombstones.set(key, revision);
    if (key.startsWith(keys.lives)) {
      const id = key.slice(keys.lives.length);
      if (!this.live.delete(id)) return false;
      this.downSince.set(id, this.clock.now());
      return true;
    }
    const map = this.mapOf(key);
    if (!map) return false;
    const id = key.slice(map.prefix.length);
    const old = map.map.get(id);
    if (!old || old.modRevision > revision) return false;
    map.map.delete(id);
    if (map.prefix === keys.nodes) this.downSince.delete(id);
    return true;
  }

  private setCluster(value: string): boolean {
    try {
      const c = JSON.parse(value) as { Spec?: { Orchestration?: { TaskHistoryRetentionLimit?: number } } };
      const limit = c.Spec?.Orchestration?.TaskHistoryRetentionLimit;
      const next = typeof limit === 'number' ? limit : DEFAULT_TASK_HISTORY;
      if (next === this.taskHistoryLimit) return false;
      this.taskHistoryLimit = next;
      return true;
    } catch {
      return false;
    }
  }

  private mapOf(key: string): { prefix: string; map: Map<string, Versioned<unknown>> } | undefined {
    if (key.startsWith(keys.services)) return { prefix: keys.services, map: this.services };
    if (key.startsWith(keys.tasks)) return { prefix: keys.tasks, map: this.tasks };
    if (key.startsWith(keys.nodes)) return { prefix: keys.nodes, map: this.nodes };
    if (key.startsWith(networkKeys.all)) return { prefix: networkKeys.all, map: this.networks };
    if (key.startsWith(networkKeys.ipamAll)) return { prefix: networkKeys.ipamAll, map: this.ipam };
    return undefined;
  }
}
