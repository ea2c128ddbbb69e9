import { createHash } from 'node:crypto';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { LinkOps } from '../adapters/iproute.ops.js';
import type { DnsEntry } from '../dns/dns.records.js';
import type { EmbeddedDns } from '../dns/embedded-dns.js';
import { macFromIpv4 } from '../ipam.allocations.js';
import { formatIpv4, networkAddress, parseCidr } from '../ipv4.js';
import { pickSubnet } from '../subnet.js';
import type { OverlayOps } from './overlay.ops.js';
import {
  INGRESS_SANDBOX_ID,
  type NodeOverlayState,
  type OverlayLocalEndpoint,
  type OverlayLocalFacts,
  type OverlayNetworkState,
  type OverlayTask,
  type OverlayVip,
} from './overlay.types.js';

/**
 * A node's overlay data plane (issue 14 §9 step 2), driven by the swarm agent:
 * - per swarm network a task of the node uses, a network namespace `berth-ov-<engine>-<vni>`
 *   holding a bridge (`br0`, the gateway address) and a VXLAN device (`id <VNI> dstport <port>
 *   local <data-path address> nolearning proxy`, made in the engine's namespace and moved in), so
 *   the overlay block never enters the host's routing table; static neighbour and FDB entries for
 *   every attachment on other nodes, from the managers' picture (no gossip, no multicast); made
 *   when the first task needs it, removed when the last one goes;
 * - each task container gets a veth into each of its networks' bridges (`eth0`, `eth1`... with
 *   its allocated address and a MAC made from it, MTU 1450 for VXLAN's 50 bytes) and one into the
 *   node's `docker_gwbridge` (egress with NAT, the default route);
 * - the engine's DNS answers on the gateway bridge's address, in the engine's namespace: it knows
 *   the asker by its source address (the task's gateway-bridge address) and answers the names of
 *   the overlay networks that task is on (the managers' names: tasks.<service>, the service,
 *   aliases, container names).
 * Everything is made again from the managers' picture: at engine start whatever an earlier engine
 * left (namespaces, the gateway bridge and its rule) is swept, and running tasks are plugged again.
 */

export interface OverlayNetworksOptions {
  /** What tells this engine's namespaces from another engine's on the machine (its exec root). */
  engineKey: string;
  ops: OverlayOps;
  link: Pick<LinkOps, 'usedBlocks'>;
  dns: EmbeddedDns;
  log: Logger;
  /** The gateway bridge's name (dockerd's `docker_gwbridge`). */
  gwBridge?: string;
  /** The DNS port on the gateway address (53; tests may use another). */
  dnsPort?: number;
  /**
   * Runs the choice of the gateway bridge's block and the bridge's making under the host's
   * network lock (host-lock.ts), as the network service picks its bridges' blocks, so that two
   * engines on a machine (or an engine's user network made meanwhile) never take one block.
   */
  hostLock?: <T>(fn: () => Promise<T>) => Promise<T>;
}

const OVERLAY_MTU = 1450;
const GW_DNS_ID = 'swarm-gwbridge';

interface PlumbedTask {
  /** The container whose sandbox it is (the task ID for a plain container's attachment). */
  containerId: string;
  netns: string;
  networks: string[];
  /** Its address on each network, by network ID. */
  addresses: Map<string, string>;
  gwAddress: string;
  /** The interfaces made in its sandbox (an unplug of a sandbox that lives on removes them). */
  ifnames: string[];
  /** Its interface on each network, by network ID (a plain container's connect/disconnect). */
  ifnameOf: Map<string, string>;
}

export class OverlayNetworks {
  private state: NodeOverlayState = { local: '', port: 4789, networks: [] };
  /** Network ID → its namespace, for the networks plumbed on this node. */
  private readonly plumbed = new Map<string, { ns: string; vni: number; peers: string }>();
  private readonly tasks = new Map<string, PlumbedTask>();
  private gw?: { subnet: string; gateway: string; prefixLen: number };
  private chain: Promise<unknown> = Promise.resolve();
  private readonly prefix: string;
  private readonly gwName: string;

  constructor(private readonly o: OverlayNetworksOptions) {
    this.prefix = `berth-ov-${createHash('sha256').update(o.engineKey).digest('hex').slice(0, 6)}-`;
    this.gwName = o.gwBridge ?? 'docker_gwbridge';
  }

  /** The namespace of a network with this VNI on this engine. */
  namespaceOf(vni: number): string {
    return `${this.prefix}${vni}`;
  }

