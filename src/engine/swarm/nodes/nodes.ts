import { conflict, errorMessage, invalidParameter, notFound } from '../../../common/errors.js';
import type { Filters } from '../../../common/filters.js';
import { keys } from '../keys.js';
import type { StoredManager, StoredNode } from '../records.js';
import type { ClusterStore, KeyValue, TxnOp } from '../store/cluster-store.js';
import type { NodeSpecUpdate, SwarmNode } from '../swarm.types.js';
import type { SwarmContext } from '../swarm-context.js';
import { MemberHealth, type Reachability } from './member-health.js';
import { filterNodes } from './node-filters.js';
import { type PeerProbe, probePeer } from './peer-probe.js';

/**
 * The swarm's nodes as a manager shows and changes them: `P/nodes/<id>` with the node's state
 * from its liveness key, and ManagerStatus from `P/managers/` and etcd's own leader.
 */
export class Nodes {
  /** Each manager's etcd member as this manager's loop last found it (ManagerStatus.Reachability). */
  private readonly health: MemberHealth;

  constructor(
    private readonly ctx: SwarmContext,
    probe: PeerProbe = probePeer,
  ) {
    this.health = new MemberHealth({ probe, tls: () => ctx.runtime.peerTls() });
    // it runs on managers, with the other rooms' loops
    void ctx.runtime.addLoops(this.health);
  }

  async list(filters: Filters = new Map()): Promise<SwarmNode[]> {
    const { session } = this.ctx;
    const store = session.managerStore();
    const [nodes, live, managers, status, members] = await session.read(() =>
      Promise.all([
        store.range(keys.nodes),
        store.range(keys.lives),
        store.range(keys.managers),
        store.status(),
        store.memberList(),
      ]),
    );
    // learners from etcd's list now; a member that did not answer, from the last probe round
    const learners = new Set(members.filter((m) => m.isLearner).map((m) => m.id));
    const member = (id: string): Reachability | undefined =>
      learners.has(id)
        ? 'unknown'
        : this.health.reachability(id) === 'unreachable'
          ? 'unreachable'
          : undefined;
    const alive = new Set(live.kvs.map((kv) => kv.key.slice(keys.lives.length)));
    const managerOf = new Map(
      managers.kvs.map((kv) => [kv.key.slice(keys.managers.length), JSON.parse(kv.value) as StoredManager]),
    );
    return filterNodes(
      nodes.kvs.map((kv) => nodeView(kv, alive, managerOf, status.leader, member)),
      filters,
    );
  }

  /** A node by ID, ID prefix or hostname, as dockerd's lookup finds it. */
  async inspect(ref: string): Promise<SwarmNode> {
    const nodes = await this.list();
    const exact = nodes.find((n) => n.ID === ref);
    if (exact) return exact;
    const byName = nodes.filter((n) => n.Description.Hostname === ref);
    if (byName.length === 1 && byName[0]) return byName[0];
    const byPrefix = nodes.filter((n) => ref !== '' && n.ID.startsWith(ref));
    if (byPrefix.length === 1 && byPrefix[0]) return byPrefix[0];
    if (byName.length > 1 || byPrefix.length > 1) {
      throw invalidParameter(
        `node ${ref} is ambiguous (${Math.max(byName.length, byPrefix.length)} matches found)`,
      );
    }
    throw notFound(`node ${ref} not found`);
  }

  /**
   * POST /nodes/{id}/update?version=: the NodeSpec as given (labels replaced, Role and
   * Availability required), by compare-and-swap on the node's version. A promotion is the Role
   * in etcd: the node sees it in its next heartbeat answer and becomes a manager (role-change.ts).
   * A demotion is refused as swarmkit refuses it (the last manager, a lost quorum); else the
   * node's member leaves etcd's membership first, and the node then finds its Role worker.
   */
  async update(ref: string, version: number, spec: NodeSpecUpdate): Promise<void> {
    const store = this.ctx.session.managerStore();
    const node = await this.inspect(ref);
    const role = spec.Role;
    if (role !== 'manager' && role !== 'worker')
      throw invalidParameter(`invalid Role: ${JSON.stringify(role ?? '')}`);
    const availability = spec.Availability;
    if (availability !== 'active' && availability !== 'pause' && availability !== 'drain') {
      throw invalidParameter(`invalid Availability: ${JSON.stringify(availability ?? '')}`);
    }
    const demote = role === 'worker' && node.Spec.Role === 'manager';
    const next: StoredNode['Spec'] = {
      ...(spec.Name ? { Name: spec.Name } : {}),
      Labels: { ...(spec.Labels ?? {}) },
      Role: role,
      Availability: availability,
    };
    if (!demote) return this.writeSpec(store, node.ID, version, next);
    await this.checkDemotion(store, node.ID);
    const memberId = await this.memberOf(store, node.ID);
    // Another node's member leaves first: that node stops it only once its Role says worker, so
    // the rest never wait on a member that is already gone. This node's own member goes last: its
    // store ends with it, and its own role change waits for this call (the membership queue). The
    // Role and the manager record change together, so the node never sees one without the other.
    const self = this.ctx.session.local?.NodeID === node.ID;
    if (!self) {
      if (node.Version.Index !== version) throw conflict('update out of sequence');
      await this.removeMember(store, memberId);
    }
    await this.writeSpec(store, node.ID, version, next, [{ delete: { key: keys.manager(node.ID) } }]);
    if (self) await this.removeMember(store, memberId, true);
  }

