import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { conflict, errorMessage, forbidden, invalidParameter, notFound } from '../../common/errors.js';
import { checkFilterNames } from '../../common/filters.js';
import { randomId } from '../../common/ids.js';
import type { Logger } from '../../common/log.js';
import { parseFilterTime, parseTimestampMs } from '../../common/time.js';
import type { EventsService } from '../events/events.service.js';
import { type CniRunner, HostCniRunner } from './adapters/cni.runner.js';
import { HostLinkOps, type LinkOps } from './adapters/iproute.ops.js';
import { type FirewallOps, HostFirewallOps } from './adapters/iptables.ops.js';
import { HostNetnsOps, type NetnsOps } from './adapters/netns.ops.js';
import type { PortRuleOps } from './adapters/port-rules.ops.js';
import type { PortSocketOps } from './adapters/port-sockets.js';
import { setupBridge } from './bridge.setup.js';
import { type AddedInterface, bridgePluginConfig, cniArgs, parseAddResult } from './cni.config.js';
import { EmbeddedDns } from './dns/embedded-dns.js';
import { DEFAULT_LOCK_PATH, hostLockAt } from './host-lock.js';
import {
  endpointAddresses,
  listAllocations,
  lowestFree,
  macFromIpv4,
  releaseAllocations,
} from './ipam.allocations.js';
import {
  containsIp,
  formatIpv4,
  formatNetwork,
  networkAddress,
  overlaps,
  parseCidr,
  parseIpv4,
} from './ipv4.js';
import {
  canonicalIpv6,
  containsIp6,
  formatIpv6,
  formatNetwork6,
  lowestFree6,
  networkAddress6,
  overlaps6,
  parseCidr6,
  parseIpv6,
} from './ipv6.js';
import { type CreatePlan, planNetwork } from './network.create.js';
import { loadNetworks, newNetworkIdentity, type SavedUserNetwork, saveNetworks } from './network.state.js';
import type {
  AttachedContainer,
  AttachRequest,
  BridgeInfo,
  BridgePlumbing,
  ContainerNetworking,
  Endpoint,
  PendingAttach,
  PlumbedInterface,
  PredefinedNetwork,
  ReleaseTarget,
} from './network.types.js';
import { filterNetworks, labelsMatch, type NetworkFacts, networkView } from './network.views.js';
import { PortPublisher } from './ports/port-publisher.js';
import { type MadeSandbox, POOL_SIZE, type PooledSandbox, SandboxPool } from './sandbox-pool.js';
import { pickSubnet } from './subnet.js';

export interface NetworkServiceOptions {
  dataRoot: string;
  execRoot: string;
  /** The default bridge's Linux name; null for none (`--bridge none`: containers get loopback only). */
  bridge: string | null;
  /** `--bip`: the bridge's address and prefix length. */
  bip?: string;
  /** `--host-gateway-ip`: what `host-gateway` stands for (else the default bridge's address). */
  hostGatewayIp?: string;
  events: EventsService;
  log: Logger;
  /** Host adapters (tests substitute fakes). */
  ops?: {
    cni?: CniRunner;
    netns?: NetnsOps;
    link?: LinkOps;
    firewall?: FirewallOps;
    portRules?: PortRuleOps;
    portSockets?: PortSocketOps;
  };
  /** The host-wide lock taken while picking an address block. */
  lockPath?: string;
  /** Plumbed sandboxes kept per busy network (POOL_SIZE; 0: none, every start plumbs its own). */
  poolSize?: number;
}

/** The network layer: the containers' side (ContainerNetworking) and the /networks API's. */
export interface NetworkService extends ContainerNetworking {
  list(filters: Map<string, string[]>): Array<Record<string, unknown>>;
  /** By ID, name or unique ID prefix; `scope` other than the network's is a 404, as dockerd. */
  inspect(idOrName: string, opts?: { scope?: string }): Record<string, unknown>;
  /** POST /networks/create: a user-defined bridge network (its bridge and rules made). */
  create(body: Record<string, unknown>): Promise<{ Id: string; Warning: string }>;
  /** DELETE /networks/{id}: 403 for predefined networks and while endpoints are active. */
  remove(idOrName: string): Promise<void>;
  /** POST /networks/prune: user-defined networks no container is attached to. */
  prune(filters: Map<string, string[]>): Promise<{ NetworksDeleted: string[] | null }>;
  /** Wait for the releases under way (engine shutdown; sandboxes of running containers stay). */
  close(): Promise<void>;
}

const CLOSE_WAIT_MS = 20_000;

