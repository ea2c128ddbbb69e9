/**
 * IPv4 addresses and CIDR blocks as unsigned 32-bit numbers: parsing, formatting, overlap. Pure.
 */

export interface Ipv4Cidr {
  /** The address as written (host bits kept: `172.18.0.1/16` keeps `.1`). */
  ip: number;
  prefixLen: number;
}

export function parseIpv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    n = n * 256 + v;
  }
  return n;
}

export function formatIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** `a.b.c.d/len` (a bare address is a /32); undefined when malformed. */
export function parseCidr(text: string): Ipv4Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIpv4(slash < 0 ? text : text.slice(0, slash));
  if (ip === undefined) return undefined;
  if (slash < 0) return { ip, prefixLen: 32 };
  const len = text.slice(slash + 1);
  if (!/^\d{1,2}$/.test(len) || Number(len) > 32) return undefined;
  return { ip, prefixLen: Number(len) };
}

export function maskOf(prefixLen: number): number {
  return prefixLen === 0 ? 0 : (0xffffffff << (32 - prefixLen)) >>> 0;
}

export function networkAddress(c: Ipv4Cidr): number {
  return (c.ip & maskOf(c.prefixLen)) >>> 0;
}

export function broadcastAddress(c: Ipv4Cidr): number {
  return (networkAddress(c) | (~maskOf(c.prefixLen) >>> 0)) >>> 0;
}

/** The block's canonical form: `172.18.0.0/16`. */
export function formatNetwork(c: Ipv4Cidr): string {
  return `${formatIpv4(networkAddress(c))}/${c.prefixLen}`;
}

export function containsIp(c: Ipv4Cidr, ip: number): boolean {
  return (ip & maskOf(c.prefixLen)) >>> 0 === networkAddress(c);
}

/** Do two blocks share any address? */
export function overlaps(a: Ipv4Cidr, b: Ipv4Cidr): boolean {
  const len = Math.min(a.prefixLen, b.prefixLen);
  const m = maskOf(len);
  return (a.ip & m) >>> 0 === (b.ip & m) >>> 0;
}
