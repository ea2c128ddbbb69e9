import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { keys } from './keys.js';
import type { ClusterStore, Watch, WatchEvent } from './store/cluster-store.js';
import type { SwarmNode } from './swarm.types.js';

/**
 * A manager's swarm-scope events, from its etcd watch (so each manager emits each change once,
 * as it reaches it): `node` create, update and remove with moby's attributes (`name`, and on
 * update `availability.old/new`, `role.old/new`, `state.old/new`), a node's state being its
 * liveness key (present: ready, gone: down). The leader is etcd's: this manager's member is
 * asked every second, and a change is moby's pair of updates, `leader.old/new` `true`→`false` on
 * the old leader's node and `false`→`true` on the new one's.
 */

export type SwarmPublish = (
  type: 'node' | 'service' | 'secret' | 'config' | 'network',
  action: string,
  id: string,
  attributes: Record<string, string>,
) => void;

interface NodeSeen {
  hostname: string;
  role: string;
  availability: string;
}

export class ClusterEvents {
  private readonly nodes = new Map<string, NodeSeen>();
  private readonly alive = new Set<string>();
  /** etcd member ID → node ID, from `P/managers/`. */
  private readonly memberNodes = new Map<string, string>();
  private leader = '';
  private leaderTimer?: NodeJS.Timeout;
  private watch?: Watch;
  private stopped = false;

  constructor(
    private readonly store: ClusterStore,
    private readonly publish: SwarmPublish,
    private readonly log: Logger,
    private readonly leaderPollMs = 1000,
  ) {}

  async start(): Promise<void> {
    this.stopped = false;
    const [nodes, live, managers, status] = await Promise.all([
      this.store.range(keys.nodes),
      this.store.range(keys.lives),
      this.store.range(keys.managers),
      this.store.status(),
    ]);
    this.nodes.clear();
    this.alive.clear();
    this.memberNodes.clear();
    for (const kv of nodes.kvs) this.nodes.set(kv.key.slice(keys.nodes.length), seen(kv.value));
    for (const kv of live.kvs) this.alive.add(kv.key.slice(keys.lives.length));
    for (const kv of managers.kvs) this.addManager(kv.key, kv.value);
    this.leader = status.leader;
    const from = Math.max(nodes.revision, live.revision, managers.revision) + 1;
    // one watch on the common prefix of nodes/ and live/
    this.watch = this.store.watch(keys.cluster.slice(0, keys.cluster.lastIndexOf('/') + 1), from, {
      onEvents: (events) => {
        for (const e of events) this.apply(e);
      },
      onError: (err) => {
        if (this.stopped) return;
        this.log.debug('cluster event watch ended; starting it again', { error: errorMessage(err) });
        void sleep(500).then(() => (this.stopped ? undefined : this.start().catch(() => {})));
      },
    });
    if (this.leaderTimer) clearInterval(this.leaderTimer);
    this.leaderTimer = setInterval(() => void this.checkLeader(), this.leaderPollMs);
    this.leaderTimer.unref();
  }

  stop(): void {
    this.stopped = true;
    this.watch?.close();
    this.watch = undefined;
    if (this.leaderTimer) clearInterval(this.leaderTimer);
    this.leaderTimer = undefined;
  }

  /** etcd's leader as this member sees it now; a change from one known leader to another is published. */
  async checkLeader(): Promise<void> {
    let leader: string;
    try {
      leader = (await this.store.status()).leader;
    } catch {
      return; // no answer is no news: a lost quorum shows as no leader elsewhere
    }
    if (this.stopped || leader === this.leader || leader === '0' || leader === '') return;
    const old = this.leader;
    this.leader = leader;
    for (const [member, was] of [
      [old, true],
      [leader, false],
    ] as const) {
      const id = this.memberNodes.get(member);
      const node = id ? this.nodes.get(id) : undefined;
      if (!id || !node) continue;
      this.publish('node', 'update', id, {
        name: node.hostname,
        'leader.old': String(was),
        'leader.new': String(!was),
      });
    }
  }

  private addManager(key: string, value: string): void {
    try {
      const { memberId } = JSON.parse(value) as { memberId?: string };
      if (memberId) this.memberNodes.set(memberId, key.slice(keys.managers.length));
    } catch {
      // not a manager record: nothing to map
    }
  }

  private apply(e: WatchEvent): void {
    const key = e.kv.key;
    if (key.startsWith(keys.managers)) {
      if (e.type === 'put') this.addManager(key, e.kv.value);
      else {
        const id = key.slice(keys.managers.length);
        for (const [member, node] of this.memberNodes) if (node === id) this.memberNodes.delete(member);
      }
    } else if (key.startsWith(keys.nodes)) {
      const id = key.slice(keys.nodes.length);
      const old = this.nodes.get(id);
      if (e.type === 'delete') {
        this.nodes.delete(id);
        this.publish('node', 'remove', id, { name: old?.hostname ?? '' });
        return;
      }
      const now = seen(e.kv.value);
      this.nodes.set(id, now);
      if (!old) {
        this.publish('node', 'create', id, { name: now.hostname });
        return;
      }
      const attrs: Record<string, string> = { name: now.hostname };
      if (old.availability !== now.availability) {
        attrs['availability.old'] = old.availability;
        attrs['availability.new'] = now.availability;
      }
      if (old.role !== now.role) {
        attrs['role.old'] = old.role;
        attrs['role.new'] = now.role;
      }
      this.publish('node', 'update', id, attrs);
    } else if (key.startsWith(keys.lives)) {
      const id = key.slice(keys.lives.length);
      const was = this.alive.has(id);
      const is = e.type === 'put';
      if (is) this.alive.add(id);
      else this.alive.delete(id);
      const node = this.nodes.get(id);
      if (was === is || !node) return;
      this.publish('node', 'update', id, {
        name: node.hostname,
        'state.old': was ? 'ready' : 'down',
        'state.new': is ? 'ready' : 'down',
      });
    }
  }
}

function seen(value: string): NodeSeen {
  try {
    const n = JSON.parse(value) as SwarmNode;
    return {
      hostname: n.Description?.Hostname ?? '',
      role: n.Spec?.Role ?? '',
      availability: n.Spec?.Availability ?? '',
    };
  } catch {
    return { hostname: '', role: '', availability: '' };
  }
}