export async function createNetworkService(o: NetworkServiceOptions): Promise<NetworkService> {
  const log = o.log.child('network');
  const lockPath = o.lockPath ?? DEFAULT_LOCK_PATH;
  const hostLock = hostLockAt(lockPath);
  const cni = o.ops?.cni ?? new HostCniRunner();
  const netns = o.ops?.netns ?? new HostNetnsOps();
  const link = o.ops?.link ?? new HostLinkOps();
  const firewall = o.ops?.firewall ?? new HostFirewallOps(hostLock);
  const stateDir = join(o.dataRoot, 'network');
  const statePath = join(stateDir, 'networks.json');
  const ipamDir = join(stateDir, 'ipam');
  const netnsDir = join(o.execRoot, 'netns');
  const ports = new PortPublisher({ log, rules: o.ops?.portRules, sockets: o.ops?.portSockets });

  const saved = await loadNetworks(statePath);
  let bridge: BridgeInfo | null = null;
  if (o.bridge !== null) {
    const setup = await setupBridge({
      name: o.bridge,
      bip: o.bip,
      saved: saved.bridge,
      link,
      firewall,
      lockPath,
      log,
    });
    const identity = saved.bridge ?? newNetworkIdentity();
    saved.bridge = {
      id: identity.id,
      created: identity.created,
      name: setup.name,
      subnet: setup.subnet,
      gateway: setup.gateway,
      gatewayInConfig: setup.gatewayInConfig,
    };
    bridge = { ...saved.bridge, cniName: setup.name, prefixLen: setup.prefixLen };
    log.info('default bridge ready', { bridge: setup.name, subnet: setup.subnet, gateway: setup.gateway });
  }
  const dns = new EmbeddedDns({ log });
  // user-defined networks keep their bridges and rules across restarts: made again when missing
  for (const u of saved.user) {
    try {
      await plumbUserBridge(u);
      await serveDns(u);
    } catch (err) {
      log.warn('cannot set up the bridge of a network', { network: u.name, error: errorMessage(err) });
    }
  }
  await saveNetworks(statePath, saved);

  /** Sandboxes in use (attached, or restored at start): never swept. */
  const active = new Set<string>();
  /** The DNS entries of each sandbox's endpoints (removed with the interface or the sandbox). */
  const dnsKeys = new Map<string, Array<{ networkId: string; endpointId: string; ifname: string }>>();
  const releasing = new Map<string, Promise<void>>();
  let containerSource: () => AttachedContainer[] = () => [];
  /** Creates and removals, one at a time (names, blocks and bridges are checked then made). */
  let writes: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = writes.then(fn, fn);
    writes = next.catch(() => undefined);
    return next;
  };

  const ids: Record<PredefinedNetwork, string> = {
    bridge: saved.bridge?.id ?? '',
    host: saved.host.id,
    none: saved.none.id,
  };

  /**
   * Addresses this engine chose, by sandbox interface (`<sandbox>/<ifname>`), from the pick until
   * the interface is released: a listing of host-local's files taken before an ADD wrote its file
   * must not hand it out again.
   */
  const reserved = new Map<string, { network: string; ip: string; ip6?: string }>();

  function ipv4Configs(u: SavedUserNetwork) {
    return u.ipam.filter((c) => c.Subnet && !c.Subnet.includes(':'));
  }

  /** The IPv6 block of an EnableIPv6 network (its Gateway filled in at create). */
  function ipv6Config(u: SavedUserNetwork | undefined) {
    return u?.enableIPv6 ? u.ipam.find((c) => c.Subnet.includes(':')) : undefined;
  }

  /** The bridge, its addresses (a gateway per IPv4 block) and its rules. */
  async function plumbUserBridge(u: SavedUserNetwork): Promise<void> {
    const blocks = ipv4Configs(u);
    for (const c of blocks) {
      const block = parseCidr(c.Subnet);
      if (!block || !c.Gateway) continue;
      await link.ensureBridge(u.bridge, { address: c.Gateway, prefixLen: block.prefixLen }, []);
    }
    const v6 = ipv6Config(u);
    const block6 = v6 && parseCidr6(v6.Subnet);
    // the engine gives the bridge its IPv6 gateway (without DAD): the bridge plugin would, but
    // then fails setting the bridge's MAC on a bridge without ports
    if (v6?.Gateway && block6)
      await link.ensureAddress6(u.bridge, { address: v6.Gateway, prefixLen: block6.prefixLen });
    await firewall.allowBridge(u.bridge, blocks[0]?.Subnet ?? '', {
      subnets: blocks.map((c) => c.Subnet),
      ...(v6 ? { subnets6: [v6.Subnet] } : {}),
      internal: u.internal,
      icc: u.icc,
      masquerade: u.masquerade,
    });
  }

  /** The network's DNS responder on its gateway address (a failure is logged: names do not resolve). */
  async function serveDns(u: SavedUserNetwork): Promise<void> {
    const blocks = ipv4Configs(u);
    const gateway = blocks[0]?.Gateway;
    if (!gateway) return;
    try {
      await dns.serve(u.id, {
        address: gateway,
        domain: u.name,
        subnets: [...blocks.map((c) => c.Subnet), ...(ipv6Config(u) ? [ipv6Config(u)?.Subnet ?? ''] : [])],
        forward: !u.internal,
      });
    } catch (err) {
      log.warn('cannot answer DNS on a network', {
        network: u.name,
        address: gateway,
        error: errorMessage(err),
      });
    }
  }

  function putDns(ep: Endpoint): boolean {
    if (!ep.dns || !ep.ipAddress) return false;
    dns.addEndpoint(ep.networkId, ep.endpointId, {
      names: ep.dns.names,
      ipv4: ep.ipAddress,
      ...(ep.ipv6Address ? { ipv6: ep.ipv6Address } : {}),
      sandbox: ep.sandboxId,
      ...(ep.dns.upstreams ? { upstreams: ep.dns.upstreams } : {}),
      ...(ep.dns.ndotsSet ? { ndotsSet: true } : {}),
      ...(ep.dns.links?.length ? { links: ep.dns.links } : {}),
    });
    return true;
  }

  function addDns(ep: Endpoint): void {
    if (!putDns(ep)) return;
    const list = dnsKeys.get(ep.sandboxId) ?? [];
    list.push({ networkId: ep.networkId, endpointId: ep.endpointId, ifname: ep.ifname ?? 'eth0' });
    dnsKeys.set(ep.sandboxId, list);
  }

  function dropDns(sandboxId: string, ifname?: string): void {
    const list = dnsKeys.get(sandboxId) ?? [];
    const gone = list.filter((k) => !ifname || k.ifname === ifname);
    for (const k of gone) dns.removeEndpoint(k.networkId, k.endpointId);
    const rest = list.filter((k) => !gone.includes(k));
    if (rest.length) dnsKeys.set(sandboxId, rest);
    else dnsKeys.delete(sandboxId);
  }

  /** A network by exact ID, name, or unique ID prefix (dockerd's lookup order and errors). */
  function find(idOrName: string): NetworkFacts {
    const all = facts();
    const exact = all.find((n) => n.id === idOrName) ?? all.find((n) => n.name === idOrName);
    if (exact) return exact;
    const byPrefix = idOrName ? all.filter((n) => n.id.startsWith(idOrName)) : [];
    if (byPrefix.length > 1) {
      throw invalidParameter(
        `network ${idOrName} is ambiguous (${byPrefix.length} matches found based on ID prefix)`,
      );
    }
    if (!byPrefix[0]) throw notFound(`network ${idOrName} not found`);
    return byPrefix[0];
  }

  function facts(): NetworkFacts[] {
    const out: NetworkFacts[] = [];
    if (bridge) out.push({ name: 'bridge', id: bridge.id, created: bridge.created, bridge });
    out.push({ name: 'host', id: saved.host.id, created: saved.host.created });
    out.push({ name: 'none', id: saved.none.id, created: saved.none.created });
    for (const u of saved.user) out.push({ name: u.name, id: u.id, created: u.created, user: u });
    return out;
  }

  /** The network's plumbing for an interface with `ip` (its block's subnet and gateway). */
  function plumbingFor(n: NetworkFacts, ip: string | undefined, main: boolean): BridgePlumbing {
    if (n.bridge) {
      const b = n.bridge;
      return { name: b.name, cniName: b.cniName, subnet: b.subnet, gateway: b.gateway, defaultRoute: main };
    }
    const u = n.user;
    if (!u) throw invalidParameter(`network ${n.name} has no bridge`);
    const blocks = ipv4Configs(u);
    const addr = ip ? parseIpv4(ip) : undefined;
    const block =
      blocks.find((c) => {
        const b = parseCidr(c.Subnet);
        return b && addr !== undefined && containsIp(b, addr);
      }) ?? blocks[0];
    const v6 = ipv6Config(u);
    return {
      name: u.bridge,
      cniName: u.bridge,
      subnet: block?.Subnet ?? '',
      gateway: block?.Gateway ?? '',
      defaultRoute: main && !u.internal,
      ...(u.mtu ? { mtu: u.mtu } : {}),
      ...(v6
        ? {
            subnet6: formatNetwork6(parseCidr6(v6.Subnet) ?? { ip: 0n, prefixLen: 128 }),
            gateway6: v6.Gateway ?? '',
          }
        : {}),
    };
  }

  /**
   * The address an interface gets: the static one asked for (it must be free and in one of the
   * network's blocks), else the lowest free one of the first block with room (its IPRange when
   * given; never a gateway or an aux address): dockerd's default IPAM.
   */
  async function pickAddress(
    key: string,
    n: NetworkFacts,
    wanted: string | undefined,
    wanted6: string | undefined,
  ): Promise<{ ip: string; ip6?: string }> {
    const cniName = cniNameOf(n);
    const held = await listAllocations(ipamDir).catch(() => []);
    // from here on synchronous: concurrent picks see each other's choice. The pool's addresses
    // count as free (a start gets what it would get without the pool), and so do those of
    // sandboxes being released (reusable at once, as dockerd releases before `rm` answers: the
    // start waits for that release)
    const taken = reservedOn(cniName);
    const leaving = new Map<string, string>();
    for (const a of held) {
      if (a.network !== cniName || pool.holds(a.containerId)) continue;
      const text = a.ip.includes(':') ? (canonicalIpv6(a.ip) ?? a.ip) : a.ip;
      if (leavingWork(a.containerId)) leaving.set(text, a.containerId);
      else taken.add(text);
    }
    const blocks = ipv4Blocks(n);
    const excluded = excludedIn(blocks, taken);
    let ip: string | undefined;
    if (wanted) {
      const w = parseIpv4(wanted);
      const inside = blocks.some((b) => {
        const c = parseCidr(b.Subnet);
        return c && w !== undefined && containsIp(c, w) && w !== networkAddress(c);
      });
      if (!inside) throw invalidParameter(`no matching subnet for address ${wanted} on network ${n.name}`);
      if (excluded.has(wanted)) throw conflict(`Address already in use`);
      ip = wanted;
    } else {
      for (const b of blocks) {
        ip = lowestFree(b.IPRange || b.Subnet, b.Gateway ?? '', excluded);
        if (ip) break;
      }
      if (!ip) throw unavailableAddress(n.name);
    }
    const ip6 = pickAddress6(n, wanted6, excluded);
    reserved.set(key, { network: cniName, ip, ...(ip6 ? { ip6 } : {}) });
    // a sandbox being released, or a pooled one (not handed to this start, or dropped by the
    // pool meanwhile) holding it gives it up first
    void pool.evict(n.id, ip);
    for (const a of [ip, ...(ip6 ? [ip6] : [])]) {
      let owner = leaving.get(a);
      for (let i = 0; i < 4; i++) {
        const work = releaseOf(cniName, a, owner);
        if (!work) break;
        await work;
        owner = undefined;
      }
    }
    return { ip, ...(ip6 ? { ip6 } : {}) };
  }

  /** The release under way of the sandbox holding `ip` on a network (by its files or this engine's books). */
  function releaseOf(cniName: string, ip: string, fileOwner?: string): Promise<void> | undefined {
    const byFile = fileOwner ? leavingWork(fileOwner) : undefined;
    if (byFile) return byFile;
    for (const [key, r] of reserved) {
      const owner = key.slice(0, key.indexOf('/'));
      const work = r.network === cniName && (r.ip === ip || r.ip6 === ip) ? leavingWork(owner) : undefined;
      if (work) return work;
    }
    return undefined;
  }

  /** The release under way of a sandbox (a stopped container's, or a pooled one dropped). */
  function leavingWork(sandboxId: string): Promise<void> | undefined {
    return releasing.get(sandboxId) ?? pool.leaving(sandboxId);
  }

  function cniNameOf(n: NetworkFacts): string {
    return n.bridge ? n.bridge.cniName : (n.user?.bridge ?? '');
  }

  /** Addresses this engine holds on a network, the pool's left out. */
  function reservedOn(cniName: string): Set<string> {
    const taken = new Set<string>();
    for (const [key, r] of reserved) {
      const owner = key.slice(0, key.indexOf('/'));
      if (r.network !== cniName || pool.holds(owner) || leavingWork(owner)) continue;
      taken.add(r.ip);
      if (r.ip6) taken.add(r.ip6);
    }
    return taken;
  }

  /** A network's IPv4 blocks as IPAM configurations (the default bridge's one block). */
  function ipv4Blocks(n: NetworkFacts) {
    return n.bridge
      ? [
          {
            Subnet: n.bridge.subnet,
            Gateway: n.bridge.gateway,
            IPRange: undefined as string | undefined,
            AuxiliaryAddresses: undefined as Record<string, string> | undefined,
          },
        ]
      : ipv4Configs(n.user as SavedUserNetwork);
  }

  /** What IPAM never hands out: the taken addresses, gateways and aux addresses. */
  function excludedIn(
    blocks: Array<{ Gateway?: string; AuxiliaryAddresses?: Record<string, string> }>,
    taken: Set<string>,
  ): Set<string> {
    const excluded = new Set(taken);
    for (const b of blocks) {
      if (b.Gateway) excluded.add(b.Gateway);
      for (const a of Object.values(b.AuxiliaryAddresses ?? {})) excluded.add(a);
    }
    return excluded;
  }

  /**
   * The `count` addresses IPAM would hand out next on an IPv4-only bridge network, from what
   * this engine holds (after the start's sweep, the same as host-local's files), the pool's
   * addresses counted free. Undefined for a network the pool does not serve.
   */
  function nextAddresses(networkId: string, count: number): string[] | undefined {
    const n = facts().find((x) => x.id === networkId);
    if (!n || (!n.bridge && !n.user) || ipv6Config(n.user)) return undefined;
    const blocks = ipv4Blocks(n);
    const excluded = excludedIn(blocks, reservedOn(cniNameOf(n)));
    const out: string[] = [];
    for (const b of blocks) {
      while (out.length < count) {
        const ip = lowestFree(b.IPRange || b.Subnet, b.Gateway ?? '', excluded);
        if (!ip) break;
        out.push(ip);
        excluded.add(ip);
      }
    }
    return out;
  }

  /** The IPv6 address of an interface on an EnableIPv6 network (dockerd's IPAM, as for IPv4). */
  function pickAddress6(n: NetworkFacts, wanted: string | undefined, taken: Set<string>): string | undefined {
    const v6 = ipv6Config(n.user);
    if (!v6) return undefined;
    const block = parseCidr6(v6.Subnet);
    if (!block) return undefined;
    const excluded = new Set(taken);
    if (v6.Gateway) excluded.add(v6.Gateway);
    for (const a of Object.values(v6.AuxiliaryAddresses ?? {})) excluded.add(a);
    if (wanted) {
      const w = parseIpv6(wanted);
      if (w === undefined || !containsIp6(block, w) || w === networkAddress6(block)) {
        throw invalidParameter(
          `Invalid address ${wanted}: It does not belong to any of this network's subnets`,
        );
      }
      const text = formatIpv6(w);
      if (excluded.has(text)) throw conflict('Address already in use');
      return text;
    }
    const ip6 = lowestFree6(v6.IPRange || formatNetwork6(block), excluded);
    if (!ip6)
      throw invalidParameter(`no available IPv6 addresses on this network's address pools: ${n.name}`);
    return ip6;
  }

  function unavailableAddress(name: string): Error {
    return invalidParameter(`no available IPv4 addresses on this network's address pools: ${name}`);
  }

  function plumbingConfig(p: BridgePlumbing, ips?: string[]): Record<string, unknown> {
    return bridgePluginConfig({
      cniName: p.cniName,
      bridge: p.name,
      subnet: p.subnet,
      gateway: p.gateway,
      dataDir: ipamDir,
      ...(p.subnet6 ? { subnet6: p.subnet6, gateway6: p.gateway6 ?? '' } : {}),
      ...(ips ? { ips } : {}),
      ...(p.defaultRoute === false ? { defaultRoute: false } : {}),
      ...(p.mtu ? { mtu: p.mtu } : {}),
    });
  }

  function dropReserved(sandboxId: string, ifname?: string): void {
    for (const key of [...reserved.keys()]) {
      if (ifname ? key === `${sandboxId}/${ifname}` : key.startsWith(`${sandboxId}/`)) reserved.delete(key);
    }
  }

  /** One interface on one network: the address picked, then the bridge plugin's ADD. */
  async function plumb(
    sandbox: { sandboxId: string; sandboxKey: string },
    req: AttachRequest,
    ifname: string,
    main: boolean,
  ): Promise<Endpoint> {
    const n = find(req.network);
    if (!n.bridge && !n.user) throw invalidParameter(`network ${n.name} is not a bridge network`);
    const key = `${sandbox.sandboxId}/${ifname}`;
    const { ip, ip6 } = await pickAddress(key, n, req.ipv4Address, req.ipv6Address);
    const plumbing = plumbingFor(n, ip, main);
    try {
      // with an IPv6 address too, both go in the configuration (CNI_ARGS' IP= takes one)
      const added = await cni.exec('bridge', {
        containerId: sandbox.sandboxId,
        netns: sandbox.sandboxKey,
        command: 'ADD',
        ifname,
        args: cniArgs({ ...(ip6 ? {} : { ip }), mac: req.macAddress ?? macFromIpv4(ip) }),
        config: plumbingConfig(plumbing, ip6 ? [ip, ip6] : undefined),
      });
      const ep: Endpoint = {
        network: n.name,
        networkId: n.id,
        endpointId: randomId(),
        sandboxId: sandbox.sandboxId,
        sandboxKey: sandbox.sandboxKey,
        ...parseAddResult(added, ifname),
        bridge: plumbing,
        ifname,
        ...(n.user && req.dns ? { dns: req.dns } : {}),
      };
      addDns(ep);
      return ep;
    } catch (err) {
      reserved.delete(key);
      throw err;
    }
  }

  async function unplumb(sandboxId: string, sandboxKey: string, p: PlumbedInterface): Promise<void> {
    const config = plumbingConfig(p.bridge);
    const call = { command: 'DEL' as const, containerId: sandboxId, ifname: p.ifname, config };
    try {
      await cni.exec('bridge', { ...call, netns: sandboxKey });
    } catch (err) {
      // The file is there but no namespace (a crash before it was bound): release the address.
      log.debug('CNI DEL in the namespace failed; releasing the address only', {
        sandbox: sandboxId,
        error: errorMessage(err),
      });
      await cni.exec('bridge', { ...call, netns: '' });
    }
  }

  async function releaseNow(t: ReleaseTarget): Promise<void> {
    if (t.sandboxKey && t.plumbed.every((p) => p.addresses?.length)) {
      // A stopped container's sandbox: the namespace goes first and the kernel deletes its
      // interfaces with it (each veth and its peer on the bridge), then the addresses are
      // released as host-local's DEL would: a bridge plugin DEL (a Go program, and host-local's
      // after it) per interface saved.
      await netns.remove(t.sandboxKey);
      for (const p of t.plumbed) {
        await releaseAllocations(ipamDir, p.bridge.cniName, t.sandboxId, p.ifname, p.addresses ?? []);
      }
      return;
    }
    for (const p of t.plumbed) await unplumb(t.sandboxId, t.sandboxKey, p);
    if (t.sandboxKey) await netns.remove(t.sandboxKey);
  }

  /** DEL of an allocation nobody knows (no endpoint left): its own network's plumbing. */
  function orphanPlumbing(network: string, ip: string): BridgePlumbing {
    if (bridge && network === bridge.cniName) {
      return { name: bridge.name, cniName: bridge.cniName, subnet: bridge.subnet, gateway: bridge.gateway };
    }
    const u = saved.user.find((x) => x.bridge === network);
    if (u) return plumbingFor({ name: u.name, id: u.id, created: u.created, user: u }, ip, true);
    const c = parseCidr(`${ip}/24`);
    return { name: network, cniName: network, subnet: c ? formatNetwork(c) : `${ip}/32`, gateway: '' };
  }

  /** Containers with an endpoint on network `id` right now. */
  function attachedTo(id: string): AttachedContainer[] {
    return containerSource().filter((c) => c.endpoint.networkId === id);
  }

  /** A free block of the default pools, given to the bridge under the host lock (no other engine takes it). */
  async function pickAndMakeBridge(u: SavedUserNetwork, auto: boolean): Promise<void> {
    await hostLock(async () => {
      if (auto) {
        const used = await link.usedBlocks();
        if (bridge) used.push(bridge.subnet);
        for (const x of saved.user) if (x !== u) for (const c of ipv4Configs(x)) used.push(c.Subnet);
        const choice = pickSubnet(used);
        const entry = u.ipam.find((c) => !c.Subnet && !c.Subnet?.includes(':'));
        if (entry) {
          entry.Subnet = choice.subnet;
          entry.Gateway = choice.gateway;
        } else u.ipam.unshift({ Subnet: choice.subnet, Gateway: choice.gateway });
      }
      // saved before the bridge exists: a crash from here leaves a network the next start plumbs
      await saveNetworks(statePath, saved);
      const first = ipv4Configs(u)[0];
      const block = first && parseCidr(first.Subnet);
      if (first?.Gateway && block)
        await link.ensureBridge(u.bridge, { address: first.Gateway, prefixLen: block.prefixLen }, []);
    });
    await plumbUserBridge(u);
  }

  function newUserNetwork(plan: CreatePlan): { u: SavedUserNetwork; auto: boolean } {
    const identity = newNetworkIdentity();
    const ipv4 = plan.ipv4.map((c) => ({ ...c }));
    const auto = ipv4.length === 0 || ipv4.some((c) => !c.Subnet);
    if (ipv4.length === 0) ipv4.push({ Subnet: '' });
    const implicitGateways: string[] = [];
    for (const c of ipv4) {
      const b = c.Subnet ? parseCidr(c.Subnet) : undefined;
      if (b && !c.Gateway) {
        c.Gateway = formatIpv4(networkAddress(b) + 1);
        implicitGateways.push(c.Subnet);
      }
    }
    const ipv6 = plan.ipv6.map((c) => ({ ...c }));
    for (const c of ipv6) {
      const b = parseCidr6(c.Subnet);
      if (b && !c.Gateway) {
        c.Gateway = formatIpv6(networkAddress6(b) + 1n);
        implicitGateways.push(c.Subnet);
      }
    }
    const bridgeName = plan.bridgeName ?? `br-${identity.id.slice(0, 12)}`;
    return {
      auto,
      u: {
        ...identity,
        name: plan.name,
        bridge: bridgeName,
        internal: plan.internal,
        attachable: plan.attachable,
        enableIPv6: plan.enableIPv6,
        ipamOptions: plan.ipamOptions,
        ipam: [...ipv4, ...ipv6],
        options: plan.options,
        labels: plan.labels,
        icc: plan.icc,
        masquerade: plan.masquerade,
        ...(plan.mtu ? { mtu: plan.mtu } : {}),
        ...(auto ? { autoSubnet: true } : {}),
        ...(implicitGateways.length ? { implicitGateways } : {}),
      },
    };
  }

  /** Explicit blocks must not overlap the engine's other networks (dockerd's IPAM address space). */
  function checkBlocks(u: SavedUserNetwork): void {
    const mine6 = u.ipam.filter((c) => c.Subnet.includes(':')).map((c) => parseCidr6(c.Subnet));
    for (const x of saved.user) {
      for (const c of x.ipam) {
        const b = c.Subnet.includes(':') ? parseCidr6(c.Subnet) : undefined;
        if (b && mine6.some((m) => m && overlaps6(m, b)))
          throw forbidden('Pool overlaps with other one on this address space');
      }
    }
    const mine = ipv4Configs(u).map((c) => parseCidr(c.Subnet));
    const others = saved.user.flatMap((x) => ipv4Configs(x).map((c) => c.Subnet));
    if (bridge) others.push(bridge.subnet);
    for (const other of others) {
      const b = parseCidr(other);
      if (b && mine.some((m) => m && overlaps(m, b))) {
        throw forbidden('Pool overlaps with other one on this address space');
      }
    }
    if (saved.user.some((x) => x.bridge === u.bridge) || bridge?.name === u.bridge) {
      throw conflict(`bridge name ${u.bridge} is used by another network`);
    }
  }

  async function destroy(u: SavedUserNetwork): Promise<void> {
    // its pooled sandboxes go, and releases under way (containers just removed) finish on the
    // bridge first
    await pool.forget(u.id);
    await Promise.allSettled([...releasing.values()]);
    await dns.stop(u.id);
    // the host first, then the state: a crash in between leaves a network the next start plumbs
    await ports.removeBridge(u.bridge);
    await firewall.removeBridge(u.bridge);
    await link.deleteLink(u.bridge);
    // host-local's directory of the network (its counters; no address is held by now)
    await rm(join(ipamDir, u.bridge), { recursive: true, force: true }).catch(() => undefined);
    saved.user = saved.user.filter((x) => x.id !== u.id);
    await saveNetworks(statePath, saved);
  }

  /**
   * Sandboxes made ahead (sandbox-pool.ts): the next start's bare namespace, and on busy bridge
   * networks namespaces already plumbed with the addresses IPAM hands out next. Removed when
   * the engine stops (after a kill -9 the next start's sweep does).
   */
  const pool = new SandboxPool(
    {
      newSandbox,
      nextAddresses,
      plumb: plumbAhead,
      discard: (e) =>
        service.release({
          sandboxId: e.sandboxId,
          sandboxKey: e.sandboxKey,
          plumbed: [{ ifname: 'eth0', bridge: e.plumbing, addresses: [e.ip] }],
        }),
      warn: (message, fields) => log.warn(message, fields),
    },
    o.poolSize ?? POOL_SIZE,
  );

  function newSandbox(): MadeSandbox {
    const sandboxId = randomId();
    const sandboxKey = join(netnsDir, sandboxId.slice(0, 12));
    active.add(sandboxId);
    const ready = netns.create(sandboxKey);
    ready.catch(() => undefined);
    return { sandboxId, sandboxKey, ready };
  }

  /** A pool sandbox plumbed into a network with `ip` (reserved now, the ADD as soon as the namespace is there). */
  function plumbAhead(sandbox: MadeSandbox, networkId: string, ip: string): PooledSandbox {
    const n = find(networkId);
    const plumbing = plumbingFor(n, ip, true);
    // (an address being released is plumbed once it is free)
    const leaving = releaseOf(cniNameOf(n), ip);
    reserved.set(`${sandbox.sandboxId}/eth0`, { network: cniNameOf(n), ip });
    const plumbed = Promise.all([sandbox.ready, leaving]).then(async () =>
      parseAddResult(
        await cni.exec('bridge', {
          containerId: sandbox.sandboxId,
          netns: sandbox.sandboxKey,
          command: 'ADD',
          ifname: 'eth0',
          args: cniArgs({ ip, mac: macFromIpv4(ip) }),
          config: plumbingConfig(plumbing),
        }),
        'eth0',
      ),
    );
    plumbed.catch(() => undefined);
    return { ...sandbox, networkId, ip, plumbing, plumbed };
  }

  /** A namespace that could not be made ahead is made again, on the start's path. */
  function retried(made: MadeSandbox): MadeSandbox {
    return { ...made, ready: made.ready.catch(() => netns.create(made.sandboxKey)) };
  }

  /**
   * The pooled sandbox of a start's main network holding the address the start would get
   * anyway (its static `--ip`, or the lowest free), when its MAC is the one asked for.
   */
  function takePooled(req: AttachRequest): PooledSandbox | undefined {
    let n: NetworkFacts;
    try {
      n = find(req.network);
    } catch {
      return undefined;
    }
    if (!n.bridge && !n.user) return undefined;
    pool.noteStart(n.id, n.user !== undefined);
    if (!pool.enabled || req.ipv6Address) return undefined;
    const ip = req.ipv4Address ?? nextAddresses(n.id, 1)?.[0];
    if (!ip || (req.macAddress && req.macAddress !== macFromIpv4(ip))) return undefined;
    const taken = pool.take(n.id, ip);
    log.debug(taken ? 'a start takes a pooled sandbox' : 'no pooled sandbox for a start', {
      network: n.name,
      address: ip,
    });
    return taken;
  }

  /** A pooled sandbox becomes a start's: its endpoint, no process run (or a plain ADD if its own failed). */
  async function handOff(entry: PooledSandbox, req: AttachRequest): Promise<Endpoint> {
    const sandbox = { sandboxId: entry.sandboxId, sandboxKey: entry.sandboxKey };
    let added: AddedInterface;
    try {
      added = await entry.plumbed;
    } catch (err) {
      log.warn('a pooled network sandbox could not be plumbed; the start plumbs it', {
        sandbox: entry.sandboxId,
        address: entry.ip,
        error: errorMessage(err),
      });
      // the bridge plugin makes the veth pair before it asks IPAM: a failed ADD can leave `eth0`
      // in the namespace, and a second ADD would fail on it. DEL first (it also releases what
      // IPAM may have recorded for the sandbox), then a start's own ADD with the address IPAM
      // hands out now.
      await unplumb(sandbox.sandboxId, sandbox.sandboxKey, { ifname: 'eth0', bridge: entry.plumbing }).catch(
        () => undefined,
      );
      dropReserved(sandbox.sandboxId, 'eth0');
      return plumb(sandbox, req, 'eth0', true);
    }
    const n = find(entry.networkId);
    const ep: Endpoint = {
      network: n.name,
      networkId: n.id,
      endpointId: randomId(),
      ...sandbox,
      ...added,
      bridge: entry.plumbing,
      ifname: 'eth0',
      ...(n.user && req.dns ? { dns: req.dns } : {}),
    };
    addDns(ep);
    return ep;
  }

  /** The network whose bridge plumbing is `cniName` (its ID). */
  function networkOfCni(cniName: string): string | undefined {
    return facts().find((n) => n.bridge?.cniName === cniName || n.user?.bridge === cniName)?.id;
  }

  const service: NetworkService = {
    get bridge() {
      return bridge;
    },

    get hostGateway() {
      return o.hostGatewayIp ?? bridge?.gateway;
    },
    ports,

    networkId(name) {
      return ids[name];
    },

    isUserNetwork(idOrName) {
      try {
        return find(idOrName).user !== undefined;
      } catch {
        return false;
      }
    },

    lookup(idOrName) {
      const n = find(idOrName);
      return { id: n.id, name: n.name, builtin: n.user === undefined };
    },

    checkEndpoint(idOrName, req) {
      const n = find(idOrName);
      if (req.ipv4Address) {
        if (!n.user)
          throw invalidParameter('user specified IP address is supported on user defined networks only');
        if (n.user.autoSubnet) {
          throw invalidParameter(
            'user specified IP address is supported only when connecting to networks with user configured subnets',
          );
        }
      }
      if (req.ipv6Address) {
        if (!n.user)
          throw invalidParameter('user specified IP address is supported on user defined networks only');
        if (!ipv6Config(n.user)) {
          throw invalidParameter(
            'user specified IP address is supported only when connecting to networks with user configured subnets',
          );
        }
      }
      if (req.aliases && !n.user) {
        throw invalidParameter(
          'network-scoped alias is supported only for containers in user defined networks',
        );
      }
    },

    attach(requests) {
      const pooled = requests[0] ? takePooled(requests[0]) : undefined;
      const { sandboxId, sandboxKey, ready } = retried(pooled ?? pool.takeNamespace());
      const sandbox = { sandboxId, sandboxKey };
      const plumbed: PlumbedInterface[] = [];
      // the namespace comes with `lo` up (netns.create)
      const endpoints = ready.then(async (): Promise<Endpoint[]> => {
        const out: Endpoint[] = [];
        for (const [i, req] of requests.entries()) {
          const ep =
            i === 0 && pooled ? await handOff(pooled, req) : await plumb(sandbox, req, `eth${i}`, i === 0);
          if (ep.bridge)
            plumbed.push({
              ifname: ep.ifname ?? `eth${i}`,
              bridge: ep.bridge,
              addresses: endpointAddresses(ep),
            });
          out.push(ep);
        }
        return out;
      });
      // Whoever starts the container awaits these; a start abandoned early must not leave an
      // unhandled rejection behind.
      ready.catch(() => undefined);
      endpoints.catch(() => undefined);
      const pending: PendingAttach = { sandboxId, sandboxKey, plumbed, ready, endpoints };
      return pending;
    },

    async attachMore(sandbox, req, ifname) {
      return plumb(sandbox, req, ifname, false);
    },

    async detachOne(sandbox, ep) {
      const ifname = ep.ifname ?? 'eth0';
      dropDns(sandbox.sandboxId, ifname);
      if (ep.bridge) await unplumb(sandbox.sandboxId, sandbox.sandboxKey, { ifname, bridge: ep.bridge });
      dropReserved(sandbox.sandboxId, ifname);
      pool.refill(ep.networkId);
    },

    plainEndpoint(network) {
      return {
        network,
        networkId: ids[network],
        endpointId: randomId(),
        sandboxId: randomId(),
        sandboxKey: '',
        ipAddress: '',
        prefixLen: 0,
        gateway: '',
        macAddress: '',
      };
    },

    release(t) {
      active.delete(t.sandboxId);
      dropDns(t.sandboxId);
      const under = releasing.get(t.sandboxId);
      if (under) return under;
      if (!t.plumbed.length && !t.sandboxKey) return Promise.resolve();
      const work = releaseNow(t)
        .catch((err) =>
          log.warn('cannot release a network sandbox (swept at the next start)', {
            sandbox: t.sandboxId,
            error: errorMessage(err),
          }),
        )
        .finally(() => {
          releasing.delete(t.sandboxId);
          dropReserved(t.sandboxId);
          // an address freed: the pool holds the lowest free ones again
          for (const p of t.plumbed) {
            const id = networkOfCni(p.bridge.cniName);
            if (id) pool.refill(id);
          }
        });
      releasing.set(t.sandboxId, work);
      return work;
    },

    restore(ep) {
      active.add(ep.sandboxId);
      // its address is this engine's (the pool's picks see it)
      if (ep.bridge && ep.ipAddress) {
        reserved.set(`${ep.sandboxId}/${ep.ifname ?? 'eth0'}`, {
          network: ep.bridge.cniName,
          ip: ep.ipAddress,
          ...(ep.ipv6Address ? { ip6: ep.ipv6Address } : {}),
        });
      }
      addDns(ep);
    },

    updateDns(ep) {
      putDns(ep);
    },

    ipv6Enabled(idOrName) {
      try {
        return ipv6Config(find(idOrName).user) !== undefined;
      } catch {
        return false;
      }
    },

    dnsAddress(idOrName) {
      try {
        const n = find(idOrName);
        return n.user ? dns.listening(n.id)?.address : undefined;
      } catch {
        return undefined;
      }
    },

    async sweep() {
      const keep = (id: string) => active.has(id) || releasing.has(id);
      const orphans = new Map<string, ReleaseTarget>();
      for (const a of await listAllocations(ipamDir)) {
        if (!a.containerId || keep(a.containerId)) continue;
        const t = orphans.get(a.containerId) ?? {
          sandboxId: a.containerId,
          sandboxKey: join(netnsDir, a.containerId.slice(0, 12)),
          plumbed: [],
        };
        // an interface with an IPv4 and an IPv6 address has two files: one DEL releases both
        if (!t.plumbed.some((p) => p.ifname === (a.ifname || 'eth0') && p.bridge.cniName === a.network))
          t.plumbed.push({ ifname: a.ifname || 'eth0', bridge: orphanPlumbing(a.network, a.ip) });
        orphans.set(a.containerId, t);
      }
      for (const file of await netns.list(netnsDir)) {
        const owned = [...active, ...releasing.keys(), ...orphans.keys()].some((id) => id.startsWith(file));
        if (!owned) orphans.set(file, { sandboxId: file, sandboxKey: join(netnsDir, file), plumbed: [] });
      }
      // a namespace with processes in it belongs to a container the engine could not load (its
      // metadata unreadable, or adopted after a crash before its endpoint was saved): kept
      for (const [id, t] of orphans) {
        if (t.sandboxKey && (await netns.inUse(t.sandboxKey))) {
          log.warn('keeping a network sandbox that processes still use', { sandbox: id, path: t.sandboxKey });
          orphans.delete(id);
        }
      }
      if (orphans.size) log.info('releasing network sandboxes no container holds', { count: orphans.size });
      for (const t of orphans.values()) await service.release(t);
      // the port rules become what the running containers published (a crash's leftovers go)
      const bridges = bridge ? [{ bridge: bridge.name, subnet: bridge.subnet }] : [];
      for (const u of saved.user) {
        const subnet = ipv4Configs(u)[0]?.Subnet;
        if (subnet) bridges.push({ bridge: u.bridge, subnet });
      }
      await ports.reconcile(bridges);
      // the address book is whole now (what an engine before left is released): pools may fill
      pool.enabled = true;
    },

    announce(action, containerId, network, swarm) {
      const n = swarm ? undefined : facts().find((x) => x.name === network);
      const id = swarm?.id ?? n?.id ?? (network in ids ? ids[network as PredefinedNetwork] : '');
      o.events.publish('network', action, id, {
        container: containerId,
        name: network,
        type: swarm ? 'overlay' : network === 'none' ? 'null' : network === 'host' ? 'host' : 'bridge',
      });
    },

    setContainerSource(source) {
      containerSource = source;
    },

    list(filters) {
      return filterNetworks(facts(), filters, (id) => attachedTo(id).length > 0).map((n) => networkView(n));
    },

    inspect(idOrName, opts = {}) {
      const found = find(idOrName);
      if (opts.scope && opts.scope !== 'local') throw notFound(`network ${idOrName} not found`);
      return networkView(found, containerSource());
    },

    create(body) {
      return serial(async () => {
        const plan = planNetwork(body, (name) => facts().some((n) => n.name === name));
        const { u, auto } = newUserNetwork(plan);
        checkBlocks(u);
        saved.user.push(u);
        try {
          await pickAndMakeBridge(u, auto);
          await serveDns(u);
        } catch (err) {
          await destroy(u).catch(() => undefined);
          throw err;
        }
        o.events.publish('network', 'create', u.id, { name: u.name, type: 'bridge' });
        log.info('network created', { network: u.name, bridge: u.bridge, subnet: ipv4Configs(u)[0]?.Subnet });
        return { Id: u.id, Warning: '' };
      });
    },

    remove(idOrName) {
      return serial(async () => {
        const n = find(idOrName);
        if (!n.user) throw forbidden(`${n.name} is a pre-defined network and cannot be removed`);
        if (attachedTo(n.id).length) {
          throw forbidden(`error while removing network: network ${n.name} id ${n.id} has active endpoints`);
        }
        await destroy(n.user);
        o.events.publish('network', 'destroy', n.id, { name: n.name, type: 'bridge' });
      });
    },

    prune(filters) {
      checkFilterNames(filters, ['until', 'label', 'label!']);
      const until = (filters.get('until') ?? []).map((v) => parseFilterTime(v));
      return serial(async () => {
        const deleted: string[] = [];
        for (const u of [...saved.user]) {
          if (!until.every((t) => parseTimestampMs(u.created) < t)) continue;
          if (!labelsMatch(u.labels, filters)) continue;
          if (attachedTo(u.id).length) continue;
          try {
            await destroy(u);
          } catch (err) {
            log.warn('prune: cannot remove network', { network: u.name, error: errorMessage(err) });
            continue;
          }
          o.events.publish('network', 'destroy', u.id, { name: u.name, type: 'bridge' });
          deleted.push(u.name);
        }
        o.events.publish('network', 'prune', '', { reclaimed: '0' });
        return { NetworksDeleted: deleted.length ? deleted : null };
      });
    },

    async close() {
      await pool.close(async (left) => {
        active.delete(left.sandboxId);
        await left.ready.then(() => netns.remove(left.sandboxKey)).catch(() => undefined);
      });
      await writes;
      await dns.close();
      await ports.close();
      const pending = [...releasing.values()];
      if (!pending.length) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(pending),
        new Promise<void>((r) => {
          timer = setTimeout(r, CLOSE_WAIT_MS);
        }),
      ]);
      if (timer) clearTimeout(timer);
    },
  };
  return service;
}
