import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import type { StoredCluster, StoredManager } from '../records.js';
import type { ManagerAccess, RoleLoops } from '../role-loops.js';
import { effectiveHeartbeatMs } from '../spec.js';
import type { ClusterStore, Member } from '../store/cluster-store.js';
import type { PeerProbe, PeerTlsFiles } from './peer-probe.js';

/**
 * ManagerStatus.Reachability from each manager's etcd member, as swarmkit's comes from its raft
 * member: a manager loop asks `memberList()` and probes every voting member's peer URL
 * (peer-probe.ts) once per dispatcher heartbeat; a learner is `unknown` (it does not vote yet),
 * a member that does not answer `unreachable`. `GET /nodes` reads the last round (never a probe
 * inline); before a first round, or for a member not in the list, there is no answer here.
 *
 * A manager whose member has not answered for 3 × the heartbeat (its liveness lease's TTL) is
 * let go at once: its liveness and election leases are revoked, so that its node shows `down`
 * and, were it the leader, another manager's campaign wins. Waiting for those leases would cost
 * an etcd election more: etcd's new leader renews every lease when it takes office (issue 14's
 * leader-loss aim). Only a manager whose member answers etcd can revoke (a quorum); the lost one,
 * back, takes a new lease (liveness.ts) and campaigns again.
 */

/**
 * How long a member may stay a learner before a manager removes it. A joining manager's learner is
 * promoted within seconds of its start (dispatcher.ts: retried for 20 s once it has caught up); one
 * still a learner this long belongs to a join that failed or a node that never started its member
 * (it would otherwise stay in etcd's membership for good). Generous, for a large store on a slow
 * link.
 */
export const STALE_LEARNER_MS = 5 * 60_000;

/** What a manager's dispatcher writes as a node's liveness (dispatcher.ts), against the node's own address. */
const DISPATCHER_BEAT = 'up';

export type Reachability = 'reachable' | 'unreachable' | 'unknown';

export interface MemberHealthDeps {
  probe: PeerProbe;
  /** This manager's etcd peer certificate, key and the swarm's CA (files). */
  tls(): PeerTlsFiles;
  /** The round's rhythm when the cluster's spec cannot be read (ms). */
  defaultPeriodMs?: number;
  /** How long a member may stay a learner (default STALE_LEARNER_MS). */
  staleLearnerMs?: number;
  now?: () => number;
}

export class MemberHealth implements RoleLoops {
  private readonly seen = new Map<string, Reachability>();
  /** When each member last answered (or was first found not answering). */
  private readonly answered = new Map<string, number>();
  /** Members whose managers' leases this manager revoked, until they answer again. */
  private readonly released = new Set<string>();
  /** When this manager first saw each member that is still a learner. */
  private readonly learnerSince = new Map<string, number>();
  private run?: AbortController;
  private log?: Logger;

  constructor(private readonly deps: MemberHealthDeps) {}

  /** The member's reachability as the last round found it. */
  reachability(memberId: string): Reachability | undefined {
    return this.seen.get(memberId);
  }

  async startManager(access: ManagerAccess): Promise<void> {
    await this.stop();
    const run = new AbortController();
    this.run = run;
    this.log = access.log;
    void this.loop(access.store, access.log, run.signal);
  }

  async startNode(): Promise<void> {}

  /** Ends the loop at once (a round under way finishes without a word: leave and demote never wait for a probe). */
  async stop(): Promise<void> {
    this.run?.abort();
    this.run = undefined;
    this.seen.clear();
    this.answered.clear();
    this.released.clear();
    this.learnerSince.clear();
  }