  /** The managers' picture changed: peers and names follow; networks no task uses any more go. */
  sync(state: NodeOverlayState): Promise<void> {
    return this.serial(async () => {
      this.state = state;
      for (const [id, p] of this.plumbed) {
        const n = this.network(id);
        if (n) await this.setPeers(p, n);
      }
      this.refreshDns();
    });
  }

  /** The gateway bridge's address (the tasks' DNS server), the bridge made if missing. */
  gatewayAddress(): Promise<string> {
    return this.serial(async () => (await this.ensureGateway()).gateway);
  }

  /** A started task container joins its networks and the gateway bridge (after a failure: detach it). */
  attach(task: OverlayTask): Promise<void> {
    return this.serial(async () => {
      const gw = task.gateway !== false ? await this.ensureGateway() : undefined;
      const plumbed: PlumbedTask = {
        containerId: task.containerId ?? task.taskId,
        netns: task.netns,
        networks: [],
        addresses: new Map(),
        gwAddress: '',
        ifnames: [],
        ifnameOf: new Map(),
      };
      this.tasks.set(task.taskId, plumbed);
      let index = task.firstIndex ?? (task.keepsDefaultNetwork ? 1 : 0);
      for (const a of task.attachments) {
        const n = this.network(a.networkId);
        if (!n) throw new Error(`overlay network ${a.networkId} is not known on this node yet`);
        const ns = await this.ensureNetwork(n);
        // known before the plug: a detach after a failure removes what was made for it
        plumbed.networks.push(a.networkId);
        const ip = a.address.split('/')[0] ?? '';
        const ifname = `eth${index++}`;
        plumbed.ifnames.push(ifname);
        plumbed.ifnameOf.set(a.networkId, ifname);
        if (task.stale) await this.o.ops.unplugContainer(task.netns, ifname).catch(() => undefined);
        await this.o.ops.plugContainer(ns, task.netns, {
          ifname,
          address: a.address,
          mac: macFromIpv4(ip) ?? '',
          mtu: OVERLAY_MTU,
        });
        plumbed.addresses.set(a.networkId, ip);
        // the address may have been another node's a moment ago: the bridge's learnt entry goes
        const mac = macFromIpv4(ip);
        if (mac) await this.o.ops.forgetMac(ns, n.vni, mac).catch(() => undefined);
      }
      if (gw) {
        plumbed.gwAddress = this.freeGatewayAddress(gw);
        plumbed.ifnames.push(`eth${index}`);
        if (task.stale) await this.o.ops.unplugContainer(task.netns, `eth${index}`).catch(() => undefined);
        await this.o.ops.plugGateway(this.gwName, task.netns, {
          ifname: `eth${index}`,
          address: `${plumbed.gwAddress}/${gw.prefixLen}`,
          gateway: gw.gateway,
          defaultRoute: !task.keepsDefaultNetwork,
        });
      }
      this.refreshDns();
    });
  }

  /**
   * A plugged sandbox joins one more network as `ifname` (a plain container's `network connect`):
   * its other interfaces, their addresses and connections are not touched.
   */
  plugOne(
    taskId: string,
    a: OverlayTask['attachments'][number],
    ifname: string,
    opts: { stale?: boolean } = {},
  ): Promise<void> {
    return this.serial(async () => {
      const t = this.tasks.get(taskId);
      if (!t) throw new Error(`${taskId} is not plugged into overlay networks`);
      if (t.networks.includes(a.networkId)) return;
      const n = this.network(a.networkId);
      if (!n) throw new Error(`overlay network ${a.networkId} is not known on this node yet`);
      const ns = await this.ensureNetwork(n);
      t.networks.push(a.networkId);
      t.ifnames.push(ifname);
      t.ifnameOf.set(a.networkId, ifname);
      const ip = a.address.split('/')[0] ?? '';
      const mac = macFromIpv4(ip);
      if (opts.stale) await this.o.ops.unplugContainer(t.netns, ifname).catch(() => undefined);
      await this.o.ops.plugContainer(ns, t.netns, {
        ifname,
        address: a.address,
        mac: mac ?? '',
        mtu: OVERLAY_MTU,
      });
      t.addresses.set(a.networkId, ip);
      if (mac) await this.o.ops.forgetMac(ns, n.vni, mac).catch(() => undefined);
      this.refreshDns();
    });
  }

