import { isIP } from 'node:net';
import { containsIp, parseCidr, parseIpv4 } from '../ipv4.js';
import { ipv6Data } from './dns.wire.js';

/**
 * What the embedded DNS knows, per network: the names of its endpoints and their addresses (plain
 * data; the network layer sets it). A query sees the names of the network it reached and, when the
 * asking endpoint is known, of the other networks its sandbox is on — never those of a network the
 * client is not on.
 */

/** One endpoint on a network: the names it answers to and its addresses. */
export interface DnsEntry {
  /**
   * The names resolved to this endpoint's addresses: the container's name, its aliases on this
   * network, its short ID. The first one names the address in PTR answers (`<name>.<network>`).
   */
  names: string[];
  ipv4?: string;
  ipv6?: string;
  /**
   * The container's sandbox (any stable key): the endpoints of one sandbox on several networks
   * share their names (a container on two networks resolves the names of both).
   */
  sandbox?: string;
  /** The servers this container's other queries go to (its HostConfig.Dns); the host's when absent. */
  upstreams?: string[];
  /**
   * The container's DnsOptions set ndots above 0: as dockerd, an A/AAAA question for a single-label
   * name the network does not know is answered empty, not forwarded (the client then tries its
   * search domains).
   */
  ndotsSet?: boolean;
  /**
   * Legacy links on a user-defined network (`--link name:alias`): the alias resolves, for this
   * container only, to the linked container's name on the network (dockerd's endpoint aliases:
   * looked up at query time, so a target started again with another address is found).
   */
  links?: Array<{ alias: string; name: string }>;
}

interface NetworkRecords {
  /** `<name>.<domain>` is `<name>` on this network (dockerd: the network's name, case-sensitive). */
  domain: string;
  /** The network's address blocks: who counts as a client, which PTRs are ours. */
  subnets: string[];
  entries: Map<string, DnsEntry>;
  /** Lookups by name, address and sandbox; made again after a change. */
  index?: NetworkIndex;
}

interface NetworkIndex {
  /** Lowercase name → its endpoints, in the order they joined. */
  byName: Map<string, DnsEntry[]>;
  /** canonicalIp → the endpoint holding it. */
  byIp: Map<string, DnsEntry>;
  sandboxes: Set<string>;
  /** sandbox → its endpoint on the network (the asking container's link aliases). */
  bySandbox: Map<string, DnsEntry>;
}

function buildIndex(entries: Iterable<DnsEntry>): NetworkIndex {
  const index: NetworkIndex = {
    byName: new Map(),
    byIp: new Map(),
    sandboxes: new Set(),
    bySandbox: new Map(),
  };
  for (const e of entries) {
    for (const name of e.names) {
      const key = name.toLowerCase();
      const list = index.byName.get(key);
      if (list) list.push(e);
      else index.byName.set(key, [e]);
    }
    for (const ip of [e.ipv4, e.ipv6]) {
      const key = ip ? canonicalIp(ip) : '';
      if (key && !index.byIp.has(key)) index.byIp.set(key, e);
    }
    if (e.sandbox) {
      index.sandboxes.add(e.sandbox);
      index.bySandbox.set(e.sandbox, e);
    }
  }
  return index;
}

export interface Lookup {
  /** Some endpoint has the name (then no address of the asked family means NODATA, not forwarding). */
  found: boolean;
  addresses: string[];
}

export function normalizeName(name: string): string {
  return (name.endsWith('.') ? name.slice(0, -1) : name).toLowerCase();
}

/** An address in one spelling (IPv6 fully expanded, lowercase), for comparison; '' when not one. */
export function canonicalIp(ip: string): string {
  const family = isIP(ip);
  if (family === 4) return ip;
  if (family === 6) return ipv6Data(ip).toString('hex');
  return '';
}

