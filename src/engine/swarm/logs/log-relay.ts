import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys, PREFIX } from '../keys.js';
import type { ClusterStore, Watch } from '../store/cluster-store.js';
import type { LogSubscription } from './logs.types.js';

/**
 * Subscriptions for nodes whose assignments stream is on another manager: the manager that has
 * the request writes `P/logsubs/<id>` (its address, the nodes' tasks, the options) under a lease
 * it keeps alive while the request lives; every manager watches the prefix and passes the part of
 * its own nodes down their streams, with the address to POST the lines to. The key goes (deleted,
 * or its lease expired) when the request is over: the nodes are told `logs-end`.
 */

export const logSubscriptionsPrefix = `${PREFIX}/logsubs/`;

/** What `P/logsubs/<id>` holds. */
export interface RelayedSubscription {
  /** The cluster API address of the manager the lines go to. */
  Manager: string;
  /** Node ID → its task IDs. */
  Plan: Record<string, string[]>;
  Options: Omit<LogSubscription, 'ID' | 'Tasks' | 'Manager'>;
}

const LEASE_TTL_S = 10;

/** What the relay does with what it reads: hand a node its part, or end it. */
export interface RelayTarget {
  /** Sends the subscription to the node if its stream is here; false otherwise. */
  offer(nodeId: string, sub: LogSubscription): boolean;
  end(nodeId: string, id: string): void;
}

export class LogRelay {
  private watch?: Watch;
  private stopped = false;
  private target?: RelayTarget;
  /** The other managers' subscriptions in etcd now. */
  private readonly known = new Map<string, RelayedSubscription>();
  /** Relayed subscription ID → the nodes here it was sent to. */
  private readonly sent = new Map<string, Set<string>>();

  constructor(
    private readonly store: ClusterStore,
    /** This manager's cluster API address. */
    readonly addr: string,
    private readonly log: Logger,
    private readonly retryMs = 1000,
  ) {}

  /**
   * Watches the subscriptions of the other managers for this manager's nodes, from now until
   * stop (again after a failed read or a broken watch: a new manager's member may be a learner
   * that cannot serve reads yet).
   */
  start(target: RelayTarget): void {
    this.target = target;
    void this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped && !this.watch) {
      try {
        await this.open();
      } catch (err) {
        this.log.debug('the log subscriptions cannot be read yet', { error: errorMessage(err) });
        await sleep(this.retryMs);
      }
    }
  }

  private async open(): Promise<void> {
    const list = await this.store.range(logSubscriptionsPrefix);
    if (this.stopped) return;
    const seen = new Set<string>();
    for (const kv of list.kvs) {
      seen.add(kv.key);
      this.apply(kv.key, kv.value);
    }
    for (const id of [...this.known.keys()])
      if (!seen.has(`${logSubscriptionsPrefix}${id}`))
        this.apply(`${logSubscriptionsPrefix}${id}`, undefined);
    this.watch = this.store.watch(logSubscriptionsPrefix, list.revision + 1, {
      onEvents: (events) => {
        for (const e of events) this.apply(e.kv.key, e.type === 'put' ? e.kv.value : undefined);
      },
      onError: (err) => {
        this.log.warn('the log subscriptions watch ended', { error: errorMessage(err) });
        this.watch = undefined;
        if (!this.stopped) void sleep(this.retryMs).then(() => this.run());
      },
    });
  }

  private apply(key: string, value: string | undefined): void {
    const id = key.slice(logSubscriptionsPrefix.length);
    if (value === undefined) {
      for (const nodeId of this.sent.get(id) ?? []) this.target?.end(nodeId, id);
      this.sent.delete(id);
      this.known.delete(id);
      return;
    }
    if (this.known.has(id)) return;
    try {
      const sub = JSON.parse(value) as RelayedSubscription;
      if (sub.Manager === this.addr) return;
      this.known.set(id, sub);
      this.sent.set(id, new Set());
      for (const nodeId of Object.keys(sub.Plan)) this.offer(id, nodeId);
    } catch (err) {
      this.log.warn('a relayed log subscription could not be read', { error: errorMessage(err) });
    }
  }

  private offer(id: string, nodeId: string): void {
    const sub = this.known.get(id);
    const tasks = sub?.Plan[nodeId];
    const sent = this.sent.get(id);
    if (!sub || !tasks || !sent || sent.has(nodeId)) return;
    if (this.target?.offer(nodeId, { ID: id, Tasks: tasks, Manager: sub.Manager, ...sub.Options }))
      sent.add(nodeId);
  }

  /** A node's stream came here: the subscriptions for it not yet sent go now. */
  attached(nodeId: string): void {
    for (const id of this.known.keys()) this.offer(id, nodeId);
  }

  stop(): void {
    this.stopped = true;
    this.watch?.close();
    this.watch = undefined;
    this.sent.clear();
    this.known.clear();
  }

  /** Whether the node is alive (its liveness key), so worth waiting for. */
  async alive(nodeId: string): Promise<boolean> {
    return (await this.store.get(keys.live(nodeId))) !== undefined;
  }

  /** Publishes a subscription for other managers' nodes; the function returned withdraws it. */
  async publish(id: string, sub: RelayedSubscription): Promise<() => Promise<void>> {
    const lease = await this.store.grantLease(LEASE_TTL_S);
    await this.store.put(`${logSubscriptionsPrefix}${id}`, JSON.stringify(sub), { lease: lease.id });
    const keep = setInterval(
      () => {
        void this.store.keepAlive(lease.id).catch(() => {});
      },
      (LEASE_TTL_S * 1000) / 3,
    );
    keep.unref();
    return async () => {
      clearInterval(keep);
      await this.store.revokeLease(lease.id).catch(() => {});
    };
  }
}