  /**
   * A plugged sandbox leaves one network (a plain container's `network disconnect`): that
   * interface goes, and the network's namespace when no other task uses it; the rest stays.
   */
  unplugOne(taskId: string, networkId: string): Promise<void> {
    return this.serial(async () => {
      const t = this.tasks.get(taskId);
      if (!t?.networks.includes(networkId)) return;
      const ifname = t.ifnameOf.get(networkId);
      t.networks = t.networks.filter((id) => id !== networkId);
      t.addresses.delete(networkId);
      t.ifnameOf.delete(networkId);
      if (ifname) {
        t.ifnames = t.ifnames.filter((i) => i !== ifname);
        await this.o.ops
          .unplugContainer(t.netns, ifname)
          .catch((err: unknown) =>
            this.o.log.warn('cannot remove an overlay interface', { ifname, error: errorMessage(err) }),
          );
      }
      await this.dropUnused([networkId]);
      this.refreshDns();
    });
  }

  /**
   * The task's container stopped or went: its networks go once no other task uses them. With
   * `unplug` (a sandbox that lives on: a plain container leaving a network), its interfaces go too.
   */
  detach(taskId: string, opts: { unplug?: boolean } = {}): Promise<void> {
    return this.serial(async () => {
      const t = this.tasks.get(taskId);
      if (!t) return;
      this.tasks.delete(taskId);
      if (opts.unplug) {
        for (const ifname of t.ifnames) {
          await this.o.ops
            .unplugContainer(t.netns, ifname)
            .catch((err: unknown) =>
              this.o.log.warn('cannot remove an overlay interface', { ifname, error: errorMessage(err) }),
            );
        }
      }
      await this.dropUnused(t.networks);
      this.refreshDns();
    });
  }

  /** Of these networks, those no task uses any more go (their namespace, their DNS records). */
  private async dropUnused(networkIds: string[]): Promise<void> {
    for (const id of networkIds) {
      if ([...this.tasks.values()].some((o) => o.networks.includes(id))) continue;
      const p = this.plumbed.get(id);
      this.plumbed.delete(id);
      this.o.dns.records.drop(id);
      if (p) await this.o.ops.deleteNamespace(p.ns);
    }
  }

  /** The VIPs of the task's networks with their running tasks (the load balancer's table). */
  vipsFor(taskId: string): OverlayVip[] {
    const t = this.tasks.get(taskId);
    if (!t) return [];
    return t.networks.flatMap((id) => this.network(id)?.vips ?? []);
  }

  /**
   * The network's endpoints on this node and its peers, while it is plumbed here (undefined
   * otherwise: a manager without a local task shows neither, as dockerd).
   */
  localFacts(networkId: string): OverlayLocalFacts | undefined {
    const n = this.network(networkId);
    if (!n || !this.plumbed.has(networkId)) return undefined;
    const prefix = n.subnet.split('/')[1] ?? '32';
    const endpoints: OverlayLocalEndpoint[] = [];
    for (const [taskId, t] of this.tasks) {
      const ip = t.addresses.get(networkId);
      if (!ip) continue;
      const ingress = taskId === INGRESS_SANDBOX_ID;
      endpoints.push({
        sandbox: ingress ? INGRESS_SANDBOX_ID : t.containerId,
        ...(ingress ? { name: `${n.name}-endpoint` } : {}),
        endpointId: createHash('sha256').update(`endpoint\0${taskId}\0${networkId}`).digest('hex'),
        mac: macFromIpv4(ip) ?? '',
        ipv4: `${ip}/${prefix}`,
      });
    }
    return { endpoints, peers: n.nodes.map((x) => ({ ...x })) };
  }

  /** The networks the node's tasks use, as the managers last said. */
  networks(): OverlayNetworkState[] {
    return this.state.networks;
  }

  /** Whether the managers' picture has the network (a container's attachment waits for it). */
  knows(networkId: string): boolean {
    return this.network(networkId) !== undefined;
  }

  /** Whether the task was plugged (since this engine started). */
  attached(taskId: string): boolean {
    return this.tasks.has(taskId);
  }

  /** Engine start, or the node left: every namespace of this engine, the gateway bridge and its rule go. */
  sweep(): Promise<void> {
    return this.serial(async () => {
      for (const ns of await this.o.ops.listNamespaces(this.prefix)) {
        await this.o.ops
          .deleteNamespace(ns)
          .catch((err: unknown) =>
            this.o.log.warn('cannot remove an overlay namespace', { ns, error: errorMessage(err) }),
          );
      }
      this.plumbed.clear();
      this.tasks.clear();
      this.state = { ...this.state, networks: [] };
      await this.o.dns.stop(GW_DNS_ID).catch(() => undefined);
      const subnet = this.gw?.subnet ?? (await this.gatewaySubnetOnHost());
      if (subnet || (await this.o.ops.hasLink(this.gwName)))
        await this.o.ops.deleteGwBridge(this.gwName, subnet ?? '');
      this.gw = undefined;
    });
  }

