import type { PortProto } from './port-spec.js';

/**
 * The iptables rules that publish ports of containers on one bridge (iptables-restore input).
 * Each bridge berth makes belongs to one engine, so its chains are named after it and no other
 * engine's (or dockerd's) rules are ever touched:
 *
 *   nat    BERTH-DNAT-<bridge>  ← PREROUTING and OUTPUT, for local destinations: one DNAT per
 *                                binding (host address and port → container address and port)
 *   nat    BERTH-POST-<bridge>  ← POSTROUTING: masquerade what the host sends from 127.0.0.0/8
 *                                into the bridge (loopback reaches published ports: the bridge
 *                                has route_localnet), and DNATed connections from the bridge's
 *                                own block back into it (hairpin: containers reach published ports
 *                                through the host's addresses, their own included)
 *   filter BERTH-FWD-<bridge>   ← FORWARD: accept new connections to published ports from other
 *                                interfaces (the FORWARD policy may be DROP)
 *   raw    PREROUTING           one rule: nothing from the bridge to 127.0.0.0/8 (route_localnet
 *                                must not let containers reach the host's loopback services)
 *
 * The jumps carry the comment `berth ports <bridge>`. Pure.
 */

/** One IPv4 DNAT: a host address (`0.0.0.0` for all) and port to a container address and port. */
export interface PortRule {
  proto: PortProto;
  hostIp: string;
  hostPort: number;
  ip: string;
  containerPort: number;
}

/** What the rules of one bridge are made from. */
export interface BridgePorts {
  bridge: string;
  /** The bridge's block (`172.18.0.0/16`): hairpin masquerade. */
  subnet: string;
  rules: PortRule[];
}

export function chainNames(bridge: string): { dnat: string; post: string; fwd: string } {
  return { dnat: `BERTH-DNAT-${bridge}`, post: `BERTH-POST-${bridge}`, fwd: `BERTH-FWD-${bridge}` };
}

export function portsComment(bridge: string): string {
  return `berth ports ${bridge}`;
}

/** The jumps into the bridge's chains and the raw rule, by table (iptables-save form, no -A). */
export function jumpRules(bridge: string): { nat: string[]; filter: string[]; raw: string[] } {
  const c = `-m comment --comment "${portsComment(bridge)}"`;
  const ch = chainNames(bridge);
  return {
    nat: [
      `PREROUTING -m addrtype --dst-type LOCAL ${c} -j ${ch.dnat}`,
      `OUTPUT -m addrtype --dst-type LOCAL ${c} -j ${ch.dnat}`,
      `POSTROUTING ${c} -j ${ch.post}`,
    ],
    filter: [`FORWARD ${c} -j ${ch.fwd}`],
    raw: [`PREROUTING -i ${bridge} -d 127.0.0.0/8 ${c} -j DROP`],
  };
}

function dnat(r: PortRule, chain: string): string {
  const dst = r.hostIp === '0.0.0.0' ? '' : ` -d ${r.hostIp}/32`;
  return `-A ${chain}${dst} -p ${r.proto} -m ${r.proto} --dport ${r.hostPort} -j DNAT --to-destination ${r.ip}:${r.containerPort}`;
}

function accept(r: PortRule, bridge: string, chain: string): string {
  return `-A ${chain} -d ${r.ip}/32 ! -i ${bridge} -o ${bridge} -p ${r.proto} -m ${r.proto} --dport ${r.containerPort} -j ACCEPT`;
}

/**
 * The iptables-restore (--noflush) input that makes the bridge's rules what `p` says: its chains
 * declared (which empties them) and filled; the jumps inserted when `installed` is false. With no
 * rules, everything goes (chains deleted, jumps removed when installed).
 */
export function bridgeRulesInput(p: BridgePorts, installed: boolean): string {
  const ch = chainNames(p.bridge);
  const jumps = jumpRules(p.bridge);
  const out: string[] = [];
  if (p.rules.length === 0) {
    if (!installed) return '';
    out.push(
      '*nat',
      ...jumps.nat.map((j) => `-D ${j}`),
      `-F ${ch.dnat}`,
      `-F ${ch.post}`,
      `-X ${ch.dnat}`,
      `-X ${ch.post}`,
      'COMMIT',
    );
    out.push('*filter', ...jumps.filter.map((j) => `-D ${j}`), `-F ${ch.fwd}`, `-X ${ch.fwd}`, 'COMMIT');
    out.push('*raw', ...jumps.raw.map((j) => `-D ${j}`), 'COMMIT');
    return `${out.join('\n')}\n`;
  }
  const insert = (list: string[]) => (installed ? [] : list.map((j) => `-I ${j.replace(' ', ' 1 ')}`));
  out.push('*nat', `:${ch.dnat} - [0:0]`, `:${ch.post} - [0:0]`, ...insert(jumps.nat));
  for (const r of p.rules) out.push(dnat(r, ch.dnat));
  out.push(`-A ${ch.post} -s 127.0.0.0/8 -o ${p.bridge} -j MASQUERADE`);
  out.push(`-A ${ch.post} -s ${p.subnet} -o ${p.bridge} -m conntrack --ctstate DNAT -j MASQUERADE`);
  out.push('COMMIT');
  out.push('*filter', `:${ch.fwd} - [0:0]`, ...insert(jumps.filter));
  const seen = new Set<string>();
  for (const r of p.rules) {
    const line = accept(r, p.bridge, ch.fwd);
    if (!seen.has(line)) out.push(line);
    seen.add(line);
  }
  out.push('COMMIT');
  out.push('*raw', ...insert(jumps.raw), 'COMMIT');
  return `${out.join('\n')}\n`;
}

/**
 * Whether `save` (iptables-save output, all tables) has any of the bridge's port rules: its
 * chains or a rule with its comment.
 */
export function hasBridgeRules(save: string, bridge: string): boolean {
  const ch = chainNames(bridge);
  return save
    .split('\n')
    .some(
      (l) =>
        l === `:${ch.dnat} - [0:0]` ||
        l.startsWith(`:${ch.dnat} `) ||
        l.startsWith(`:${ch.post} `) ||
        l.startsWith(`:${ch.fwd} `) ||
        l.includes(`"${portsComment(bridge)}"`),
    );
}

/**
 * The input that removes whatever of the bridge's port rules `save` shows (engine start after a
 * crash, bridge removal); '' when there is nothing.
 */
export function removalInput(save: string, bridge: string): string {
  const ch = chainNames(bridge);
  const tables = new Map<string, { deletes: string[]; chains: string[] }>();
  let table = '';
  for (const line of save.split('\n')) {
    if (line.startsWith('*')) {
      table = line.slice(1);
      continue;
    }
    const t = tables.get(table) ?? { deletes: [], chains: [] };
    if (line.startsWith('-A ') && line.includes(`"${portsComment(bridge)}"`))
      t.deletes.push(`-D ${line.slice(3)}`);
    else if (line.startsWith(':')) {
      const name = line.slice(1, line.indexOf(' '));
      if (name === ch.dnat || name === ch.post || name === ch.fwd) t.chains.push(name);
    } else continue;
    tables.set(table, t);
  }
  const out: string[] = [];
  for (const [name, t] of tables) {
    if (!t.deletes.length && !t.chains.length) continue;
    out.push(
      `*${name}`,
      ...t.deletes,
      ...t.chains.map((c) => `-F ${c}`),
      ...t.chains.map((c) => `-X ${c}`),
      'COMMIT',
    );
  }
  return out.length ? `${out.join('\n')}\n` : '';
}
