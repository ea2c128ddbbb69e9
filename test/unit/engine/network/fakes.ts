import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Logger } from '../../../../src/common/log.js';
import type { CniCall, CniRunner } from '../../../../src/engine/network/adapters/cni.runner.js';
import type { LinkAddress, LinkInfo, LinkOps } from '../../../../src/engine/network/adapters/iproute.ops.js';
import type { BridgePolicy, FirewallOps } from '../../../../src/engine/network/adapters/iptables.ops.js';
import type { NetnsOps } from '../../../../src/engine/network/adapters/netns.ops.js';
import type { PortRuleOps } from '../../../../src/engine/network/adapters/port-rules.ops.js';
import type {
  PortHolder,
  PortSocketOps,
  PortTarget,
} from '../../../../src/engine/network/adapters/port-sockets.js';

export const quietLog = (): Logger => new Logger('error');

/** Links and routes of a pretend host. */
export class FakeLinks implements LinkOps {
  links = new Map<string, LinkInfo>();
  used: string[] = ['192.0.2.0/24', '172.17.0.0/16'];
  calls: string[] = [];
  async link(name: string): Promise<LinkInfo | null> {
    return this.links.get(name) ?? null;
  }
  async ensureBridge(name: string, address: LinkAddress, drop: LinkAddress[]): Promise<void> {
    this.calls.push(`ensure ${name} ${address.address}/${address.prefixLen} drop=${drop.length}`);
    const l = this.links.get(name) ?? { kind: 'bridge', addresses: [] };
    l.addresses = l.addresses.filter((a) => !drop.some((d) => d.address === a.address));
    if (!l.addresses.some((a) => a.address === address.address)) l.addresses.push(address);
    this.links.set(name, l);
    this.used.push(`${address.address}/${address.prefixLen}`);
  }
  async ensureAddress6(name: string, address: LinkAddress): Promise<void> {
    this.calls.push(`address6 ${name} ${address.address}/${address.prefixLen}`);
  }
  async usedBlocks(): Promise<string[]> {
    return [...this.used];
  }
  async deleteLink(name: string): Promise<void> {
    this.calls.push(`delete ${name}`);
    this.links.delete(name);
  }
}

export class FakeFirewall implements FirewallOps {
  calls: string[] = [];
  async allowBridge(bridge: string, subnet: string, policy?: BridgePolicy): Promise<void> {
    const v6 = policy?.subnets6?.length ? ` v6=${policy.subnets6.join(',')}` : '';
    const flags = policy
      ? ` internal=${policy.internal} icc=${policy.icc} masq=${policy.masquerade}${v6}`
      : '';
    this.calls.push(`allow ${bridge} ${subnet}${flags}`);
  }
  async removeBridge(bridge: string): Promise<void> {
    this.calls.push(`remove ${bridge}`);
  }
}

/** Namespaces as plain files (no root needed). */
export class FakeNetns implements NetnsOps {
  live = new Set<string>();
  calls: string[] = [];
  async create(path: string): Promise<void> {
    this.calls.push(`create ${path}`);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, '');
    this.live.add(path);
  }
  async remove(path: string): Promise<void> {
    this.calls.push(`remove ${path}`);
    this.live.delete(path);
  }
  async list(dir: string): Promise<string[]> {
    return [...this.live].filter((p) => dirname(p) === dir).map((p) => p.slice(dir.length + 1));
  }
  /** Namespaces a process is pretended to live in. */
  busy = new Set<string>();
  async inUse(path: string): Promise<boolean> {
    return this.busy.has(path);
  }
}

/**
 * The bridge and loopback plugins as far as berth can see them: ADD hands out the next address of
 * the configured block and records it as host-local does (a file per address in dataDir); DEL
 * releases the container's addresses.
 */
