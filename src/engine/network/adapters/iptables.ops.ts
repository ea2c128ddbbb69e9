import { systemError } from '../../../common/errors.js';
import { runTool, type ToolResult } from '../../../common/host/run-tool.js';

/**
 * The engine's own iptables rules for its bridges, as dockerd's for docker0 and its user-defined
 * networks, but in chains of berth's own (so that another engine's or dockerd's rules are never
 * touched): FORWARD jumps to BERTH-ISOLATION-STAGE-1 then BERTH-FORWARD (two rules, made once per
 * host under the host lock, removed with the chains when the last bridge's rules go).
 * - BERTH-FORWARD: a bridge forwards out (not when Internal), replies come back, and its containers
 *   talk to each other (enable_icc; DROP when false: bridged traffic goes through iptables with
 *   br_netfilter, which the engine loads).
 * - BERTH-ISOLATION-STAGE-1/2 (dockerd's DOCKER-ISOLATION chains): what leaves a berth bridge for
 *   another berth bridge is dropped; an Internal network's traffic never leaves its block.
 * - nat POSTROUTING: one MASQUERADE rule per block for what leaves it through another interface
 *   (not for Internal networks or enable_ip_masquerade=false).
 * An EnableIPv6 network gets the same filter rules in ip6tables (chains of the same names).
 * Every per-bridge rule carries the comment `berth bridge <name>`. Unit tests substitute a fake;
 * the engine runs iptables and iptables-restore (no shell).
 */
export interface FirewallOps {
  /** Make the rules of `bridge` what `policy` says (idempotent; stale rules of the bridge go). */
  allowBridge(bridge: string, subnet: string, policy?: BridgePolicy): Promise<void>;
  /** Remove every rule berth made for `bridge`. */
  removeBridge(bridge: string): Promise<void>;
}

/** How a bridge network is fenced (the default bridge: every block forwarded and masqueraded). */
export interface BridgePolicy {
  /** Every IPv4 block of the network (the first is `subnet`). */
  subnets?: string[];
  /**
   * The IPv6 block of an EnableIPv6 network: the same forwarding and isolation rules in ip6tables
   * (no IPv6 NAT: dockerd 20.10 routes a container's IPv6 address as it is).
   */
  subnets6?: string[];
  internal?: boolean;
  icc?: boolean;
  masquerade?: boolean;
}

export const FORWARD_CHAIN = 'BERTH-FORWARD';
export const ISOLATION_1 = 'BERTH-ISOLATION-STAGE-1';
export const ISOLATION_2 = 'BERTH-ISOLATION-STAGE-2';
const BASE_COMMENT = 'berth';

function run(cmd: string, args: string[], input?: string): Promise<ToolResult> {
  return runTool(cmd, args, { input, stdout: true });
}

/** The comment marking the engine's rules of one bridge. */
export function bridgeComment(bridge: string): string {
  return `berth bridge ${bridge}`;
}

/** FORWARD's jumps into berth's chains (iptables-save form, without -A/-I), in order. */
export function baseJumps(): string[] {
  const c = `-m comment --comment ${BASE_COMMENT}`;
  return [`FORWARD ${c} -j ${ISOLATION_1}`, `FORWARD ${c} -j ${FORWARD_CHAIN}`];
}

/** The filter rules (iptables-save form, without -A/-I) of one bridge. */
export function forwardRules(bridge: string, policy: BridgePolicy = {}, subnet = ''): string[] {
  const c = `-m comment --comment "${bridgeComment(bridge)}"`;
  const subnets = policy.subnets?.length ? policy.subnets : subnet ? [subnet] : [];
  const out = [
    `${FORWARD_CHAIN} -o ${bridge} -m conntrack --ctstate RELATED,ESTABLISHED ${c} -j ACCEPT`,
    `${FORWARD_CHAIN} -i ${bridge} -o ${bridge} ${c} -j ${policy.icc === false ? 'DROP' : 'ACCEPT'}`,
  ];
  if (!policy.internal) out.push(`${FORWARD_CHAIN} -i ${bridge} ! -o ${bridge} ${c} -j ACCEPT`);
  if (policy.internal) {
    for (const s of subnets) {
      out.push(`${ISOLATION_1} -i ${bridge} ! -d ${s} ${c} -j DROP`);
      out.push(`${ISOLATION_1} -o ${bridge} ! -s ${s} ${c} -j DROP`);
    }
  }
  out.push(`${ISOLATION_1} -i ${bridge} ! -o ${bridge} ${c} -j ${ISOLATION_2}`);
  out.push(`${ISOLATION_2} -o ${bridge} ${c} -j DROP`);
  return out;
}