  private network(id: string): OverlayNetworkState | undefined {
    return this.state.networks.find((n) => n.id === id);
  }

  /** The network's static entries, when they changed since the last write. */
  private async setPeers(
    p: { ns: string; vni: number; peers: string },
    n: OverlayNetworkState,
  ): Promise<void> {
    const peers = this.remotePeers(n);
    const text = JSON.stringify(peers);
    if (text === p.peers) return;
    p.peers = '';
    await this.o.ops.setPeers(p.ns, p.vni, peers);
    p.peers = text;
  }

  private remotePeers(n: OverlayNetworkState) {
    return n.peers.filter((p) => p.node !== this.state.local && p.mac);
  }

  private async ensureNetwork(n: OverlayNetworkState): Promise<string> {
    const had = this.plumbed.get(n.id);
    if (had) return had.ns;
    const block = parseCidr(n.subnet);
    if (!block) throw new Error(`overlay network ${n.name} has no IPv4 block`);
    if (!this.state.local) throw new Error('this node has no data-path address');
    const ns = this.namespaceOf(n.vni);
    await this.o.ops.ensureNetwork(ns, {
      vni: n.vni,
      port: this.state.port,
      local: this.state.local,
      gateway: n.gateway,
      prefixLen: block.prefixLen,
      mtu: OVERLAY_MTU,
    });
    const plumbed = { ns, vni: n.vni, peers: '' };
    this.plumbed.set(n.id, plumbed);
    await this.setPeers(plumbed, n);
    return ns;
  }

  private async ensureGateway(): Promise<{ subnet: string; gateway: string; prefixLen: number }> {
    if (this.gw) return this.gw;
    const locked = this.o.hostLock ?? (<T>(fn: () => Promise<T>) => fn());
    const choice = await locked(async () => {
      const existing = await this.gatewaySubnetOnHost();
      const picked = existing
        ? {
            subnet: existing,
            gateway: formatIpv4(networkAddress(parseCidr(existing) ?? { ip: 0, prefixLen: 32 }) + 1),
            prefixLen: Number(existing.split('/')[1]),
          }
        : pickSubnet(await this.o.link.usedBlocks());
      await this.o.ops.ensureGwBridge(this.gwName, picked);
      return picked;
    });
    this.gw = choice;
    try {
      await this.o.dns.serve(GW_DNS_ID, {
        address: choice.gateway,
        port: this.o.dnsPort ?? 53,
        subnets: [choice.subnet],
      });
    } catch (err) {
      this.o.log.warn('cannot answer DNS on the gateway bridge', { error: errorMessage(err) });
    }
    return choice;
  }

  /** The block of a gateway bridge an earlier engine left (its address), if any. */
  private async gatewaySubnetOnHost(): Promise<string | undefined> {
    if (!(await this.o.ops.hasLink(this.gwName))) return undefined;
    return this.o.ops.bridgeBlock(this.gwName);
  }

  private freeGatewayAddress(gw: { subnet: string; gateway: string }): string {
    const block = parseCidr(gw.subnet);
    if (!block) throw new Error('the gateway bridge has no block');
    const used = new Set([gw.gateway, ...[...this.tasks.values()].map((t) => t.gwAddress)]);
    const size = 2 ** (32 - block.prefixLen);
    const base = networkAddress(block);
    for (let i = 1; i < size - 1; i++) {
      const ip = formatIpv4((base + i) >>> 0);
      if (!used.has(ip)) return ip;
    }
    throw new Error('the gateway bridge has no address left');
  }

  /** The DNS picture: each local task on the gateway bridge and on its networks, the networks' names. */
  private refreshDns(): void {
    const dns = this.o.dns;
    const gwEntries: DnsEntry[] = [];
    const byNetwork = new Map<string, DnsEntry[]>();
    for (const [taskId, t] of this.tasks) {
      if (t.gwAddress) gwEntries.push({ names: [], ipv4: t.gwAddress, sandbox: taskId });
      for (const [id, ip] of t.addresses) {
        byNetwork.set(id, [...(byNetwork.get(id) ?? []), { names: [], ipv4: ip, sandbox: taskId }]);
      }
    }
    dns.setRecords(GW_DNS_ID, gwEntries);
    for (const id of this.plumbed.keys()) {
      const n = this.network(id);
      if (!n) continue;
      dns.records.describe(id, { domain: n.name, subnets: [n.subnet] });
      const entries = [...(byNetwork.get(id) ?? []), ...n.names.map((x) => ({ names: x.names, ipv4: x.ip }))];
      dns.setRecords(id, entries);
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