export class FakeCni implements CniRunner {
  calls: CniCall[] = [];
  next = 2;
  fail?: (plugin: string, call: CniCall) => Error | undefined;
  /** The interfaces the bridge plugin made, by namespace path (a namespace's own are its). */
  readonly links = new Map<string, Set<string>>();
  async exec(plugin: string, call: CniCall): Promise<unknown> {
    this.calls.push(call);
    const err = this.fail?.(plugin, call);
    if (err) throw err;
    if (plugin === 'loopback')
      return { cniVersion: '1.0.0', interfaces: [{ name: 'lo', sandbox: call.netns }] };
    const ipam = call.config.ipam as { ranges: Array<Array<{ subnet: string }>>; dataDir: string };
    const dir = join(ipam.dataDir, String(call.config.name));
    if (call.command === 'DEL') {
      this.links.get(call.netns)?.delete(call.ifname);
      for (const f of await readdir(dir).catch(() => [] as string[])) {
        const text = await readFile(join(dir, f), 'utf8').catch(() => '');
        const [id, ifname] = text.split(/\r?\n/);
        if (id === call.containerId && (!ifname || ifname === call.ifname)) await rm(join(dir, f));
      }
      return undefined;
    }
    const base = (ipam.ranges[0]?.[0]?.subnet ?? '').split('/')[0]?.split('.').slice(0, 3).join('.');
    // the addresses asked for: CNI_ARGS' IP=, or (with IPv6) the configuration's args.cni.ips
    const listed = (call.config.args as { cni?: { ips?: string[] } } | undefined)?.cni?.ips ?? [];
    const asked = /IP=([0-9.]+)/.exec(call.args ?? '')?.[1] ?? listed.find((a) => !a.includes(':'));
    const ip = asked ?? `${base}.${this.next++}`;
    const ip6 = listed.find((a) => a.includes(':'));
    const v6 = ipam.ranges[1]?.[0] as { subnet: string; gateway?: string } | undefined;
    // as the bridge plugin: the veth pair first (an interface of that name already in the
    // namespace fails the ADD), IPAM after; an IPAM failure leaves the pair behind
    const links = this.links.get(call.netns) ?? new Set<string>();
    this.links.set(call.netns, links);
    if (links.has(call.ifname))
      throw new Error(`container veth name provided (${call.ifname}) already exists`);
    links.add(call.ifname);
    await mkdir(dir, { recursive: true });
    // host-local refuses an address another container holds
    const holder = await readFile(join(dir, ip), 'utf8').catch(() => undefined);
    if (holder !== undefined && holder.split(/\r?\n/)[0] !== call.containerId)
      throw new Error(`failed to allocate for range 0: requested IP address ${ip} is not available`);
    await writeFile(join(dir, ip), `${call.containerId}\r\n${call.ifname}`);
    if (ip6) await writeFile(join(dir, ip6), `${call.containerId}\r\n${call.ifname}`);
    return {
      cniVersion: '1.0.0',
      interfaces: [
        { name: String(call.config.bridge), mac: '02:00:00:00:00:01' },
        { name: 'veth0', mac: '02:00:00:00:00:02' },
        { name: call.ifname, mac: '02:00:00:00:00:03', sandbox: call.netns },
      ],
      ips: [
        { interface: 2, address: `${ip}/16`, gateway: `${base}.1` },
        ...(ip6 && v6
          ? [{ interface: 2, address: `${ip6}/${v6.subnet.split('/')[1]}`, gateway: v6.gateway }]
          : []),
      ],
      dns: {},
    };
  }
}

/** iptables as a list of restore inputs, and a save text the test sets. */
export class FakePortRules implements PortRuleOps {
  inputs: string[] = [];
  saveText = '';
  localnet = new Map<string, boolean>();
  fail = false;
  async restore(input: string): Promise<void> {
    if (this.fail) throw new Error('iptables-restore: failed');
    this.inputs.push(input);
  }
  async save(): Promise<string> {
    return this.saveText;
  }
  async routeLocalnet(bridge: string, on: boolean): Promise<void> {
    this.localnet.set(bridge, on);
  }
}

/** Host ports as a set: a port in `hostTaken` is some other process's (EADDRINUSE). */
export class FakePortSockets implements PortSocketOps {
  bound = new Map<string, PortTarget>();
  hostTaken = new Set<string>();
  noIpv6 = false;
  async bind(proto: string, hostIp: string, hostPort: number, target: PortTarget): Promise<PortHolder> {
    const key = `${proto} ${hostIp} ${hostPort}`;
    if (this.noIpv6 && hostIp.includes(':'))
      throw Object.assign(new Error('EAFNOSUPPORT'), { code: 'EAFNOSUPPORT' });
    if (this.hostTaken.has(key) || this.bound.has(key))
      throw Object.assign(new Error(`listen EADDRINUSE ${key}`), { code: 'EADDRINUSE' });
    this.bound.set(key, target);
    return {
      close: async () => {
        this.bound.delete(key);
      },
    };
  }
}

/** A network service's host operations, all fakes; the CNI runner and namespaces given or new. */
export function fakeNetworkOps(cni = new FakeCni(), netns = new FakeNetns()) {
  return {
    cni,
    netns,
    link: new FakeLinks(),
    firewall: new FakeFirewall(),
    portRules: new FakePortRules(),
    portSockets: new FakePortSockets(),
  };
}