/** The address a PTR question names (`4.3.2.1.in-addr.arpa`, nibbles `.ip6.arpa`), or undefined. */
export function ptrAddress(name: string): string | undefined {
  const n = normalizeName(name);
  if (n.endsWith('.in-addr.arpa')) {
    const parts = n.slice(0, -'.in-addr.arpa'.length).split('.');
    if (parts.length !== 4) return undefined;
    const ip = parts.reverse().join('.');
    return parseIpv4(ip) === undefined ? undefined : ip;
  }
  if (n.endsWith('.ip6.arpa')) {
    const nibbles = n.slice(0, -'.ip6.arpa'.length).split('.');
    if (nibbles.length !== 32 || !nibbles.every((x) => /^[0-9a-f]$/.test(x))) return undefined;
    const hex = nibbles.reverse().join('');
    return hex.match(/.{4}/g)?.join(':');
  }
  return undefined;
}

/** The PTR name of an address (`2.0.18.172.in-addr.arpa`). */
export function ptrName(ip: string): string {
  if (isIP(ip) === 4) return `${ip.split('.').reverse().join('.')}.in-addr.arpa`;
  return `${ipv6Data(ip).toString('hex').split('').reverse().join('.')}.ip6.arpa`;
}

function inSubnet(subnet: string, ip: string): boolean {
  const slash = subnet.indexOf('/');
  const base = slash < 0 ? subnet : subnet.slice(0, slash);
  if (isIP(ip) === 4 && isIP(base) === 4) {
    const c = parseCidr(subnet);
    const n = parseIpv4(ip);
    return c !== undefined && n !== undefined && containsIp(c, n);
  }
  if (isIP(ip) === 6 && isIP(base) === 6) {
    const len = slash < 0 ? 128 : Number(subnet.slice(slash + 1));
    if (!Number.isInteger(len) || len < 0 || len > 128) return false;
    const a = ipv6Data(base);
    const b = ipv6Data(ip);
    for (let bit = 0; bit < len; bit++) {
      const byte = bit >> 3;
      const mask = 0x80 >> (bit & 7);
      if (((a[byte] as number) & mask) !== ((b[byte] as number) & mask)) return false;
    }
    return true;
  }
  return false;
}

export class DnsRecords {
  private readonly networks = new Map<string, NetworkRecords>();

  private network(networkId: string): NetworkRecords {
    let n = this.networks.get(networkId);
    if (!n) {
      n = { domain: '', subnets: [], entries: new Map() };
      this.networks.set(networkId, n);
    }
    return n;
  }

  /** The network's domain (its name) and address blocks. */
  describe(networkId: string, opts: { domain?: string; subnets?: string[] }): void {
    const n = this.network(networkId);
    // the network's name as it is: dockerd matches the suffix case-sensitively (names are not)
    if (opts.domain !== undefined) n.domain = opts.domain.replace(/\.$/, '');
    if (opts.subnets !== undefined) n.subnets = [...opts.subnets];
  }

  /** Every endpoint of the network at once (keys are made up: add/remove need their own). */
  set(networkId: string, entries: DnsEntry[]): void {
    const n = this.network(networkId);
    n.entries = new Map(entries.map((e, i) => [`#${i}`, clean(e)]));
    n.index = undefined;
  }

  add(networkId: string, key: string, entry: DnsEntry): void {
    const n = this.network(networkId);
    n.entries.set(key, clean(entry));
    n.index = undefined;
  }

  remove(networkId: string, key: string): void {
    const n = this.networks.get(networkId);
    if (n?.entries.delete(key)) n.index = undefined;
  }

  drop(networkId: string): void {
    this.networks.delete(networkId);
  }

  entries(networkId: string): DnsEntry[] {
    return [...(this.networks.get(networkId)?.entries.values() ?? [])];
  }

  private indexOf(networkId: string): NetworkIndex | undefined {
    const n = this.networks.get(networkId);
    if (!n) return undefined;
    n.index ??= buildIndex(n.entries.values());
    return n.index;
  }

  /** The endpoint of `networkId` with this address (the asking container), if any. */
  client(networkId: string, address: string): DnsEntry | undefined {
    const ip = canonicalIp(address.replace(/^::ffff:(?=\d+\.)/, ''));
    return ip ? this.indexOf(networkId)?.byIp.get(ip) : undefined;
  }

