import { invalidParameter } from '../../../common/errors.js';
import type { VipBackendSet } from './lb.types.js';
import {
  addressSet,
  byAddress,
  canonicalIpv4,
  type NftChain,
  replaceTable,
  roundRobin,
} from './nft-script.js';

/**
 * The VIP table of one container's namespace (what dockerd does with a mangle mark and IPVS in
 * every task's namespace), as one nft table `ip berth-vip`:
 *
 *   chain vip-dnat    nat output: a new connection (any protocol, any port) to a VIP with
 *                     backends is DNATed to the next of them, round robin; conntrack un-NATs
 *                     its replies. A container that is its own backend reaches itself (the
 *                     rewritten destination is local: the packet goes by `lo`).
 *   chain vip-refuse  filter output: a VIP with no backend is refused at once (TCP reset, ICMP
 *                     port unreachable for the rest) instead of an ARP for an address nobody has.
 *
 * Pure.
 */

export const VIP_TABLE = 'berth-vip';

/** The VIP sets checked and put in canonical order (VIPs and their backends sorted, deduplicated). */
export function normalizeVips(vips: VipBackendSet[]): VipBackendSet[] {
  if (!Array.isArray(vips)) throw invalidParameter('invalid VIP table: not a list');
  const seen = new Set<string>();
  const out = vips.map((v) => {
    const vip = canonicalIpv4(v?.vip, 'VIP');
    if (seen.has(vip)) throw invalidParameter(`VIP ${vip} is given twice`);
    seen.add(vip);
    return { vip, backends: addressSet(v.backends, `backend of VIP ${vip}`) };
  });
  return out.sort((a, b) => byAddress(a.vip, b.vip));
}

/** The nft script that makes the namespace's VIP table what `vips` says (checked and normalized). */
export function vipTableScript(vips: VipBackendSet[]): string {
  const sets = normalizeVips(vips);
  const dnat = sets
    .filter((s) => s.backends.length)
    .map((s) => `ip daddr ${s.vip} dnat to ${roundRobin(s.backends)}`);
  const refuse = sets
    .filter((s) => !s.backends.length)
    .flatMap((s) => [`ip daddr ${s.vip} meta l4proto tcp reject with tcp reset`, `ip daddr ${s.vip} reject`]);
  const chains: NftChain[] = [];
  if (dnat.length)
    chains.push({
      name: 'vip-dnat',
      hook: 'type nat hook output priority -100; policy accept;',
      rules: dnat,
    });
  if (refuse.length)
    chains.push({
      name: 'vip-refuse',
      hook: 'type filter hook output priority 0; policy accept;',
      rules: refuse,
    });
  return replaceTable(VIP_TABLE, chains);
}
