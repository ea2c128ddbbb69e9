/**
 * IPv6 addresses and CIDR blocks as 128-bit bigints: parsing, formatting (RFC 5952, as Go's
 * net.IP prints them), containment, overlap and dockerd's lowest-free pick. Pure.
 */

export interface Ipv6Cidr {
  /** The address as written (host bits kept). */
  ip: bigint;
  prefixLen: number;
}

const ALL = (1n << 128n) - 1n;

/** An IPv6 address (no zone, an embedded IPv4 tail allowed); undefined when malformed. */
export function parseIpv6(text: string): bigint | undefined {
  if (!/^[0-9a-fA-F:.]+$/.test(text)) return undefined;
  let s = text;
  const tail: number[] = [];
  const lastColon = s.lastIndexOf(':');
  if (s.includes('.')) {
    const v4 = s.slice(lastColon + 1).split('.');
    if (v4.length !== 4 || v4.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return undefined;
    const [a = 0, b = 0, c = 0, d = 0] = v4.map(Number);
    tail.push(a * 256 + b, c * 256 + d);
    // `::ffff:1.2.3.4` keeps its `::`; `64:ff9b:0:0:0:0:1.2.3.4` drops the separating colon
    s = s.slice(0, lastColon + 1);
    if (!s.endsWith('::')) s = s.slice(0, -1);
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const part = (h: string | undefined) => (h ? h.split(':') : []);
  const head = part(halves[0]);
  const rest = halves.length === 2 ? part(halves[1]) : [];
  const groups = [...head, ...rest];
  if (groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  const given = groups.length + tail.length;
  if (halves.length === 1 ? given !== 8 : given > 7) return undefined;
  const words = [
    ...head.map((g) => Number.parseInt(g, 16)),
    ...new Array<number>(8 - given).fill(0),
    ...rest.map((g) => Number.parseInt(g, 16)),
    ...tail,
  ];
  let n = 0n;
  for (const w of words) n = (n << 16n) | BigInt(w);
  return n;
}

/** RFC 5952: lower case, leading zeros dropped, the longest run of two or more zero groups as `::`. */
export function formatIpv6(n: bigint): string {
  const words: number[] = [];
  for (let i = 7; i >= 0; i--) words.push(Number((n >> BigInt(i * 16)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(':');
  if (best < 0) return hex(words);
  return `${hex(words.slice(0, best))}::${hex(words.slice(best + bestLen))}`;
}

/** `addr/len` (a bare address is a /128); undefined when malformed. */
export function parseCidr6(text: string): Ipv6Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIpv6(slash < 0 ? text : text.slice(0, slash));
  if (ip === undefined) return undefined;
  if (slash < 0) return { ip, prefixLen: 128 };
  const len = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(len) || Number(len) > 128) return undefined;
  return { ip, prefixLen: Number(len) };
}

function mask6(prefixLen: number): bigint {
  return prefixLen === 0 ? 0n : (ALL << BigInt(128 - prefixLen)) & ALL;
}

export function networkAddress6(c: Ipv6Cidr): bigint {
  return c.ip & mask6(c.prefixLen);
}

/** The block's canonical form: `fd42:1::/64`. */
export function formatNetwork6(c: Ipv6Cidr): string {
  return `${formatIpv6(networkAddress6(c))}/${c.prefixLen}`;
}

export function containsIp6(c: Ipv6Cidr, ip: bigint): boolean {
  return (ip & mask6(c.prefixLen)) === networkAddress6(c);
}

export function overlaps6(a: Ipv6Cidr, b: Ipv6Cidr): boolean {
  const m = mask6(Math.min(a.prefixLen, b.prefixLen));
  return (a.ip & m) === (b.ip & m);
}

/** The canonical text of an address (`fd42:1:0::2` → `fd42:1::2`); undefined when malformed. */
export function canonicalIpv6(text: string): string | undefined {
  const n = parseIpv6(text);
  return n === undefined ? undefined : formatIpv6(n);
}

/**
 * dockerd's IPAM for an IPv6 pool: the lowest address after the block's first (the subnet-router
 * anycast address, never handed out) that is neither excluded nor taken; at most `limit` tried.
 */
export function lowestFree6(
  block: string,
  excluded: ReadonlySet<string>,
  limit = 65_536,
): string | undefined {
  const c = parseCidr6(block);
  if (!c) return undefined;
  const first = networkAddress6(c) + 1n;
  const size = 1n << BigInt(128 - c.prefixLen);
  const last = networkAddress6(c) + size - 1n;
  let tried = 0;
  for (let ip = first; ip <= last && tried < limit; ip++, tried++) {
    const text = formatIpv6(ip);
    if (!excluded.has(text)) return text;
  }
  return undefined;
}