  /**
   * The networks whose names a client sees through `networkId`'s responder: none when it is not on
   * it (outside its blocks, and not a known endpoint); the network itself, then the other networks
   * of the client's sandbox. A network described without blocks is everyone's (tests, loopback).
   */
  scope(networkId: string, address: string): string[] {
    const n = this.networks.get(networkId);
    if (!n) return [];
    const bare = address.replace(/^::ffff:(?=\d+\.)/, '');
    const me = this.client(networkId, bare);
    if (!me && n.subnets.length && !n.subnets.some((s) => inSubnet(s, bare))) return [];
    const out = [networkId];
    const sandbox = me?.sandbox;
    if (sandbox) {
      for (const id of this.networks.keys()) {
        if (id !== networkId && this.indexOf(id)?.sandboxes.has(sandbox)) out.push(id);
      }
    }
    return out;
  }

  /**
   * The addresses of `name` (family 4 or 6) in the first of `networks` that has it. With the
   * asking container's sandbox, its link aliases come first (dockerd: the sandbox's endpoint
   * aliases, then the names of the networks).
   */
  lookup(networks: string[], name: string, family: 4 | 6, sandbox?: string): Lookup {
    const raw = name.endsWith('.') ? name.slice(0, -1) : name;
    if (sandbox) {
      for (const id of networks) {
        const mine = this.indexOf(id)?.bySandbox.get(sandbox);
        if (!mine?.links?.length) continue;
        const domain = this.networks.get(id)?.domain;
        const bare = domain && raw.endsWith(`.${domain}`) ? raw.slice(0, -(domain.length + 1)) : raw;
        const link = mine.links.find((l) => l.alias.toLowerCase() === bare.toLowerCase());
        if (!link) continue;
        const found = this.lookup([id], link.name, family);
        if (found.found) return found;
      }
    }
    const q = raw.toLowerCase();
    for (const id of networks) {
      const n = this.networks.get(id);
      const index = this.indexOf(id);
      if (!n || !index) continue;
      const bare =
        n.domain && raw.endsWith(`.${n.domain}`)
          ? raw.slice(0, -(n.domain.length + 1)).toLowerCase()
          : undefined;
      const found = index.byName.get(q) ?? (bare !== undefined ? index.byName.get(bare) : undefined);
      if (!found) continue;
      const addresses: string[] = [];
      for (const e of found) {
        const ip = family === 4 ? e.ipv4 : e.ipv6;
        if (ip && !addresses.includes(ip)) addresses.push(ip);
      }
      return { found: true, addresses };
    }
    return { found: false, addresses: [] };
  }

  /** `<first name>.<domain>` of the endpoint holding `ip` in the first of `networks` that has it. */
  reverse(networks: string[], ip: string): string | undefined {
    const want = canonicalIp(ip);
    if (!want) return undefined;
    for (const id of networks) {
      const e = this.indexOf(id)?.byIp.get(want);
      const domain = this.networks.get(id)?.domain;
      if (e?.names[0]) return domain ? `${e.names[0]}.${domain}` : e.names[0];
    }
    return undefined;
  }

  /** Whether `ip` is in a block of one of `networks` (a PTR nobody else can answer). */
  ours(networks: string[], ip: string): boolean {
    return networks.some((id) => this.networks.get(id)?.subnets.some((s) => inSubnet(s, ip)));
  }
}

function clean(e: DnsEntry): DnsEntry {
  return {
    ...e,
    names: [...new Set(e.names.map((n) => (n.endsWith('.') ? n.slice(0, -1) : n)).filter((n) => n !== ''))],
    ...(e.ipv4 && isIP(e.ipv4) === 4 ? { ipv4: e.ipv4 } : { ipv4: undefined }),
    ...(e.ipv6 && isIP(e.ipv6) === 6 ? { ipv6: e.ipv6 } : { ipv6: undefined }),
  };
}
