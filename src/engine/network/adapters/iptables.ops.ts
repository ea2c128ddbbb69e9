import { spawn } from 'node:child_process';
import { systemError } from '../../../common/errors.js';

/**
 * The engine's own iptables rules (the per-container masquerading is the CNI bridge plugin's):
 * forwarding to and from its bridge, as dockerd accepts it for docker0, so that containers keep
 * talking when the FORWARD policy is DROP (as dockerd leaves it). Unit tests substitute a fake;
 * the engine runs iptables and iptables-restore (no shell).
 */
export interface FirewallOps {
  /** Accept what the bridge forwards and the replies to it (idempotent). */
  allowBridge(bridge: string): Promise<void>;
  /**
   * Remove every rule berth made for `bridge`: its FORWARD rules, and the nat rules and chains
   * the bridge plugin's ipMasq left for the CNI network `cniName` (containers never released).
   */
  removeBridge(bridge: string, cniName: string): Promise<void>;
}

function run(
  cmd: string,
  args: string[],
  input?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (d: Buffer) => out.push(d));
    child.stderr?.on('data', (d: Buffer) => err.push(d));
    child.on('error', (e) => reject(systemError(`cannot run ${cmd}: ${e.message}`)));
    child.on('close', (code) =>
      resolve({
        code: code ?? -1,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8').trim(),
      }),
    );
    if (input !== undefined) {
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(input);
    }
  });
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

/**
 * The iptables-restore input that deletes the bridge plugin's ipMasq rules of CNI network
 * `cniName` from `iptables -t nat -S` output: the POSTROUTING jumps, then their chains.
 */
export function natCleanup(natRules: string, cniName: string): string | undefined {
  const marker = `--comment "name: \\"${cniName}\\" id: `;
  const lines: string[] = [];
  const chains = new Set<string>();
  for (const rule of natRules.split('\n')) {
    if (!rule.startsWith('-A POSTROUTING ') || !rule.includes(marker)) continue;
    lines.push(`-D ${rule.slice(3)}`);
    const jump = / -j (CNI-[0-9a-f]+)$/.exec(rule)?.[1];
    if (jump) chains.add(jump);
  }
  for (const chain of chains) lines.push(`-F ${chain}`, `-X ${chain}`);
  return lines.length ? `*nat\n${lines.join('\n')}\nCOMMIT\n` : undefined;
}

export class HostFirewallOps implements FirewallOps {
  async allowBridge(bridge: string): Promise<void> {
    const listed = await run('iptables', ['-w', '-S', 'FORWARD']);
    if (listed.code !== 0) throw systemError(`iptables -S FORWARD: ${listed.stderr}`);
    const have = listed.stdout.split('\n');
    const want = forwardRules(bridge);
    if (want.every((r) => have.includes(`-A ${r}`))) return;
    const stale = have.filter((l) => l.startsWith('-A ') && l.includes(`"${bridgeComment(bridge)}"`));
    const input = [
      '*filter',
      ...stale.map((l) => `-D ${l.slice(3)}`),
      ...want.map((r, i) => `-I ${r.replace(/^FORWARD /, `FORWARD ${i + 1} `)}`),
      'COMMIT',
      '',
    ].join('\n');
    const r = await run('iptables-restore', ['-w', '--noflush'], input);
    if (r.code !== 0) throw systemError(`cannot add the FORWARD rules of bridge ${bridge}: ${r.stderr}`);
  }

  async removeBridge(bridge: string, cniName: string): Promise<void> {
    const [filter, nat] = await Promise.all([
      run('iptables', ['-w', '-S', 'FORWARD']),
      run('iptables', ['-w', '-t', 'nat', '-S']),
    ]);
    const ours = filter.stdout
      .split('\n')
      .filter((l) => l.startsWith('-A ') && l.includes(`"${bridgeComment(bridge)}"`));
    if (ours.length) {
      const input = ['*filter', ...ours.map((l) => `-D ${l.slice(3)}`), 'COMMIT', ''].join('\n');
      const r = await run('iptables-restore', ['-w', '--noflush'], input);
      if (r.code !== 0) throw systemError(`cannot remove the FORWARD rules of bridge ${bridge}: ${r.stderr}`);
    }
    const natInput = natCleanup(nat.stdout, cniName);
    if (natInput) {
      const r = await run('iptables-restore', ['-w', '--noflush'], natInput);
      if (r.code !== 0) throw systemError(`cannot remove the nat rules of network ${cniName}: ${r.stderr}`);
    }
  }
}
