import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import type { StoredCluster } from '../records.js';
import type { ManagerAccess, RoleLoops } from '../role-loops.js';
import { effectiveHeartbeatMs } from '../spec.js';
import type { ClusterStore } from '../store/cluster-store.js';
import type { PeerProbe, PeerTlsFiles } from './peer-probe.js';

/**
 * ManagerStatus.Reachability from each manager's etcd member, as swarmkit's comes from its raft
 * member: a manager loop asks `memberList()` and probes every voting member's peer URL
 * (peer-probe.ts) once per dispatcher heartbeat; a learner is `unknown` (it does not vote yet),
 * a member that does not answer `unreachable`. `GET /nodes` reads the last round (never a probe
 * inline); before a first round, or for a member not in the list, there is no answer here.
 */

export type Reachability = 'reachable' | 'unreachable' | 'unknown';

export interface MemberHealthDeps {
  probe: PeerProbe;
  /** This manager's etcd peer certificate, key and the swarm's CA (files). */
  tls(): PeerTlsFiles;
  /** The round's rhythm when the cluster's spec cannot be read (ms). */
  defaultPeriodMs?: number;
}

export class MemberHealth implements RoleLoops {
  private readonly seen = new Map<string, Reachability>();
  private run?: AbortController;

  constructor(private readonly deps: MemberHealthDeps) {}

  /** The member's reachability as the last round found it. */
  reachability(memberId: string): Reachability | undefined {
    return this.seen.get(memberId);
  }

  async startManager(access: ManagerAccess): Promise<void> {
    await this.stop();
    const run = new AbortController();
    this.run = run;
    void this.loop(access.store, access.log, run.signal);
  }

  async startNode(): Promise<void> {}

  /** Ends the loop at once (a round under way finishes without a word: leave and demote never wait for a probe). */
  async stop(): Promise<void> {
    this.run?.abort();
    this.run = undefined;
    this.seen.clear();
  }

  /** One round: every member's state, then the map replaced at once. */
  async round(store: ClusterStore, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const members = await store.memberList();
    const tls = this.deps.tls();
    const found = await Promise.all(
      members.map(async (m): Promise<[string, Reachability]> => {
        if (m.isLearner) return [m.id, 'unknown'];
        const url = m.peerUrls[0];
        const ok = url ? await this.deps.probe(url, tls, timeoutMs).catch(() => false) : false;
        return [m.id, ok ? 'reachable' : 'unreachable'];
      }),
    );
    if (signal?.aborted) return;
    this.seen.clear();
    for (const [id, r] of found) this.seen.set(id, r);
  }

  private async loop(store: ClusterStore, log: Logger, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const periodMs = await this.periodMs(store);
      const started = Date.now();
      try {
        // a probe waits at most most of a period: the next round is never late
        await this.round(store, Math.max(200, Math.floor(periodMs * 0.8)), signal);
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
