import type { AddedInterface } from './cni.config.js';
import type { BridgePlumbing } from './network.types.js';

/**
 * Sandboxes made ahead of the starts that take them (docs/networking.md, "Sandboxes made
 * ahead"): one bare namespace (`lo` up) for any start, and per busy bridge network a few
 * namespaces already plumbed into the bridge with the addresses dockerd's IPAM would hand out
 * next (veth pair, `eth0` with its address, MAC and routes), so that a start on the network
 * costs no process at all. The network service owns the host calls and the address book; this
 * keeps the books of what is made ahead and decides when to make or drop it.
 */

/** Plumbed sandboxes kept per busy network. */
export const POOL_SIZE = 2;
/** A network with no start for this long has its pool drained (nothing kept for networks not in use). */
export const POOL_IDLE_MS = 60_000;
/** Starts within POOL_IDLE_MS that make a user-defined network busy (the default bridge: its first). */
export const USER_NETWORK_BUSY_STARTS = 2;
/** How long after a start the pool is made up again (not while that start needs the CPU). */
export const REFILL_DELAY_MS = 200;

/** A namespace made by the network service (its file bound, `lo` up once `ready`). */
export interface MadeSandbox {
  sandboxId: string;
  sandboxKey: string;
  ready: Promise<void>;
}

/** A sandbox plumbed into a network ahead of a start, holding one address. */
export interface PooledSandbox extends MadeSandbox {
  networkId: string;
  ip: string;
  /** The bridge it is plugged into (the endpoint's, and what its removal needs). */
  plumbing: BridgePlumbing;
  /** What the bridge plugin's ADD gave `eth0` (rejects when it failed). */
  plumbed: Promise<AddedInterface>;
}

/** What the pool asks of the network service. */
export interface PoolHooks {
  /** A new namespace (unshare, lo up), already counted as the engine's. */
  newSandbox(): MadeSandbox;
  /**
   * The network's `count` addresses IPAM would hand out next, pooled addresses counted free
   * (undefined: the network is gone, or is not one the pool serves).
   */
  nextAddresses(networkId: string, count: number): string[] | undefined;
  /** Plumb a pool sandbox into the network with `ip` (the address reserved synchronously). */
  plumb(sandbox: MadeSandbox, networkId: string, ip: string): PooledSandbox;
  /** Undo a pool sandbox (after its ADD settled): namespace, veth, address. */
  discard(entry: PooledSandbox): Promise<void>;
  warn(message: string, fields: Record<string, string>): void;
}

export class SandboxPool {
  private readonly entries = new Map<string, PooledSandbox[]>();
  private readonly starts = new Map<string, number[]>();
  /** Networks with enough recent starts to keep a pool. */
  private readonly busyNetworks = new Set<string>();
  private readonly idleTimers = new Map<string, NodeJS.Timeout>();
  private readonly refillTimers = new Map<string, NodeJS.Timeout>();
  /** Pooled sandboxes being undone, by sandbox ID (their addresses are free once that is done). */
  private readonly discarding = new Map<string, Promise<void>>();
  private spare: MadeSandbox | undefined;
  private spareTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Set once the engine's start swept what an engine before left (the address book is whole). */
  enabled = false;

  constructor(
    private readonly hooks: PoolHooks,
    private readonly size = POOL_SIZE,
    private readonly now = () => Date.now(),
  ) {}

  /** The sandbox IDs held by the pool (their addresses count as free for a start). */
  holds(sandboxId: string): boolean {
    for (const list of this.entries.values()) if (list.some((e) => e.sandboxId === sandboxId)) return true;
    return false;
  }

  /** The removal under way of a sandbox the pool dropped. */
  leaving(sandboxId: string): Promise<void> | undefined {
    return this.discarding.get(sandboxId);
  }

  /** The pooled sandboxes of a network (tests, and the hand-off's choice). */
  of(networkId: string): readonly PooledSandbox[] {
    return this.entries.get(networkId) ?? [];
  }

  /**
   * A start on `networkId` (its main network): counted for the network's busyness; the pool is
   * made up a moment later and drained once the network has been idle for POOL_IDLE_MS.
   */
  noteStart(networkId: string, user: boolean): void {
    if (this.closed || this.size <= 0) return;
    const t = this.now();
    const recent = (this.starts.get(networkId) ?? []).filter((s) => t - s < POOL_IDLE_MS);
    recent.push(t);
    this.starts.set(networkId, recent.slice(-USER_NETWORK_BUSY_STARTS));
    const idle = this.idleTimers.get(networkId);
    if (idle) clearTimeout(idle);
    const timer = setTimeout(() => {
      this.idleTimers.delete(networkId);
      this.starts.delete(networkId);
      this.busyNetworks.delete(networkId);
      void this.drain(networkId);
    }, POOL_IDLE_MS);
    timer.unref();
    this.idleTimers.set(networkId, timer);
    if (recent.length >= (user ? USER_NETWORK_BUSY_STARTS : 1)) {
      this.busyNetworks.add(networkId);
      this.refillLater(networkId);
    }
  }

  private busy(networkId: string): boolean {
    return this.busyNetworks.has(networkId);
  }