  /**
   * swarmkit's refusals of a demotion: the last manager, and a member whose removal leaves fewer
   * reachable managers than the smaller cluster's quorum (reachable: its liveness key is there).
   */
  private async checkDemotion(store: ClusterStore, id: string): Promise<void> {
    const [managers, live, members] = await this.ctx.session.read(() =>
      Promise.all([store.range(keys.managers), store.range(keys.lives), store.memberList()]),
    );
    if (managers.kvs.length <= 1)
      throw invalidParameter('attempting to demote the last manager of the swarm');
    const own = managers.kvs.find((kv) => kv.key === keys.manager(id));
    if (!own) return;
    const memberId = (JSON.parse(own.value) as StoredManager).memberId;
    const alive = new Set(live.kvs.map((kv) => kv.key.slice(keys.lives.length)));
    const nodeOf = new Map(
      managers.kvs.map((kv) => [
        (JSON.parse(kv.value) as StoredManager).memberId,
        kv.key.slice(keys.managers.length),
      ]),
    );
    const remaining = members.filter((m) => !m.isLearner && m.id !== memberId);
    const reachable = remaining.filter((m) => alive.has(nodeOf.get(m.id) ?? '')).length;
    const quorum = Math.floor(remaining.length / 2) + 1;
    if (reachable < quorum) {
      throw invalidParameter("can't remove member from the raft: this would result in a loss of quorum");
    }
  }

  /** The etcd member of a manager's node ('' when it has none yet). */
  private async memberOf(store: ClusterStore, id: string): Promise<string> {
    const kv = await store.get(keys.manager(id));
    return kv ? (JSON.parse(kv.value) as StoredManager).memberId : '';
  }

  /**
   * A demoted manager's etcd member leaves the membership. `own`: the member is the one this
   * node's store talks to. etcd stops a member as soon as it applies the member's own removal,
   * and the answer to the removal can be lost with it ("etcdserver: server stopped", etcd-io/etcd
   * #4391): the removal was applied. Nothing else stops this node's member meanwhile (its role
   * change waits for this call).
   */
  private async removeMember(store: ClusterStore, memberId: string, own = false): Promise<void> {
    if (!memberId) return;
    try {
      await store.memberRemove(memberId);
    } catch (err) {
      const message = errorMessage(err);
      // already gone is what was wanted
      if (/not found/i.test(message)) return;
      if (own && /server stopped/i.test(message)) return;
      throw err;
    }
  }

  /** DELETE /nodes/{id}?force=: a node that is down (or any worker with force); never a manager. */
  async remove(ref: string, force: boolean): Promise<void> {
    const store = this.ctx.session.managerStore();
    const node = await this.inspect(ref);
    if (node.ManagerStatus || node.Spec.Role === 'manager') {
      throw invalidParameter(
        `node ${node.ID} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`,
      );
    }
    if (node.Status.State !== 'down' && !force) {
      throw invalidParameter(`node ${node.ID} is not down and can't be removed`);
    }
    // from now on its certificate gets it nothing: the dispatcher refuses nodes not in etcd
    await store.txn([], [{ delete: { key: keys.node(node.ID) } }, { delete: { key: keys.live(node.ID) } }]);
  }

  /** The node's Spec replaced, if its version is still `version` (409 otherwise). */
  private async writeSpec(
    store: ClusterStore,
    id: string,
    version: number,
    spec: StoredNode['Spec'],
    also: TxnOp[] = [],
  ): Promise<void> {
    const kv = await store.get(keys.node(id));
    if (!kv) throw notFound(`node ${id} not found`);
    const stored = JSON.parse(kv.value) as StoredNode;
    const next: StoredNode = { ...stored, UpdatedAt: this.ctx.now().toISOString(), Spec: spec };
    const res = await store.txn(
      [{ key: keys.node(id), target: 'mod', op: 'equal', value: version }],
      [{ put: { key: keys.node(id), value: JSON.stringify(next) } }, ...also],
    );
    if (!res.succeeded) throw conflict('update out of sequence');
  }
}

/**
 * The Node as the API shows it: its record, its liveness, its manager status. Reachability is its
 * etcd member's: `unknown` while a learner (etcd's member list), `unreachable` when its peer URL
 * did not answer the last probe round (member-health.ts) or the node itself is down.
 */
function nodeView(
  kv: KeyValue,
  alive: Set<string>,
  managers: Map<string, StoredManager>,
  leader: string,
  member: (memberId: string) => Reachability | undefined,
): SwarmNode {
  const { _: _private, ...n } = JSON.parse(kv.value) as StoredNode;
  const up = alive.has(n.ID);
  const view: SwarmNode = {
    ...n,
    Version: { Index: kv.modRevision },
    Status: { ...n.Status, State: up ? 'ready' : 'down' },
  };
  const m = managers.get(n.ID);
  if (m) {
    view.ManagerStatus = {
      ...(m.memberId === leader ? { Leader: true } : {}),
      Reachability: reachability(up, m.memberId ? member(m.memberId) : undefined),
      Addr: m.addr,
    };
  }
  return view;
}

function reachability(up: boolean, member: Reachability | undefined): Reachability {
  if (member === 'unknown' || member === 'unreachable') return member;
  return up ? 'reachable' : 'unreachable';
}
