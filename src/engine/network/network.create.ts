import { isIP } from 'node:net';
import { conflict, forbidden, invalidParameter, notFound } from '../../common/errors.js';
import { goParseBool } from '../../common/go-strconv.js';
import { validateBridgeName } from './bridge.setup.js';
import {
  containsIp,
  formatIpv4,
  formatNetwork,
  networkAddress,
  overlaps,
  parseCidr,
  parseIpv4,
} from './ipv4.js';
import { containsIp6, formatIpv6, formatNetwork6, parseCidr6, parseIpv6 } from './ipv6.js';
import type { IpamConfigEntry } from './network.types.js';

/**
 * POST /networks/create's body read into what the engine makes: dockerd's checks and messages
 * (libnetwork's bridge driver and default IPAM) for a user-defined bridge network. Pure.
 */

/** The bridge driver's options (com.docker.network.bridge.*, com.docker.network.driver.mtu). */
export const OPT_BRIDGE_NAME = 'com.docker.network.bridge.name';
export const OPT_ICC = 'com.docker.network.bridge.enable_icc';
export const OPT_MASQUERADE = 'com.docker.network.bridge.enable_ip_masquerade';
export const OPT_HOST_BINDING = 'com.docker.network.bridge.host_binding_ipv4';
export const OPT_MTU = 'com.docker.network.driver.mtu';

/** A network create request, checked. */
export interface CreatePlan {
  name: string;
  internal: boolean;
  attachable: boolean;
  enableIPv6: boolean;
  ipamOptions: Record<string, string> | null;
  /** IPv4 entries as given (no Subnet: the engine picks a block from the default pools). */
  ipv4: IpamConfigEntry[];
  ipv6: IpamConfigEntry[];
  options: Record<string, string>;
  labels: Record<string, string>;
  /** The Linux bridge's name when the options give one. */
  bridgeName?: string;
  icc: boolean;
  masquerade: boolean;
  mtu?: number;
}

const PREDEFINED = ['bridge', 'host', 'none'];

function stringMap(v: unknown, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidParameter(`${field} must be an object`);
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (typeof x !== 'string') throw invalidParameter(`${field}.${k} must be a string`);
    out[k] = x;
  }
  return out;
}

function boolOption(options: Record<string, string>, key: string, dflt: boolean): boolean {
  const v = options[key];
  if (v === undefined) return dflt;
  const b = goParseBool(v);
  if (b === undefined)
    throw invalidParameter(`failed to parse ${key} value: invalid syntax (${JSON.stringify(v)})`);
  return b;
}

function bool(v: unknown, field: string): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalidParameter(`${field} must be a boolean`);
  return v;
}

