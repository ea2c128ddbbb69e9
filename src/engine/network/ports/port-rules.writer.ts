import type { PortRuleOps } from '../adapters/port-rules.ops.js';
import { bridgeRulesInput, type PortRule, removalInput } from './port-rules.js';

/**
 * Writes the bridges' port rules (port-rules.ts) as the publisher's state stands when the write
 * runs: changes asked for together are batched into one iptables-restore; a release's write may
 * wait a little for the next change. It knows which bridges have their jumps and chains, and
 * which a failed write left unknown (cleaned from iptables-save before the next write).
 */
export class BridgeRulesWriter {
  /** Bridges whose jumps and chains are in place. */
  private readonly installed = new Set<string>();
  /** Bridges whose rules a failed write (or a crashed engine) left in an unknown state. */
  private readonly unsure = new Set<string>();
  /** Bridges' blocks (the hairpin masquerade). */
  private readonly subnets = new Map<string, string>();
  private dirty = new Set<string>();
  private waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private writing = false;
  /** A delayed write (releases only) is waiting. */
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly rules: PortRuleOps,
    /** The DNAT rules a bridge has now. */
    private readonly rulesOf: (bridge: string) => PortRule[],
  ) {}

  subnet(bridge: string, subnet: string): void {
    this.subnets.set(bridge, subnet);
  }

  /** What is on the host of this bridge is not known (engine start): cleaned before the next write. */
  unknown(bridge: string): void {
    this.installed.delete(bridge);
    this.unsure.add(bridge);
  }

  /** The bridge is gone (its rules were removed by other means). */
  forget(bridge: string): void {
    this.installed.delete(bridge);
    this.unsure.delete(bridge);
    this.subnets.delete(bridge);
  }

  /** Make a delayed write now (engine shutdown). */
  async flush(): Promise<void> {
    if (this.timer && !this.writing) await this.writeLoop().catch(() => undefined);
  }

  /**
   * Write the bridge's rules as they stand (batched with other bridges' changes), at once or,
   * for releases, within `delayMs` unless another change comes first.
   */
  sync(bridge: string, delayMs = 0): Promise<void> {
    this.dirty.add(bridge);
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (this.writing) return done;
    if (delayMs === 0) void this.writeLoop();
    else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        if (!this.writing) void this.writeLoop();
      }, delayMs);
    }
    return done;
  }

  private async writeLoop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.writing = true;
    try {
      while (this.dirty.size) {
        const bridges = [...this.dirty];
        this.dirty = new Set();
        const waiters = this.waiters;
        this.waiters = [];
        try {
          await this.write(bridges);
          for (const w of waiters) w.resolve();
        } catch (err) {
          for (const w of waiters) w.reject(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  private async write(bridges: string[]): Promise<void> {
    if (bridges.some((b) => this.unsure.has(b))) {
      const save = await this.rules.save();
      const cleanup = bridges
        .filter((b) => this.unsure.has(b))
        .map((b) => removalInput(save, b))
        .join('');
      if (cleanup) await this.rules.restore(cleanup);
      for (const b of bridges) {
        if (!this.unsure.delete(b)) continue;
        this.installed.delete(b);
        // route_localnet goes back with the rules; set again below if the bridge keeps some
        await this.rules.routeLocalnet(b, false).catch(() => undefined);
      }
    }
    const inputs: string[] = [];
    const changes: Array<{ bridge: string; on: boolean }> = [];
    for (const bridge of bridges) {
      const rules = this.rulesOf(bridge);
      const installed = this.installed.has(bridge);
      const subnet = this.subnets.get(bridge) ?? '0.0.0.0/32';
      inputs.push(bridgeRulesInput({ bridge, subnet, rules }, installed));
      if (rules.length && !installed) changes.push({ bridge, on: true });
      if (!rules.length && installed) changes.push({ bridge, on: false });
    }
    const input = inputs.join('');
    for (const c of changes) if (c.on) await this.rules.routeLocalnet(c.bridge, true);
    if (input) {
      try {
        await this.rules.restore(input);
      } catch (err) {
        for (const b of bridges) this.unsure.add(b);
        throw err;
      }
    }
    for (const c of changes) {
      if (c.on) this.installed.add(c.bridge);
      else {
        this.installed.delete(c.bridge);
        await this.rules.routeLocalnet(c.bridge, false).catch(() => undefined);
      }
    }
  }
}