/** The nat rules (iptables-save form, without -A/-I) that masquerade what leaves the bridge's blocks. */
export function masqueradeRules(bridge: string, subnet: string, policy: BridgePolicy = {}): string[] {
  if (policy.internal || policy.masquerade === false) return [];
  const subnets = policy.subnets?.length ? policy.subnets : [subnet];
  return subnets.map(
    (s) => `POSTROUTING -s ${s} ! -o ${bridge} -m comment --comment "${bridgeComment(bridge)}" -j MASQUERADE`,
  );
}

/** The nat rule of the default bridge's block (one block, masqueraded). */
export function masqueradeRule(bridge: string, subnet: string): string {
  return masqueradeRules(bridge, subnet)[0] ?? '';
}

/**
 * The iptables-restore input for one table that deletes the rules of `have` (`iptables -S`
 * output) carrying the bridge's comment but not in `want`, and adds those of `want` missing
 * (inserted first, in order); undefined when nothing is to change.
 */
export function ruleUpdate(table: string, have: string, want: string[], bridge: string): string | undefined {
  const lines = have.split('\n');
  const stale = lines.filter(
    (l) => l.startsWith('-A ') && l.includes(`"${bridgeComment(bridge)}"`) && !want.includes(l.slice(3)),
  );
  const missing = want.filter((r) => !lines.includes(`-A ${r}`));
  if (!stale.length && !missing.length) return undefined;
  const position = new Map<string, number>();
  const inserts = missing.map((r) => {
    const chain = r.slice(0, r.indexOf(' '));
    const at = (position.get(chain) ?? 0) + 1;
    position.set(chain, at);
    return `-I ${chain} ${at}${r.slice(chain.length)}`;
  });
  return [`*${table}`, ...stale.map((l) => `-D ${l.slice(3)}`), ...inserts, 'COMMIT', ''].join('\n');
}

/** Whether berth's chains hold no rule of any bridge (`iptables -S` of the filter table). */
export function chainsEmpty(filter: string): boolean {
  return !filter
    .split('\n')
    .some((l) => [FORWARD_CHAIN, ISOLATION_1, ISOLATION_2].some((c) => l.startsWith(`-A ${c} `)));
}

export class HostFirewallOps implements FirewallOps {
  private readonly v6: FamilyFirewall;
  private readonly v4: FamilyFirewall;
  /**
   * `lock`: runs its argument holding the host-wide lock (the base chains are made once per host
   * and torn down by the last bridge's removal, by whichever engine or tool removes it).
   */
  constructor(lock: <T>(fn: () => Promise<T>) => Promise<T>) {
    this.v4 = new FamilyFirewall(lock, 'iptables');
    this.v6 = new FamilyFirewall(lock, 'ip6tables');
  }

  async allowBridge(bridge: string, subnet: string, policy: BridgePolicy = {}): Promise<void> {
    await this.v4.allowBridge(bridge, subnet, policy);
    const v6 = policy.subnets6 ?? [];
    if (v6.length) {
      await this.v6.allowBridge(bridge, v6[0] ?? '', {
        subnets: v6,
        internal: policy.internal,
        icc: policy.icc,
        masquerade: false,
      });
    } else if (await this.v6.hasRules(bridge)) await this.v6.removeBridge(bridge);
  }

  async removeBridge(bridge: string): Promise<void> {
    await this.v4.removeBridge(bridge);
    if (await this.v6.hasRules(bridge)) await this.v6.removeBridge(bridge);
  }
}

/** The rules of one family: `iptables` or `ip6tables` (and their -restore). */
class FamilyFirewall {
  constructor(
    private readonly lock: <T>(fn: () => Promise<T>) => Promise<T>,
    private readonly tool: 'iptables' | 'ip6tables',
  ) {}

  /** Whether any filter rule carries the bridge's comment (ip6tables absent: none). */
  async hasRules(bridge: string): Promise<boolean> {
    const r = await run(this.tool, ['-w', '-S']).catch(() => undefined);
    return !!r && r.code === 0 && r.stdout.includes(`"${bridgeComment(bridge)}"`);
  }