  /**
   * One round: every member's state, then the map replaced at once; a member silent for
   * `lostAfterMs` (when given) has its manager's leases revoked.
   */
  async round(
    store: ClusterStore,
    timeoutMs: number,
    signal?: AbortSignal,
    lostAfterMs?: number,
  ): Promise<void> {
    const clock = this.deps.now ?? Date.now;
    const started = clock();
    const members = await store.memberList();
    const tls = this.deps.tls();
    /** When each member answered this round (its last sign of life, as a lease's renewal). */
    const answers = new Map<string, number>();
    const found = await Promise.all(
      members.map(async (m): Promise<[string, Reachability]> => {
        if (m.isLearner) return [m.id, 'unknown'];
        const url = m.peerUrls[0];
        const ok = url ? await this.deps.probe(url, tls, timeoutMs).catch(() => false) : false;
        if (ok) answers.set(m.id, clock());
        return [m.id, ok ? 'reachable' : 'unreachable'];
      }),
    );
    if (signal?.aborted) return;
    const ended = clock();
    this.seen.clear();
    for (const [id, r] of found) this.seen.set(id, r);
    const lost: string[] = [];
    for (const [id, r] of found) {
      if (r === 'reachable' || !this.answered.has(id)) this.answered.set(id, answers.get(id) ?? started);
      if (r === 'reachable') this.released.delete(id);
      if (
        r === 'unreachable' &&
        lostAfterMs !== undefined &&
        ended - (this.answered.get(id) ?? ended) >= lostAfterMs &&
        !this.released.has(id)
      )
        lost.push(id);
    }
    const known = new Set(found.map(([id]) => id));
    for (const id of this.answered.keys()) if (!known.has(id)) this.answered.delete(id);
    for (const id of lost) {
      await this.release(store, id);
      this.released.add(id);
    }
    await this.dropStaleLearners(store, members, ended);
  }

  /** Removes the members that have been learners for longer than a join takes (STALE_LEARNER_MS). */
  private async dropStaleLearners(store: ClusterStore, members: Member[], now: number): Promise<void> {
    const staleMs = this.deps.staleLearnerMs ?? STALE_LEARNER_MS;
    const learners = new Set(members.filter((m) => m.isLearner).map((m) => m.id));
    for (const id of this.learnerSince.keys()) if (!learners.has(id)) this.learnerSince.delete(id);
    for (const m of members) {
      if (!m.isLearner) continue;
      const since = this.learnerSince.get(m.id);
      if (since === undefined) {
        this.learnerSince.set(m.id, now);
        continue;
      }
      if (now - since < staleMs) continue;
      this.log?.warn('removing an etcd learner never promoted (a manager join that failed)', {
        memberId: m.id,
        peerUrls: m.peerUrls.join(','),
      });
      await store.memberRemove(m.id).catch((err: unknown) => {
        // another manager was first
        if (!/not found/i.test(errorMessage(err))) throw err;
      });
      this.learnerSince.delete(m.id);
    }
  }

  /** Revokes the liveness and election leases of the manager whose member is `memberId`. */
  private async release(store: ClusterStore, memberId: string): Promise<void> {
    const managers = await store.range(keys.managers);
    const own = managers.kvs.find((kv) => (JSON.parse(kv.value) as StoredManager).memberId === memberId);
    if (!own) return;
    const nodeId = own.key.slice(keys.managers.length);
    const [live, election] = await Promise.all([
      store.get(keys.live(nodeId)),
      store.range(`${keys.election}/`),
    ]);
    const leases = new Set<string>();
    // the key as its own engine keeps it (its address); under a dispatcher's lease (`up`) its
    // agent reached another manager lately: it is not lost, only its member
    if (live && live.lease !== '0' && live.value !== DISPATCHER_BEAT) leases.add(live.lease);
    for (const kv of election.kvs) {
      try {
        if ((JSON.parse(kv.value) as { NodeID?: string }).NodeID === nodeId && kv.lease !== '0')
          leases.add(kv.lease);
      } catch {
        // not a campaign of berth's
      }
    }
    this.log?.info("a manager's etcd member is silent: its leases revoked", { node: nodeId, memberId });
    for (const lease of leases) {
      await store.revokeLease(lease).catch((err: unknown) => {
        // gone meanwhile (expired, or another manager was first) is what was wanted
        if (!/not found/i.test(errorMessage(err))) throw err;
      });
    }
  }

  private async loop(store: ClusterStore, log: Logger, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const periodMs = await this.periodMs(store);
      const started = Date.now();
      try {
        // a probe waits at most most of a period: the next round is never late
        await this.round(store, Math.max(200, Math.floor(periodMs * 0.8)), signal, 3 * periodMs);
      } catch (err) {
        // the own member unreachable: nothing known about the others either
        if (signal.aborted) break;
        log.debug('cannot check the etcd members', { error: errorMessage(err) });
        this.seen.clear();
      }
      const wait = Math.max(0, periodMs - (Date.now() - started));
      await sleep(wait, undefined, { signal, ref: false }).catch(() => {});
    }
  }

  private async periodMs(store: ClusterStore): Promise<number> {
    const fallback = this.deps.defaultPeriodMs ?? 5000;
    try {
      const kv = await store.get(keys.cluster);
      return kv ? effectiveHeartbeatMs((JSON.parse(kv.value) as StoredCluster).Spec) : fallback;
    } catch {
      return fallback;
    }
  }
}