  /** Take the pooled sandbox holding `ip` on the network (synchronously: it is the caller's). */
  take(networkId: string, ip: string): PooledSandbox | undefined {
    const list = this.entries.get(networkId);
    const i = list?.findIndex((e) => e.ip === ip) ?? -1;
    if (!list || i < 0) return undefined;
    const [entry] = list.splice(i, 1);
    return entry;
  }

  /**
   * A start wants `ip`, which a pooled sandbox holds but cannot be handed over (another MAC, or a
   * sandbox already chosen): that one is dropped; resolves once its address is free.
   */
  evict(networkId: string, ip: string): Promise<void> {
    const entry = this.take(networkId, ip);
    if (!entry) return Promise.resolve();
    return this.dispose(entry);
  }

  private dispose(entry: PooledSandbox): Promise<void> {
    const work = entry.plumbed
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => this.hooks.discard(entry))
      .catch((err: unknown) =>
        this.hooks.warn('cannot remove a pooled network sandbox', {
          sandbox: entry.sandboxId,
          error: err instanceof Error ? err.message : String(err),
        }),
      );
    this.discarding.set(entry.sandboxId, work);
    void work.finally(() => this.discarding.delete(entry.sandboxId));
    return work;
  }

  private refillLater(networkId: string): void {
    if (this.refillTimers.has(networkId)) return;
    const timer = setTimeout(() => {
      this.refillTimers.delete(networkId);
      this.refill(networkId);
    }, REFILL_DELAY_MS);
    timer.unref();
    this.refillTimers.set(networkId, timer);
  }

  /**
   * Make the network's pool the `size` addresses IPAM would hand out next: a sandbox whose
   * address is no longer among them (a lower one was freed) is dropped, the missing ones made.
   * Called a moment after a start and at once when an address of the network is released.
   */
  refill(networkId: string): void {
    if (this.closed || !this.enabled || this.size <= 0 || !this.busy(networkId)) return;
    const wanted = this.hooks.nextAddresses(networkId, this.size);
    if (!wanted) return;
    const list = this.entries.get(networkId) ?? [];
    for (const e of [...list]) {
      if (!wanted.includes(e.ip)) void this.evict(networkId, e.ip);
    }
    const kept = this.entries.get(networkId) ?? [];
    for (const ip of wanted) {
      if (kept.some((e) => e.ip === ip)) continue;
      // the namespace made ahead, when there is one: only the ADD is left to wait for
      const entry = this.hooks.plumb(this.takeNamespace(), networkId, ip);
      kept.push(entry);
      // an ADD that failed: the sandbox goes (the next start plumbs one of its own)
      entry.plumbed.catch((err: unknown) => {
        if (!this.take(networkId, entry.ip)) return;
        this.hooks.warn('cannot plumb a pooled network sandbox', {
          address: entry.ip,
          error: err instanceof Error ? err.message : String(err),
        });
        void this.dispose(entry);
      });
    }
    this.entries.set(networkId, kept);
  }

  /** The network's pool emptied (network removed, or idle); resolves once all is undone. */
  async drain(networkId: string): Promise<void> {
    const list = this.entries.get(networkId) ?? [];
    this.entries.delete(networkId);
    const timer = this.refillTimers.get(networkId);
    if (timer) clearTimeout(timer);
    this.refillTimers.delete(networkId);
    await Promise.all(list.map((e) => this.dispose(e)));
  }

  /** The network is gone: drained, and no longer counted busy. */
  async forget(networkId: string): Promise<void> {
    this.starts.delete(networkId);
    this.busyNetworks.delete(networkId);
    const idle = this.idleTimers.get(networkId);
    if (idle) clearTimeout(idle);
    this.idleTimers.delete(networkId);
    await this.drain(networkId);
  }

  /**
   * The bare namespace for a start the pool does not serve (made ahead once a start took the
   * last one); one that could not be made is made again on the start's path.
   */
  takeNamespace(): MadeSandbox {
    const made = this.spare;
    this.spare = undefined;
    if (!this.spareTimer && !this.closed) {
      this.spareTimer = setTimeout(() => {
        this.spareTimer = undefined;
        if (!this.spare && !this.closed) this.spare = this.hooks.newSandbox();
      }, REFILL_DELAY_MS);
      this.spareTimer.unref();
    }
    return made ?? this.hooks.newSandbox();
  }

  /** Engine shutdown: nothing more is made; the spare and every pooled sandbox are undone. */
  async close(removeSpare: (s: MadeSandbox) => Promise<void>): Promise<void> {
    this.closed = true;
    if (this.spareTimer) clearTimeout(this.spareTimer);
    for (const t of [...this.idleTimers.values(), ...this.refillTimers.values()]) clearTimeout(t);
    this.idleTimers.clear();
    this.refillTimers.clear();
    const left = this.spare;
    this.spare = undefined;
    const work: Array<Promise<unknown>> = [...this.entries.keys()].map((id) => this.drain(id));
    if (left) work.push(removeSpare(left));
    work.push(...this.discarding.values());
    await Promise.allSettled(work);
  }
}
