import { invalidParameter } from '../../../common/errors.js';
import { formatIpv4, parseIpv4 } from '../ipv4.js';

/**
 * Pieces of nft scripts shared by the VIP table and the ingress mesh. Pure.
 *
 * A table is replaced whole in one transaction: `table` (made when missing), `delete table`, then
 * the new definition. nft applies a script atomically, so a connection never meets a namespace
 * with half a table or none.
 */

/** One base chain: its hook line and its rules. */
export interface NftChain {
  name: string;
  /** `type nat hook output priority -100; policy accept;` */
  hook: string;
  rules: string[];
}

/** The script that replaces table `ip <name>` by `chains` (deletes it when there are none). */
export function replaceTable(name: string, chains: NftChain[]): string {
  const out = [`table ip ${name}`, `delete table ip ${name}`];
  if (chains.length) {
    out.push(`table ip ${name} {`);
    for (const c of chains) {
      out.push(`\tchain ${c.name} {`, `\t\t${c.hook}`, ...c.rules.map((r) => `\t\t${r}`), '\t}');
    }
    out.push('}');
  }
  return `${out.join('\n')}\n`;
}

/** The script that deletes table `ip <name>` if it is there (no error when it is not). */
export function deleteTable(name: string): string {
  return replaceTable(name, []);
}

/** `what` as a canonical dotted IPv4 address; invalidParameter otherwise. */
export function canonicalIpv4(text: string, what: string): string {
  const n = typeof text === 'string' ? parseIpv4(text) : undefined;
  if (n === undefined) throw invalidParameter(`invalid ${what} ${JSON.stringify(text)}: not an IPv4 address`);
  return formatIpv4(n);
}

/** Distinct canonical addresses, in numeric order (a set given in any order gives one table). */
export function addressSet(list: string[], what: string): string[] {
  if (!Array.isArray(list)) throw invalidParameter(`invalid ${what} list`);
  const unique = new Set(list.map((a) => canonicalIpv4(a, what)));
  return [...unique].sort(byAddress);
}

/** Orders canonical IPv4 addresses numerically. */
export function byAddress(a: string, b: string): number {
  return (parseIpv4(a) ?? 0) - (parseIpv4(b) ?? 0);
}

/**
 * The expression a DNAT spreads new connections with: round robin over `targets` (`numgen inc`,
 * IPVS's `rr` scheduler, which dockerd uses), or the one target itself. Each target is an address
 * or an `address . port` concatenation.
 */
export function roundRobin(targets: string[]): string {
  if (targets.length === 1) return targets[0] ?? '';
  const map = targets.map((t, i) => `${i} : ${t}`).join(', ');
  return `numgen inc mod ${targets.length} map { ${map} }`;
}
