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
  /** Relayed subscription ID → the nodes here it was sent to. */
  private readonly sent = new Map<string, string[]>();

  constructor(
    private readonly store: ClusterStore,
    /** This manager's cluster API address. */
    readonly addr: string,
    private readonly log: Logger,
  ) {}

  /** Watches the subscriptions of the other managers for this manager's nodes. */
  async start(target: RelayTarget): Promise<void> {
    const list = await this.store.range(logSubscriptionsPrefix);
    const apply = (key: string, value: string | undefined) => {
      const id = key.slice(logSubscriptionsPrefix.length);
      if (value === undefined) {
        for (const nodeId of this.sent.get(id) ?? []) target.end(nodeId, id);
        this.sent.delete(id);
        return;
      }
      if (this.sent.has(id)) return;
      const sub = JSON.parse(value) as RelayedSubscription;
      if (sub.Manager === this.addr) return;
      const here: string[] = [];
      for (const [nodeId, tasks] of Object.entries(sub.Plan)) {
        if (target.offer(nodeId, { ID: id, Tasks: tasks, Manager: sub.Manager, ...sub.Options }))
          here.push(nodeId);
      }
      this.sent.set(id, here);
    };
    for (const kv of list.kvs) apply(kv.key, kv.value);
    this.watch = this.store.watch(logSubscriptionsPrefix, list.revision + 1, {
      onEvents: (events) => {
        for (const e of events) {
          try {
            apply(e.kv.key, e.type === 'put' ? e.kv.value : undefined);
          } catch (err) {
            this.log.warn('a relayed log subscription could not be read', { error: errorMessage(err) });
          }
        }
      },
      onError: (err) => this.log.warn('the log subscriptions watch ended', { error: errorMessage(err) }),
    });
  }

  stop(): void {
    this.watch?.close();
    this.watch = undefined;
    this.sent.clear();
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
