import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { systemError } from '../../../common/errors.js';
import { runTool, type ToolResult } from '../../../common/host/run-tool.js';

export interface LinkAddress {
  address: string;
  prefixLen: number;
}

export interface LinkInfo {
  /** `bridge`, `veth`, ... ('' for a plain device). */
  kind: string;
  /** IPv4 addresses. */
  addresses: LinkAddress[];
}

/**
 * What the engine asks of the host's links and routes (iproute2): its bridge, and the address
 * blocks already in use. Per-container plumbing is the CNI plugins' job. Unit tests substitute a
 * fake; the engine runs `ip` (no shell).
 */
export interface LinkOps {
  /** The link's kind and IPv4 addresses; null when there is no such link. */
  link(name: string): Promise<LinkInfo | null>;
  /** Create bridge `name` when missing, give it `address` (dropping `drop`), and bring it up. */
  ensureBridge(name: string, address: LinkAddress, drop: LinkAddress[]): Promise<void>;
  /** Give the link an IPv6 address (no duplicate address detection: usable at once); idempotent. */
  ensureAddress6(name: string, address: LinkAddress): Promise<void>;
  /** IPv4 blocks in use on the host: routes of the main table (not the default) and addresses. */
  usedBlocks(): Promise<string[]>;
  /** Delete a link; a missing link is no error. */
  deleteLink(name: string): Promise<void>;
}

/**
 * A random locally administered unicast MAC, `02:42` and four random bytes (dockerd's bridges). A
 * bridge made without one takes the lowest MAC of its ports and changes it when that port goes:
 * the containers' ARP entries of its gateway address then point nowhere until they expire.
 */
export function randomMac(): string {
  return ['02', '42', ...[...randomBytes(4)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

function runIp(args: string[], input?: string): Promise<ToolResult> {
  return runTool('ip', args, { input, stdout: true });
}

interface IpAddrJson {
  ifname?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: Array<{ family?: string; local?: string; prefixlen?: number }>;
}

export class HostLinkOps implements LinkOps {
  async link(name: string): Promise<LinkInfo | null> {
    const r = await runIp(['-j', '-d', '-4', 'addr', 'show', 'dev', name]);
    if (r.code !== 0) {
      if (/does not exist/i.test(r.stderr)) return null;
      throw systemError(`ip addr show dev ${name}: ${r.stderr}`);
    }
    const [entry] = JSON.parse(r.stdout || '[]') as IpAddrJson[];
    if (!entry) return null;
    return {
      kind: entry.linkinfo?.info_kind ?? '',
      addresses: (entry.addr_info ?? [])
        .filter((a) => a.family === 'inet' && typeof a.local === 'string')
        .map((a) => ({ address: a.local ?? '', prefixLen: a.prefixlen ?? 32 })),
    };
  }

  async ensureBridge(name: string, address: LinkAddress, drop: LinkAddress[]): Promise<void> {
    const current = await this.link(name);
    const lines: string[] = [];
    // The bridge's MAC is fixed, as dockerd fixes docker0's: else the kernel gives it the lowest
    // of its ports' and changes it as veths come and go, and the containers' ARP entries for
    // the gateway go stale (no gratuitous ARP without arp_notify): their packets to it (DNS)
    // are lost for seconds. A bridge made before keeps its MAC, set as fixed.
    if (!current) lines.push(`link add name ${name} address ${randomMac()} type bridge`);
    else {
      const sys = `/sys/class/net/${name}`;
      const assigned = (await readFile(`${sys}/addr_assign_type`, 'utf8').catch(() => '')).trim();
      if (assigned !== '3') {
        const mac = (await readFile(`${sys}/address`, 'utf8').catch(() => '')).trim();
        const keep = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/.test(mac) && mac !== '00:00:00:00:00:00';
        lines.push(`link set dev ${name} address ${keep ? mac : randomMac()}`);
      }
    }
    for (const a of drop) lines.push(`addr del ${a.address}/${a.prefixLen} dev ${name}`);
    const has = current?.addresses.some(
      (a) => a.address === address.address && a.prefixLen === address.prefixLen,
    );
    if (!has) lines.push(`addr add ${address.address}/${address.prefixLen} dev ${name}`);
    lines.push(`link set ${name} up`);
    const r = await runIp(['-batch', '-'], `${lines.join('\n')}\n`);
    if (r.code !== 0) throw systemError(`cannot set up bridge ${name}: ${r.stderr}`);
  }

  async ensureAddress6(name: string, address: LinkAddress): Promise<void> {
    const r = await runIp([
      '-6',
      'addr',
      'replace',
      `${address.address}/${address.prefixLen}`,
      'dev',
      name,
      'nodad',
    ]);
    if (r.code !== 0) throw systemError(`cannot give bridge ${name} its IPv6 address: ${r.stderr}`);
  }

  async usedBlocks(): Promise<string[]> {
    const [routes, addrs] = await Promise.all([
      runIp(['-j', '-4', 'route', 'show', 'table', 'main']),
      runIp(['-j', '-4', 'addr', 'show']),
    ]);
    if (routes.code !== 0) throw systemError(`ip route: ${routes.stderr}`);
    if (addrs.code !== 0) throw systemError(`ip addr: ${addrs.stderr}`);
    const out: string[] = [];
    for (const r of JSON.parse(routes.stdout || '[]') as Array<{ dst?: string }>) {
      if (!r.dst || r.dst === 'default') continue;
      out.push(r.dst.includes('/') ? r.dst : `${r.dst}/32`);
    }
    for (const l of JSON.parse(addrs.stdout || '[]') as IpAddrJson[]) {
      for (const a of l.addr_info ?? []) {
        if (a.family === 'inet' && a.local && a.prefixlen !== undefined)
          out.push(`${a.local}/${a.prefixlen}`);
      }
    }
    return out;
  }

  async deleteLink(name: string): Promise<void> {
    const r = await runIp(['link', 'del', name]);
    if (r.code !== 0 && !/does not exist|Cannot find device/i.test(r.stderr)) {
      throw systemError(`ip link del ${name}: ${r.stderr}`);
    }
  }
}
