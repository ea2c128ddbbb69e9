import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import type { ClusterStore, Lease } from '../store/cluster-store.js';

/**
 * A manager's own liveness: `P/live/<node>` under a lease of 3 × the dispatcher heartbeat,
 * renewed every heartbeat. Its expiry is how the cluster learns the node is down.
 */
export class OwnLiveness {
  private lease?: Lease;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly store: ClusterStore,
    private readonly nodeId: string,
    private readonly addr: string,
    private readonly log: Logger,
  ) {}

  async start(periodMs: number): Promise<void> {
    this.stop();
    const ttl = Math.max(1, Math.ceil((3 * periodMs) / 1000));
    this.lease = await this.store.grantLease(ttl);
    await this.store.put(keys.live(this.nodeId), this.addr, { lease: this.lease.id });
    this.timer = setInterval(() => void this.renew(ttl), periodMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stops, and lets the key go at once (the node then shows down), when the store answers. */
  async revoke(): Promise<void> {
    const lease = this.lease;
    this.stop();
    this.lease = undefined;
    if (lease) await this.store.revokeLease(lease.id).catch(() => {});
  }

  private async renew(ttl: number): Promise<void> {
    const lease = this.lease;
    if (!lease || !this.timer) return;
    try {
      if ((await this.store.keepAlive(lease.id)) > 0) {
        // the key must still be ours: a manager's dispatcher may have put it under its own lease
        // (this node asked another manager while its member was cut off), which then lapses
        const kv = await this.store.get(keys.live(this.nodeId));
        if (kv?.lease === lease.id) return;
        await this.store.put(keys.live(this.nodeId), this.addr, { lease: lease.id });
        return;
      }
      // expired (the store was away too long): a new lease, the key again
      const fresh = await this.store.grantLease(ttl);
      await this.store.put(keys.live(this.nodeId), this.addr, { lease: fresh.id });
      if (this.lease === lease) this.lease = fresh;
    } catch (err) {
      this.log.debug('liveness renewal failed', { error: errorMessage(err) });
    }
  }
}
