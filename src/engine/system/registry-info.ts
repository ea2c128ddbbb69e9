/**
 * `docker info`'s registry part as dockerd 20.10's registry service config shows it
 * (registry.ServiceConfig from LoadInsecureRegistries and LoadMirrors): the insecure CIDRs as
 * given then 127.0.0.0/8 (always insecure), one IndexConfig per insecure host and one for
 * docker.io with the mirrors, the mirrors with one trailing slash.
 */

import { formatNetwork, parseCidr } from '../network/ipv4.js';

export const INDEX_SERVER_ADDRESS = 'https://index.docker.io/v1/';

/** What dockerd always treats as insecure. */
export const LOOPBACK_CIDR = '127.0.0.0/8';

export interface IndexInfo {
  Name: string;
  Mirrors: string[];
  Secure: boolean;
  Official: boolean;
}

export interface RegistryInfo {
  AllowNondistributableArtifactsCIDRs: string[];
  AllowNondistributableArtifactsHostnames: string[];
  InsecureRegistryCIDRs: string[];
  IndexConfigs: Record<string, IndexInfo>;
  Mirrors: string[];
}

/** A mirror URL as dockerd keeps it: one trailing slash. */
export function normalizeMirror(url: string): string {
  return `${url.replace(/\/+$/, '')}/`;
}

/** An IPv6 address as 8 groups; undefined when malformed. */
function parseIpv6(text: string): number[] | undefined {
  if (!/^[0-9a-fA-F:]+$/.test(text)) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (h: string) => (h === '' ? [] : h.split(':'));
  const head = groups(halves[0] ?? '');
  const tail = halves.length === 2 ? groups(halves[1] ?? '') : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (all.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  return all.map((g) => Number.parseInt(g, 16));
}

/** Go's IP.String() of an IPv6 address: the longest run of two or more zero groups as `::`. */
function formatIpv6(groups: number[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * An insecure-registry entry as Go's net.ParseCIDR reads it: the block's network in canonical
 * form (`10.1.2.3/16` is `10.1.0.0/16`), or undefined when it is no CIDR (then a host[:port]).
 */
export function canonicalCidr(entry: string): string | undefined {
  const slash = entry.indexOf('/');
  if (slash < 0) return undefined;
  const addr = entry.slice(0, slash);
  const lenText = entry.slice(slash + 1);
  if (!/^\d{1,3}$/.test(lenText)) return undefined;
  const len = Number(lenText);
  const v4 = parseCidr(entry);
  if (v4) return formatNetwork(v4);
  const v6 = parseIpv6(addr);
  if (!v6 || len > 128) return undefined;
  const masked = v6.map((g, i) => {
    const bits = Math.max(0, Math.min(16, len - i * 16));
    return bits === 0 ? 0 : g & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${formatIpv6(masked)}/${len}`;
}

/**
 * The insecure registries the operator gave: the engine's list without the 127.0.0.0/8 its
 * defaults put first (dockerd appends that one after the operator's, when it is not there yet).
 */
export function userInsecureRegistries(list: readonly string[]): string[] {
  const i = list.indexOf(LOOPBACK_CIDR);
  return i < 0 ? [...list] : [...list.slice(0, i), ...list.slice(i + 1)];
}

/** The RegistryConfig of /info from the engine's insecure registries and mirrors. */
export function registryInfo(
  insecureRegistries: readonly string[],
  mirrors: readonly string[],
): RegistryInfo {
  const cidrs: string[] = [];
  const hosts: string[] = [];
  for (const entry of [...userInsecureRegistries(insecureRegistries), LOOPBACK_CIDR]) {
    const cidr = canonicalCidr(entry);
    if (cidr === undefined) {
      if (!hosts.includes(entry)) hosts.push(entry);
    } else if (!cidrs.includes(cidr)) cidrs.push(cidr);
  }
  const normalized = mirrors.map(normalizeMirror);
  const configs: Record<string, IndexInfo> = {};
  for (const h of hosts) configs[h] = { Name: h, Mirrors: [], Secure: false, Official: false };
  configs['docker.io'] = { Name: 'docker.io', Mirrors: normalized, Secure: true, Official: true };
  // Go writes a map's keys sorted
  const IndexConfigs: Record<string, IndexInfo> = {};
  for (const k of Object.keys(configs).sort()) IndexConfigs[k] = configs[k] as IndexInfo;
  return {
    AllowNondistributableArtifactsCIDRs: [],
    AllowNondistributableArtifactsHostnames: [],
    InsecureRegistryCIDRs: cidrs,
    IndexConfigs,
    Mirrors: normalized,
  };
}
