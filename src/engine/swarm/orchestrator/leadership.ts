import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import type { ClusterStore, Compare, LeaderKey } from '../store/cluster-store.js';
import type { Clock } from './clock.js';

/**
 * Leadership of the control loops: a campaign on `P/election` under a lease (TTL 3 × etcd's
 * election timeout) kept alive at a third of its TTL. Once elected, `guard()` is the condition
 * every write of the loops carries: "my election key still exists with my create revision", so
 * that a deposed leader's late write fails and changes nothing. When the lease cannot be kept
 * alive (or a guarded write finds the key gone), leadership is lost and the campaign starts over.
 */
export interface LeadershipOptions {
  store: ClusterStore;
  /** What the election key holds: the leader's node ID and cluster API address. */
  value: string;
  ttlSeconds: number;
  clock: Clock;
  log: Logger;
  onElected(leader: LeaderKey): void;
  onLost(): void;
}

export class Leadership {
  private lease?: string;
  private leader?: LeaderKey;
  private stopped = false;
  private cancelKeepAlive?: () => void;
  private cancelRetry?: () => void;
  /** Bumped at every new campaign: a late answer of an older one is ignored. */
  private round = 0;

  constructor(private readonly opts: LeadershipOptions) {}

  start(): void {
    this.stopped = false;
    void this.campaign();
  }

  get current(): LeaderKey | undefined {
    return this.leader;
  }

  /** The compare every write of an elected leader carries. */
  guard(): Compare | undefined {
    const l = this.leader;
    return l ? { key: l.key, target: 'create', op: 'equal', value: l.revision } : undefined;
  }

  /** A guarded write found the election key gone or replaced: this node no longer leads. */
  deposed(): void {
    if (!this.leader) return;
    this.opts.log.warn('leadership lost: the election key is gone');
    this.lose();
    void this.restart();
  }

  /** Resigns (the next manager's campaign wins at once) and ends the lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.round++;
    this.cancelKeepAlive?.();
    this.cancelRetry?.();
    const leader = this.leader;
    const lease = this.lease;
    this.leader = undefined;
    this.lease = undefined;
    const { store } = this.opts;
    if (leader) await store.resign(leader).catch(() => {});
    if (lease) await store.revokeLease(lease).catch(() => {});
  }

  private async campaign(): Promise<void> {
    const round = ++this.round;
    const { store, ttlSeconds, value, log } = this.opts;
    try {
      const lease = await store.grantLease(ttlSeconds);
      if (round !== this.round) {
        await store.revokeLease(lease.id).catch(() => {});
        return;
      }
      this.lease = lease.id;
      this.keepAlive(round, lease.id);
      const leader = await store.campaign(keys.election, lease.id, value);
      if (round !== this.round) {
        await store.resign(leader).catch(() => {});
        return;
      }
      this.leader = leader;
      log.info('elected to run the control loops', { key: leader.key, revision: leader.revision });
      this.opts.onElected(leader);
    } catch (err) {
      if (round !== this.round || this.stopped) return;
      log.debug('campaign failed; trying again', { error: errorMessage(err) });
      this.retryLater(round);
    }
  }

  private keepAlive(round: number, lease: string): void {
    const periodMs = Math.max(100, (this.opts.ttlSeconds * 1000) / 3);
    const tick = async (): Promise<void> => {
      if (round !== this.round) return;
      let ttl: number;
      try {
        ttl = await this.opts.store.keepAlive(lease);
      } catch (err) {
        // the store is away: the lease may still live; try again next period
        this.opts.log.debug('lease keepalive failed', { error: errorMessage(err) });
        ttl = -1;
      }
      if (round !== this.round) return;
      if (ttl === 0) {
        this.opts.log.warn('the election lease expired');
        this.lose();
        void this.restart();
        return;
      }
      this.cancelKeepAlive = this.opts.clock.after(periodMs, () => void tick());
    };
    this.cancelKeepAlive = this.opts.clock.after(periodMs, () => void tick());
  }

  private lose(): void {
    this.cancelKeepAlive?.();
    this.round++;
    const was = this.leader;
    this.leader = undefined;
    if (was) this.opts.onLost();
  }

  private async restart(): Promise<void> {
    const lease = this.lease;
    this.lease = undefined;
    if (lease) await this.opts.store.revokeLease(lease).catch(() => {});
    if (!this.stopped) void this.campaign();
  }

  private retryLater(round: number): void {
    this.cancelRetry = this.opts.clock.after(1000, () => {
      if (round === this.round && !this.stopped) void this.campaign();
    });
  }
}
