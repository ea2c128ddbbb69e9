import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { RAFT_TICK_MS } from '../etcd/etcd-args.js';
import { keys } from '../keys.js';
import type { RoleLoops } from '../role-loops.js';
import type { ClusterStore } from '../store/cluster-store.js';
import { type Orchestrator, startOrchestrator } from './orchestrator.js';

/**
 * The orchestrator as a manager's loop: started when the node becomes an active manager with
 * its store, stopped (resigning) before it leaves, is demoted or the engine stops. The election
 * lease's TTL is 3 × etcd's election timeout (the cluster's ElectionTick × 100 ms: 3 s by
 * default); the election key also names this manager's cluster API address.
 */
export interface ManagerLoopAccess {
  nodeId: string;
  store: ClusterStore;
  log: Logger;
  /** This manager's cluster API address (else read from `P/managers/<id>`). */
  addr?: string;
}

const DEFAULT_ELECTION_TICK = 10;

export class OrchestratorLoop implements RoleLoops {
  private running?: Orchestrator;

  async startManager(access: ManagerLoopAccess): Promise<void> {
    await this.stop();
    const { store, nodeId, log } = access;
    let tick = DEFAULT_ELECTION_TICK;
    let addr = access.addr ?? '';
    try {
      const [cluster, manager] = await Promise.all([
        store.get(keys.cluster),
        store.get(keys.manager(nodeId)),
      ]);
      const spec = cluster
        ? (JSON.parse(cluster.value) as { Spec?: { Raft?: { ElectionTick?: number } } }).Spec
        : {};
      tick = spec?.Raft?.ElectionTick || DEFAULT_ELECTION_TICK;
      if (!addr && manager) addr = (JSON.parse(manager.value) as { addr?: string }).addr ?? '';
    } catch (err) {
      log.debug('orchestrator: the cluster settings could not be read; defaults apply', {
        error: errorMessage(err),
      });
    }
    this.running = startOrchestrator({
      store,
      nodeId,
      addr,
      ttlSeconds: Math.max(1, Math.ceil((3 * tick * RAFT_TICK_MS) / 1000)),
      log: log.child('orchestrator'),
    });
  }

  /** Only managers campaign. */
  async startNode(): Promise<void> {}

  async stop(): Promise<void> {
    const o = this.running;
    this.running = undefined;
    await o?.stop();
  }
}
