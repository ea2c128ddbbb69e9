import { invalidParameter } from '../../common/errors.js';
import {
  broadcastAddress,
  formatIpv4,
  formatNetwork,
  type Ipv4Cidr,
  networkAddress,
  overlaps,
  parseCidr,
} from './ipv4.js';

/** The address block of a bridge network and the bridge's own (gateway) address. */
export interface SubnetChoice {
  /** Canonical block, `172.18.0.0/16`. */
  subnet: string;
  /** The bridge's address, `172.18.0.1`. */
  gateway: string;
  prefixLen: number;
}

/**
 * dockerd's default local address pools (libnetwork ipamutils): 172.17.0.0/16 to 172.31.0.0/16,
 * then 192.168.0.0/20 to 192.168.240.0/20.
 */
export const DEFAULT_POOLS: readonly string[] = [
  ...Array.from({ length: 15 }, (_, i) => `172.${17 + i}.0.0/16`),
  ...Array.from({ length: 16 }, (_, i) => `192.168.${i * 16}.0/20`),
];

/**
 * The first default pool that overlaps none of `taken` (the host's routes and addresses, as
 * CIDR strings; `default` routes are not given). Its first address is the gateway.
 */
export function pickSubnet(taken: readonly string[], pools: readonly string[] = DEFAULT_POOLS): SubnetChoice {
  const used = taken.map((t) => parseCidr(t)).filter((c): c is Ipv4Cidr => c !== undefined);
  for (const pool of pools) {
    const c = parseCidr(pool);
    if (!c || used.some((u) => overlaps(u, c))) continue;
    return {
      subnet: formatNetwork(c),
      gateway: formatIpv4(networkAddress(c) + 1),
      prefixLen: c.prefixLen,
    };
  }
  throw invalidParameter(
    'could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network',
  );
}

/**
 * `--bip 172.30.0.1/16`: the bridge's address and the block it sits in. The address must be a
 * host address of the block (not its network or broadcast address).
 */
export function parseBip(bip: string): SubnetChoice {
  const c = parseCidr(bip);
  if (!c || !bip.includes('/'))
    throw invalidParameter(
      `invalid --bip ${JSON.stringify(bip)}: want an address with a prefix length, as 172.30.0.1/16`,
    );
  if (c.prefixLen > 30) throw invalidParameter(`invalid --bip ${bip}: the block is too small (at most /30)`);
  if (c.ip === networkAddress(c) || c.ip === broadcastAddress(c)) {
    throw invalidParameter(
      `invalid --bip ${bip}: ${formatIpv4(c.ip)} is not a host address of ${formatNetwork(c)}`,
    );
  }
  return { subnet: formatNetwork(c), gateway: formatIpv4(c.ip), prefixLen: c.prefixLen };
}

/** An address and prefix length (`ip addr`'s form) as the block it belongs to. */
export function choiceFromAddress(address: string, prefixLen: number): SubnetChoice | undefined {
  const c = parseCidr(`${address}/${prefixLen}`);
  if (!c) return undefined;
  return { subnet: formatNetwork(c), gateway: formatIpv4(c.ip), prefixLen };
}
