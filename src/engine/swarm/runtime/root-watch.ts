import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { Periodic } from '../../../common/periodic.js';
import { finishRotationIfDone, loadCaState, type TrustState, trustState } from '../ca/ca-state.js';
import type { ClusterStore } from '../store/cluster-store.js';

/**
 * A manager's look at the swarm's roots every heartbeat period (a worker hears them in its
 * heartbeat answers): what its cluster API is to trust, whether this node must follow a root
 * rotation, and whether the rotation can end (every node that is up holds a certificate from the
 * new root; any manager may end it, the transaction decides).
 */
export class RootWatch {
  private readonly periodic = new Periodic(() => this.follow());

  constructor(
    private readonly store: ClusterStore,
    private readonly onTrust: (trust: TrustState) => void,
    private readonly log: Logger,
    private readonly now: () => Date,
  ) {}

  start(periodMs: number): void {
    this.periodic.start(periodMs);
  }

  stop(): void {
    this.periodic.stop();
  }

  check(): Promise<void> {
    return this.periodic.run();
  }

  private async follow(): Promise<void> {
    try {
      const state = await loadCaState(this.store);
      if (state.next && (await finishRotationIfDone(this.store, this.now()))) {
        this.log.info('root CA rotation done: the new root is the trust root');
        this.onTrust(trustState(await loadCaState(this.store)));
      } else this.onTrust(trustState(state));
    } catch (err) {
      // a store that does not answer (a lost quorum, a removed member): nothing to follow now
      this.log.debug('cannot read the swarm roots', { error: errorMessage(err) });
    }
  }
}
