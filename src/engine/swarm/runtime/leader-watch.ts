import { Periodic } from '../../../common/periodic.js';
import type { ClusterStore } from '../store/cluster-store.js';

/**
 * A manager's look at its own etcd member's leader, every second (`/v3/maintenance/status`, which
 * the member answers itself, quorum or not). When the member has had no leader for longer than an
 * election takes (`lostAfterMs`), the swarm has lost its quorum: the API then answers dockerd's
 * 503 at once instead of waiting out each request's timeout on a member that cannot answer.
 */
export class LeaderWatch {
  private leaderlessSince?: number;
  private readonly periodic = new Periodic(() => this.look());

  constructor(
    private readonly store: ClusterStore,
    private readonly lostAfterMs = 3000,
    private readonly now: () => number = Date.now,
    private readonly answerMs = 2000,
  ) {}

  /** Whether the member has been without a leader for longer than an election takes. */
  get lost(): boolean {
    return this.leaderlessSince !== undefined && this.now() - this.leaderlessSince >= this.lostAfterMs;
  }

  start(periodMs = 1000): void {
    this.periodic.start(periodMs);
  }

  stop(): void {
    this.periodic.stop();
  }

  check(): Promise<void> {
    return this.periodic.run();
  }

  private async look(): Promise<void> {
    let leader = '0';
    try {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer')), this.answerMs);
      });
      leader = (await Promise.race([this.store.status(), late]).finally(() => clearTimeout(timer))).leader;
    } catch {
      // a member that does not answer its own status has no leader to offer either
    }
    if (leader !== '0' && leader !== '') this.leaderlessSince = undefined;
    else this.leaderlessSince ??= this.now();
  }
}
