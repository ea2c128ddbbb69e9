import { invalidParameter } from '../../../common/errors.js';
import {
  containsIp,
  formatIpv4,
  formatNetwork,
  type Ipv4Cidr,
  networkAddress,
  overlaps,
  parseCidr,
  parseIpv4,
} from '../../network/ipv4.js';
import { FIRST_VNI, MAX_VNI, type SwarmIpamConfig } from './network.types.js';

/**
 * The swarm's address blocks and VXLAN identifiers, as swarmkit's allocator hands them out: a
 * network without `--subnet` gets the lowest `SubnetSize` block of `DefaultAddrPool` that no
 * other swarm network overlaps; the gateway is the block's first address. Pure.
 */

/** The lowest free `size` block of the pools; 400 when every pool is full. */
export function nextSubnet(taken: readonly string[], pools: readonly string[], size: number): string {
  const used = taken.map((t) => parseCidr(t)).filter((c): c is Ipv4Cidr => c !== undefined);
  for (const p of pools) {
    const pool = parseCidr(p);
    if (!pool || size < pool.prefixLen || size > 32) continue;
    const start = networkAddress(pool);
    const count = 2 ** (size - pool.prefixLen);
    const step = 2 ** (32 - size);
    for (let i = 0; i < count; i++) {
      const block: Ipv4Cidr = { ip: (start + i * step) >>> 0, prefixLen: size };
      if (!used.some((u) => overlaps(u, block))) return formatNetwork(block);
    }
  }
  throw invalidParameter(
    'could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network',
  );
}

/** The lowest VNI from 4097 that no network holds. */
export function nextVni(taken: readonly number[]): number {
  const used = new Set(taken);
  for (let v = FIRST_VNI; v <= MAX_VNI; v++) if (!used.has(v)) return v;
  throw invalidParameter('no VXLAN network identifier left');
}

/** The block's first host address (swarmkit's default gateway). */
export function firstHost(subnet: string): string {
  const c = parseCidr(subnet);
  if (!c) throw invalidParameter(`invalid subnet ${subnet}`);
  return formatIpv4((networkAddress(c) + 1) >>> 0);
}

/**
 * One `--subnet [--gateway] [--ip-range]` of a create, checked as libnetwork does, with its
 * gateway filled in; 400 for what is not an IPv4 block or lies outside it, or a block that
 * overlaps another swarm network's.
 */
export function checkedConfig(
  c: { Subnet?: string; IPRange?: string; Gateway?: string },
  taken: readonly string[],
): SwarmIpamConfig {
  const subnet = c.Subnet ?? '';
  const block = parseCidr(subnet);
  if (!block)
    throw invalidParameter(`invalid subnet ${subnet}: only IPv4 blocks are supported on overlay networks`);
  const canonical = formatNetwork(block);
  if (canonical !== subnet)
    throw invalidParameter(`invalid subnet ${subnet}: not the network's address (${canonical})`);
  for (const t of taken) {
    const other = parseCidr(t);
    if (other && overlaps(other, block)) {
      throw invalidParameter(`invalid pool request: Pool overlaps with other one on this address space`);
    }
  }
  const out: SwarmIpamConfig = { Subnet: subnet, Gateway: '' };
  if (c.IPRange) {
    const range = parseCidr(c.IPRange);
    if (!range || range.prefixLen < block.prefixLen || !containsIp(block, range.ip)) {
      throw invalidParameter(`invalid ip-range ${c.IPRange}: it must be a block inside ${subnet}`);
    }
    out.IPRange = formatNetwork(range);
  }
  if (c.Gateway) {
    const gw = parseIpv4(c.Gateway);
    if (gw === undefined || !containsIp(block, gw)) {
      throw invalidParameter(`invalid gateway ${c.Gateway}: it must be an address in ${subnet}`);
    }
    out.Gateway = formatIpv4(gw);
  } else out.Gateway = firstHost(subnet);
  return out;
}

/**
 * The address to hand out next in a block: the lowest one of its IPRange (else of the block) that
 * is not the network or broadcast address nor in `taken`; undefined when the block is full.
 */
export function nextAddress(config: SwarmIpamConfig, taken: ReadonlySet<string>): string | undefined {
  const block = parseCidr(config.Subnet);
  if (!block) return undefined;
  const range = (config.IPRange && parseCidr(config.IPRange)) || block;
  const first = networkAddress(range);
  const size = 2 ** (32 - range.prefixLen);
  const net = networkAddress(block);
  const broadcast = (net + 2 ** (32 - block.prefixLen) - 1) >>> 0;
  for (let i = 0; i < size; i++) {
    const ip = (first + i) >>> 0;
    if (ip === net || ip === broadcast) continue;
    const text = formatIpv4(ip);
    if (!taken.has(text)) return text;
  }
  return undefined;
}

/** `10.0.1.5` in `10.0.1.0/24` → `10.0.1.5/24`. */
export function withPrefix(ip: string, subnet: string): string {
  return `${ip}/${subnet.slice(subnet.indexOf('/') + 1)}`;
}