/** Read and check a create body; `exists` says whether a network of that name is there. */
export function planNetwork(body: Record<string, unknown>, exists: (name: string) => boolean): CreatePlan {
  const name = typeof body.Name === 'string' ? body.Name : '';
  if (!name) throw invalidParameter('network name must not be empty');
  if (PREDEFINED.includes(name)) throw forbidden(`operation is not permitted on predefined ${name} network`);
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(name)) {
    throw invalidParameter(`invalid network name "${name}": only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
  }
  const driver = typeof body.Driver === 'string' && body.Driver ? body.Driver : 'bridge';
  if (driver === 'host' || driver === 'null') {
    throw forbidden(`only one instance of "${driver}" network is allowed`);
  }
  if (driver !== 'bridge') throw notFound(`plugin "${driver}" not found`);
  if (exists(name)) throw conflict(`network with name ${name} already exists`);
  if (body.ConfigOnly === true || typeof body.ConfigFrom === 'object') {
    if (body.ConfigOnly === true || (body.ConfigFrom as { Network?: string } | null)?.Network) {
      throw invalidParameter('config-only networks are not supported by this engine');
    }
  }
  if (body.Ingress === true) throw forbidden('ingress networks need swarm mode');
  if (body.Scope !== undefined && body.Scope !== '' && body.Scope !== 'local') {
    throw invalidParameter(`the bridge driver has local scope only (asked: ${String(body.Scope)})`);
  }

  const ipam = (body.IPAM ?? {}) as { Driver?: unknown; Config?: unknown; Options?: unknown };
  if (typeof ipam !== 'object') throw invalidParameter('IPAM must be an object');
  const ipamDriver = typeof ipam.Driver === 'string' && ipam.Driver ? ipam.Driver : 'default';
  if (ipamDriver !== 'default') throw notFound(`plugin "${ipamDriver}" not found`);
  const configs = ipam.Config === undefined || ipam.Config === null ? [] : ipam.Config;
  if (!Array.isArray(configs)) throw invalidParameter('IPAM.Config must be an array');
  const ipv4: IpamConfigEntry[] = [];
  const ipv6: IpamConfigEntry[] = [];
  for (const raw of configs as Array<Record<string, unknown>>) {
    const entry = ipamEntry(raw);
    const family = entry.Subnet ? isIP(entry.Subnet.split('/')[0] ?? '') : 4;
    (family === 6 ? ipv6 : ipv4).push(entry);
  }
  checkOverlapsWithin(ipv4);
  const enableIPv6 = bool(body.EnableIPv6, 'EnableIPv6');
  // without EnableIPv6 an IPv6 block is only stored (dockerd 20.10): no container gets an address
  if (ipv6.length > 1) throw forbidden("bridge driver doesn't support multiple subnets");
  if (enableIPv6 && !ipv6.length) {
    // dockerd 20.10 has no default IPv6 pools
    throw forbidden(
      'could not find an available, non-overlapping IPv6 address pool among the defaults to assign to the network',
    );
  }
  const options = stringMap(body.Options, 'Options');
  const bridgeName = options[OPT_BRIDGE_NAME] || undefined;
  if (bridgeName) validateBridgeName(bridgeName);
  const mtuText = options[OPT_MTU];
  let mtu: number | undefined;
  if (mtuText !== undefined && mtuText !== '') {
    if (!/^\d+$/.test(mtuText) || Number(mtuText) < 68 || Number(mtuText) > 65535) {
      throw invalidParameter(`invalid MTU ${JSON.stringify(mtuText)}: want an integer from 68 to 65535`);
    }
    mtu = Number(mtuText);
  }
  const hostBinding = options[OPT_HOST_BINDING];
  if (hostBinding !== undefined && hostBinding !== '' && isIP(hostBinding) === 0) {
    throw invalidParameter(
      `invalid ${OPT_HOST_BINDING}: ${JSON.stringify(hostBinding)} is not an IP address`,
    );
  }
  return {
    name,
    internal: bool(body.Internal, 'Internal'),
    attachable: bool(body.Attachable, 'Attachable'),
    enableIPv6,
    ipamOptions:
      ipam.Options === undefined || ipam.Options === null ? null : stringMap(ipam.Options, 'IPAM.Options'),
    ipv4,
    ipv6,
    options,
    labels: stringMap(body.Labels, 'Labels'),
    ...(bridgeName ? { bridgeName } : {}),
    icc: boolOption(options, OPT_ICC, true),
    masquerade: boolOption(options, OPT_MASQUERADE, true),
    ...(mtu !== undefined ? { mtu } : {}),
  };
}

function ipamEntry(raw: Record<string, unknown>): IpamConfigEntry {
  if (!raw || typeof raw !== 'object') throw invalidParameter('IPAM.Config entries must be objects');
  const subnet = typeof raw.Subnet === 'string' ? raw.Subnet : '';
  const range = typeof raw.IPRange === 'string' ? raw.IPRange : '';
  const gateway = typeof raw.Gateway === 'string' ? raw.Gateway : '';
  const aux = stringMap(raw.AuxiliaryAddresses ?? raw.AuxAddress, 'AuxiliaryAddresses');
  const out: IpamConfigEntry = { Subnet: subnet };
  if (!subnet) {
    if (range || gateway || Object.keys(aux).length) {
      throw invalidParameter('an IPAM config with an ip-range, gateway or aux address needs a subnet');
    }
    return out;
  }
  if (isIP(subnet.split('/')[0] ?? '') === 6) return ipv6Entry(out, range, gateway, aux);
  const block = subnet.includes('/') ? parseCidr(subnet) : undefined;
  if (!block) throw invalidParameter(`invalid subnet ${subnet} : invalid CIDR address: ${subnet}`);
  if (block.prefixLen > 30)
    throw invalidParameter(`invalid subnet ${subnet}: the block is too small (at most /30)`);
  if (networkAddress(block) !== block.ip) {
    // dockerd canonicalises the block silently
    out.Subnet = formatNetwork(block);
  }
  if (range) {
    const r = range.includes('/') ? parseCidr(range) : undefined;
    if (!r) throw invalidParameter(`invalid ip-range ${range} : invalid CIDR address: ${range}`);
    if (r.prefixLen < block.prefixLen || !containsIp(block, r.ip)) {
      throw invalidParameter(`invalid pool request: ip-range ${range} is not within subnet ${out.Subnet}`);
    }
    out.IPRange = formatNetwork(r);
  }
  if (gateway) {
    const g = parseIpv4(gateway);
    if (g === undefined) throw invalidParameter(`invalid gateway address ${gateway}`);
    if (!containsIp(block, g)) {
      // dockerd's message (a 500 there)
      throw invalidParameter(`failed to allocate gateway (${gateway}): Requested address is out of range`);
    }
    out.Gateway = formatIpv4(g);
  }
  for (const [host, addr] of Object.entries(aux)) {
    const a = parseIpv4(addr);
    if (a === undefined) throw invalidParameter(`invalid auxiliary address ${host}=${addr}`);
    if (!containsIp(block, a)) throw invalidParameter(`no matching subnet for aux-address ${addr}`);
  }
  if (Object.keys(aux).length) out.AuxiliaryAddresses = aux;
  return out;
}

/**
 * An IPv6 IPAM entry: the block kept as written (dockerd shows `fd42::5/64` so), the range inside
 * it, the gateway and aux addresses in it (canonical text).
 */
function ipv6Entry(
  out: IpamConfigEntry,
  range: string,
  gateway: string,
  aux: Record<string, string>,
): IpamConfigEntry {
  const subnet = out.Subnet;
  const block = subnet.includes('/') ? parseCidr6(subnet) : undefined;
  if (!block) throw invalidParameter(`invalid subnet ${subnet} : invalid CIDR address: ${subnet}`);
  if (block.prefixLen > 126)
    throw invalidParameter(`invalid subnet ${subnet}: the block is too small (at most /126)`);
  if (range) {
    const r = range.includes('/') ? parseCidr6(range) : undefined;
    if (!r) throw invalidParameter(`invalid ip-range ${range} : invalid CIDR address: ${range}`);
    if (r.prefixLen < block.prefixLen || !containsIp6(block, r.ip)) {
      throw invalidParameter(`invalid pool request: ip-range ${range} is not within subnet ${subnet}`);
    }
    out.IPRange = formatNetwork6(r);
  }
  if (gateway) {
    const g = parseIpv6(gateway);
    if (g === undefined) throw invalidParameter(`invalid gateway address ${gateway}`);
    if (!containsIp6(block, g)) throw invalidParameter(`no matching subnet for gateway ${gateway}`);
    out.Gateway = formatIpv6(g);
  }
  for (const [host, addr] of Object.entries(aux)) {
    const a = parseIpv6(addr);
    if (a === undefined) throw invalidParameter(`invalid auxiliary address ${host}=${addr}`);
    if (!containsIp6(block, a)) throw invalidParameter(`no matching subnet for aux-address ${addr}`);
    aux[host] = formatIpv6(a);
  }
  if (Object.keys(aux).length) out.AuxiliaryAddresses = aux;
  return out;
}

function checkOverlapsWithin(entries: IpamConfigEntry[]): void {
  const blocks = entries.map((e) => (e.Subnet ? parseCidr(e.Subnet) : undefined));
  for (let i = 0; i < blocks.length; i++) {
    for (let j = i + 1; j < blocks.length; j++) {
      const a = blocks[i];
      const b = blocks[j];
      if (a && b && overlaps(a, b)) {
        throw forbidden(`invalid pool request: Pool overlaps with other one on this address space`);
      }
    }
  }
  if (entries.filter((e) => !e.Subnet).length > 1) {
    throw invalidParameter('at most one IPv4 IPAM config may leave its subnet to the engine');
  }
}
