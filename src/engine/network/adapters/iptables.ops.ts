import { systemError } from '../../../common/errors.js';
import { runTool, type ToolResult } from '../../../common/host/run-tool.js';

/**
 * The engine's own iptables rules for its bridge, as dockerd's for docker0: forwarding to and from
 * the bridge (so that containers keep talking when the FORWARD policy is DROP, as dockerd leaves
 * it), and one MASQUERADE rule for what leaves the bridge's block through another interface (the
 * CNI bridge plugin's per-container ipMasq chains cost iptables calls on every start and stop).
 * Unit tests substitute a fake; the engine runs iptables and iptables-restore (no shell).
 */
export interface FirewallOps {
  /** Accept what the bridge forwards and the replies to it, masquerade what leaves `subnet` (idempotent). */
  allowBridge(bridge: string, subnet: string): Promise<void>;
  /** Remove every rule berth made for `bridge` (FORWARD and MASQUERADE). */
  removeBridge(bridge: string): Promise<void>;
}

function run(cmd: string, args: string[], input?: string): Promise<ToolResult> {
  return runTool(cmd, args, { input, stdout: true });
}

/** The comment marking the engine's FORWARD rules of one bridge. */
export function bridgeComment(bridge: string): string {
  return `berth bridge ${bridge}`;
}

/** The rules (iptables-save form, without -A/-I) that let a bridge forward. */
export function forwardRules(bridge: string): string[] {
  const c = `-m comment --comment "${bridgeComment(bridge)}"`;
  return [
    `FORWARD -i ${bridge} ${c} -j ACCEPT`,
    `FORWARD -o ${bridge} -m conntrack --ctstate RELATED,ESTABLISHED ${c} -j ACCEPT`,
  ];
}

/** The nat rule (iptables-save form, without -A/-I) that masquerades what leaves the bridge's block. */
export function masqueradeRule(bridge: string, subnet: string): string {
  return `POSTROUTING -s ${subnet} ! -o ${bridge} -m comment --comment "${bridgeComment(bridge)}" -j MASQUERADE`;
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

export class HostFirewallOps implements FirewallOps {
  async allowBridge(bridge: string, subnet: string): Promise<void> {
    const [filter, nat] = await Promise.all([
      run('iptables', ['-w', '-S', 'FORWARD']),
      run('iptables', ['-w', '-t', 'nat', '-S', 'POSTROUTING']),
    ]);
    if (filter.code !== 0) throw systemError(`iptables -S FORWARD: ${filter.stderr}`);
    if (nat.code !== 0) throw systemError(`iptables -t nat -S POSTROUTING: ${nat.stderr}`);
    const updates = [
      ruleUpdate('filter', filter.stdout, forwardRules(bridge), bridge),
      ruleUpdate('nat', nat.stdout, [masqueradeRule(bridge, subnet)], bridge),
    ].filter((u): u is string => u !== undefined);
    if (!updates.length) return;
    const r = await run('iptables-restore', ['-w', '--noflush'], updates.join(''));
    if (r.code !== 0) throw systemError(`cannot add the iptables rules of bridge ${bridge}: ${r.stderr}`);
  }

  async removeBridge(bridge: string): Promise<void> {
    const [filter, nat] = await Promise.all([
      run('iptables', ['-w', '-S', 'FORWARD']),
      run('iptables', ['-w', '-t', 'nat', '-S', 'POSTROUTING']),
    ]);
    const input = [
      ruleUpdate('filter', filter.stdout, [], bridge),
      ruleUpdate('nat', nat.stdout, [], bridge),
    ].filter((u): u is string => u !== undefined);
    if (!input.length) return;
    const r = await run('iptables-restore', ['-w', '--noflush'], input.join(''));
    if (r.code !== 0) throw systemError(`cannot remove the iptables rules of bridge ${bridge}: ${r.stderr}`);
  }
}
