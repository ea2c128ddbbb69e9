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

/**
 * ServiceLb on nftables (vip-rules.ts): one `nft -f` per change of a namespace's table, none when
 * the table asked for is the one the engine last wrote there (same namespace, same script).
 * Calls for one namespace run one after the other, in the order they came, so the last asked for
 * is what stays. A namespace that is gone: apply is notFound, clear has nothing to do.
 */
export class NftServiceLb implements ServiceLb {
  private readonly applied = new Map<string, Applied>();
  private readonly queues = new Map<string, Promise<void>>();

  constructor(
    private readonly nft: NftOps = new HostNftOps(),
    private readonly identify: (path: string) => Promise<string | undefined> = namespaceId,
  ) {}

  async apply(sandboxKey: string, vips: VipBackendSet[]): Promise<void> {
    const script = vipTableScript(vips); // bad input fails before anything is queued
    return this.serial(sandboxKey, () => this.write(sandboxKey, script, true));
  }

  clear(sandboxKey: string): Promise<void> {
    return this.serial(sandboxKey, () => this.write(sandboxKey, deleteTable(VIP_TABLE), false));
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
    await this.nft.run(sandboxKey, script);
    // a cleared namespace is usually about to go: nothing kept for it (a second clear runs again)
    if (mustExist) this.applied.set(sandboxKey, { ns, script });
  }

  private serial(key: string, fn: () => Promise<void>): Promise<void> {
    const prev = this.queues.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return next;
  }
}
