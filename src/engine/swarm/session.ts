import { BerthError, errorMessage, unavailable } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { LocalState, LocalSwarmFiles } from './local-state.js';
import { LOCKED, NO_LEADER, NOT_A_MANAGER, WORKER_NOT_MANAGER } from './messages.js';
import type { ClusterStore } from './store/cluster-store.js';
import type { LocalNodeState } from './swarm.types.js';

/**
 * Who this engine is in its swarm while it runs: its state on disk (LocalState), its local node
 * state, and on a manager the store on its member and the cluster's DEK. Every room of swarm
 * mode reads it; the membership rooms change it.
 */
export class SwarmSession {
  local?: LocalState;
  store?: ClusterStore;
  dek?: Buffer;
  nodeState: LocalNodeState = 'inactive';
  error = '';
  /** The node's key while it is sealed on disk (autolock), once unlocked. */
  nodeKeyPem?: string;
  /** A manager's member has been without a leader for longer than an election (runtime/leader-watch.ts). */
  leaderLost: () => boolean = () => false;

  constructor(
    readonly files: LocalSwarmFiles,
    private readonly log: Logger,
  ) {}

  /** The node is in the swarm and serving (or, on failure, says why not). */
  activate(): void {
    this.nodeState = 'active';
    this.error = '';
  }

  /** Nothing of a swarm in memory any more. */
  clear(): void {
    this.local = undefined;
    this.dek = undefined;
    this.nodeKeyPem = undefined;
    this.nodeState = 'inactive';
    this.error = '';
  }

  /** The store on an active manager; dockerd's 503s otherwise. */
  managerStore(): ClusterStore {
    if (!this.local || this.nodeState === 'inactive') throw unavailable(NOT_A_MANAGER);
    if (this.local.Role !== 'manager') throw unavailable(WORKER_NOT_MANAGER);
    if (this.nodeState === 'locked') throw unavailable(LOCKED);
    if (!this.store) throw unavailable(this.error || NO_LEADER);
    // a lost quorum is answered at once, as dockerd does, not after each request's timeout
    if (this.leaderLost()) throw unavailable(NO_LEADER);
    return this.store;
  }

  /** A store read; a store that cannot answer is the swarm without a leader (dockerd's 503). */
  async read<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BerthError) throw err;
      this.log.warn('cluster store read failed', { error: errorMessage(err) });
      throw unavailable(NO_LEADER);
    }
  }

  async clusterDek(): Promise<Buffer> {
    if (!this.dek) this.dek = await this.files.readDek();
    return this.dek;
  }
}