  /** The base chains and jumps; the caller holds the host lock. */
  private async ensureBaseLocked(): Promise<void> {
    for (const chain of [FORWARD_CHAIN, ISOLATION_1, ISOLATION_2]) {
      const r = await run(this.tool, ['-w', '-N', chain]);
      if (r.code !== 0 && !/exists/i.test(r.stderr))
        throw systemError(`${this.tool} -N ${chain}: ${r.stderr}`);
    }
    const forward = await run(this.tool, ['-w', '-S', 'FORWARD']);
    if (forward.code !== 0) throw systemError(`${this.tool} -S FORWARD: ${forward.stderr}`);
    const lines = forward.stdout.split('\n').filter((l) => l.startsWith('-A '));
    const want = baseJumps().map((j) => `-A ${j}`);
    // there, in order (another engine, dockerd, may have put its own rules above since): kept
    const [isolation, forwarding] = want.map((w) => lines.indexOf(w ?? ''));
    if (isolation !== undefined && forwarding !== undefined && isolation >= 0 && isolation < forwarding)
      return;
    const input = [
      '*filter',
      ...lines.filter((l) => want.includes(l)).map((l) => `-D ${l.slice(3)}`),
      ...baseJumps().map((j, i) => `-I FORWARD ${i + 1}${j.slice('FORWARD'.length)}`),
      'COMMIT',
      '',
    ].join('\n');
    const r = await run(`${this.tool}-restore`, ['-w', '--noflush'], input);
    if (r.code !== 0) throw systemError(`cannot add berth's FORWARD jumps: ${r.stderr}`);
  }

  /**
   * The bridge's rules, with the base chains they go in, under the host lock: another engine's
   * removal of the last bridge's chains (removeBaseWhenUnused) cannot fall between the two.
   */
  allowBridge(bridge: string, subnet: string, policy: BridgePolicy = {}): Promise<void> {
    return this.lock(async () => {
      await this.ensureBaseLocked();
      await this.addBridgeRules(bridge, subnet, policy);
    });
  }

  private async addBridgeRules(bridge: string, subnet: string, policy: BridgePolicy): Promise<void> {
    const [filter, nat] = await Promise.all([
      run(this.tool, ['-w', '-S']),
      run(this.tool, ['-w', '-t', 'nat', '-S', 'POSTROUTING']),
    ]);
    if (filter.code !== 0) throw systemError(`${this.tool} -S: ${filter.stderr}`);
    if (nat.code !== 0) throw systemError(`${this.tool} -t nat -S POSTROUTING: ${nat.stderr}`);
    const updates = [
      ruleUpdate('filter', filter.stdout, forwardRules(bridge, policy, subnet), bridge),
      ruleUpdate('nat', nat.stdout, masqueradeRules(bridge, subnet, policy), bridge),
    ].filter((u): u is string => u !== undefined);
    if (!updates.length) return;
    const r = await run(`${this.tool}-restore`, ['-w', '--noflush'], updates.join(''));
    if (r.code !== 0) throw systemError(`cannot add the iptables rules of bridge ${bridge}: ${r.stderr}`);
  }

  async removeBridge(bridge: string): Promise<void> {
    const [filter, nat] = await Promise.all([
      run(this.tool, ['-w', '-S']),
      run(this.tool, ['-w', '-t', 'nat', '-S', 'POSTROUTING']),
    ]);
    const input = [
      ruleUpdate('filter', filter.stdout, [], bridge),
      ruleUpdate('nat', nat.stdout, [], bridge),
    ].filter((u): u is string => u !== undefined);
    if (input.length) {
      const r = await run(`${this.tool}-restore`, ['-w', '--noflush'], input.join(''));
      if (r.code !== 0)
        throw systemError(`cannot remove the iptables rules of bridge ${bridge}: ${r.stderr}`);
    }
    await this.removeBaseWhenUnused();
  }

  /** The jumps and chains go with the last bridge's rules (one transaction: a racing add wins). */
  private async removeBaseWhenUnused(): Promise<void> {
    await this.lock(async () => {
      const filter = await run(this.tool, ['-w', '-S']);
      if (filter.code !== 0 || !chainsEmpty(filter.stdout)) return;
      const lines = filter.stdout.split('\n');
      if (!lines.some((l) => l === `-N ${FORWARD_CHAIN}`)) return;
      const jumps = baseJumps().filter((j) => lines.includes(`-A ${j}`));
      const input = [
        '*filter',
        ...jumps.map((j) => `-D ${j}`),
        ...[FORWARD_CHAIN, ISOLATION_1, ISOLATION_2]
          .filter((c) => lines.includes(`-N ${c}`))
          .map((c) => `-X ${c}`),
        'COMMIT',
        '',
      ].join('\n');
      await run(`${this.tool}-restore`, ['-w', '--noflush'], input);
    });
  }
}
