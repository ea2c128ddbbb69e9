import { notFound } from '../../../common/errors.js';
import type { ServiceLb, VipBackendSet } from './lb.types.js';
import { HostNftOps, type NftOps, namespaceId } from './nft.ops.js';
import { deleteTable } from './nft-script.js';
import { VIP_TABLE, vipTableScript } from './vip-rules.js';

/** What the engine last wrote in one namespace. */
interface Applied {
  /** The namespace's identity when it was written (a path reused by a new namespace differs). */
  ns: string;
  script: string;
}

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
}

/** One namespace's writes: the table last asked for (with everyone waiting on it), a writer running. */
interface Slot {
  want?: { script: string; mustExist: boolean; waiters: Waiter[] };
  running: boolean;
}

/** How many nft processes run at once (the agent may touch every container of a node together). */
export const DEFAULT_NFT_PARALLEL = 4;

/**
 * ServiceLb on nftables (vip-rules.ts): one `nft -f` per change of a namespace's table, none when
 * the table asked for is the one the engine last wrote there (same namespace, same script).
 * Calls for one namespace are written one after the other, and a call overtaken by a later one
 * while it waited is not written at all: it resolves with the later one (the last asked for is
 * what stays). At most `parallel` nft processes run at once. A namespace that is gone: apply is
 * notFound, clear has nothing to do.
 */
export class NftServiceLb implements ServiceLb {
  private readonly applied = new Map<string, Applied>();
  private readonly slots = new Map<string, Slot>();
  private running = 0;
  private readonly queued: Array<() => void> = [];

  constructor(
    private readonly nft: NftOps = new HostNftOps(),
    private readonly identify: (path: string) => Promise<string | undefined> = namespaceId,
    private readonly parallel = DEFAULT_NFT_PARALLEL,
  ) {}

  async apply(sandboxKey: string, vips: VipBackendSet[]): Promise<void> {
    const script = vipTableScript(vips); // bad input fails before anything is queued
    return this.enqueue(sandboxKey, script, true);
  }

  clear(sandboxKey: string): Promise<void> {
    return this.enqueue(sandboxKey, deleteTable(VIP_TABLE), false);
  }

  private enqueue(key: string, script: string, mustExist: boolean): Promise<void> {
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { running: false };
      this.slots.set(key, slot);
    }
    const s = slot;
    return new Promise<void>((resolve, reject) => {
      const waiters = s.want?.waiters ?? [];
      waiters.push({ resolve, reject });
      s.want = { script, mustExist, waiters };
      if (!s.running) void this.drain(key, s);
    });
  }

  private async drain(key: string, slot: Slot): Promise<void> {
    slot.running = true;
    while (slot.want) {
      const w = slot.want;
      slot.want = undefined;
      try {
        await this.write(key, w.script, w.mustExist);
        for (const x of w.waiters) x.resolve();
      } catch (err) {
        for (const x of w.waiters) x.reject(err);
      }
    }
    slot.running = false;
    this.slots.delete(key);
  }

  private async write(sandboxKey: string, script: string, mustExist: boolean): Promise<void> {
    const ns = await this.identify(sandboxKey);
    if (ns === undefined) {
      this.applied.delete(sandboxKey);
      if (mustExist) throw notFound(`network namespace ${sandboxKey} not found`);
      return;
    }
    const last = this.applied.get(sandboxKey);
    if (last && last.ns === ns && last.script === script) return;
    this.applied.delete(sandboxKey); // unknown until nft answers
    await this.limited(() => this.nft.run(sandboxKey, script));
    // a cleared namespace is usually about to go: nothing kept for it (a second clear runs again)
    if (mustExist) this.applied.set(sandboxKey, { ns, script });
  }

  private async limited(fn: () => Promise<void>): Promise<void> {
    if (this.running >= this.parallel) await new Promise<void>((r) => this.queued.push(r));
    this.running++;
    try {
      await fn();
    } finally {
      this.running--;
      this.queued.shift()?.();
    }
  }
}
