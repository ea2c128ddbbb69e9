import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode } from '../../common/errors.js';
import { broadcastAddress, formatIpv4, networkAddress, parseCidr, parseIpv4 } from './ipv4.js';

/** One address host-local handed out: a file named by the address under `<dataDir>/<network>/`. */
export interface Allocation {
  /** The CNI network name (the directory). */
  network: string;
  ip: string;
  /** CNI_CONTAINERID of the ADD (berth passes the sandbox ID). */
  containerId: string;
  ifname: string;
}

/** host-local's file content: the container ID, then (since CNI plugins 0.9) the interface name. */
export function parseAllocationFile(text: string): { containerId: string; ifname: string } {
  const [id = '', ifname = ''] = text.split(/\r?\n/);
  return { containerId: id.trim(), ifname: ifname.trim() };
}

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return [];
    throw err;
  }
}

/** Every allocation recorded under host-local's data directory. */
export async function listAllocations(dataDir: string): Promise<Allocation[]> {
  const out: Allocation[] = [];
  for (const network of await names(dataDir)) {
    for (const file of await names(join(dataDir, network))) {
      // addresses only: skip `lock` and `last_reserved_ip.N`
      if (!/^[0-9a-f.:]+$/i.test(file) || !/[.:]/.test(file)) continue;
      const text = await readFile(join(dataDir, network, file), 'utf8').catch(() => undefined);
      if (text === undefined) continue;
      out.push({ network, ip: file, ...parseAllocationFile(text) });
    }
  }
  return out;
}

/**
 * Release addresses as host-local's DEL does: the file of each address goes when it names the
 * container ID (and the interface, when the file has one); a file that is gone is no error.
 */
export async function releaseAllocations(
  dataDir: string,
  network: string,
  containerId: string,
  ifname: string,
  addresses: readonly string[],
): Promise<void> {
  for (const ip of addresses) {
    const path = join(dataDir, network, ip);
    const text = await readFile(path, 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    const owner = parseAllocationFile(text);
    if (owner.containerId !== containerId || (owner.ifname && owner.ifname !== ifname)) continue;
    await rm(path, { force: true });
  }
}

/**
 * The address dockerd's IPAM would hand out next: the lowest of the subnet's host addresses that
 * is neither the gateway nor taken (host-local on its own goes round-robin).
 */
export function lowestFree(subnet: string, gateway: string, taken: ReadonlySet<string>): string | undefined {
  const c = parseCidr(subnet);
  if (!c) return undefined;
  const gw = parseIpv4(gateway);
  const first = networkAddress(c) + 1;
  const last = broadcastAddress(c) - 1;
  for (let ip = first; ip <= last; ip++) {
    if (ip === gw) continue;
    const text = formatIpv4(ip);
    if (!taken.has(text)) return text;
  }
  return undefined;
}

/** The addresses host-local gave an endpoint (its allocation files' names). */
export function endpointAddresses(ep: { ipAddress: string; ipv6Address?: string }): string[] {
  return [ep.ipAddress, ...(ep.ipv6Address ? [ep.ipv6Address] : [])].filter((a) => a !== '');
}

/** dockerd's MAC for an IPv4 address: 02:42 and the address's four bytes. */
export function macFromIpv4(ip: string): string | undefined {
  const n = parseIpv4(ip);
  if (n === undefined) return undefined;
  const bytes = [2, 0x42, (n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}
