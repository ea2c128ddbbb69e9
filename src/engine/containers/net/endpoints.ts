import { join } from 'node:path';
import type { EndpointSettings, HostConfig } from '../../../common/docker-types.js';
import { forbidden, invalidParameter, notFound } from '../../../common/errors.js';
import { readFile } from '../../../common/fs/quick.js';
import type { Logger } from '../../../common/log.js';
import { endpointAddresses } from '../../network/ipam.allocations.js';
import type {
  AttachRequest,
  ContainerNetworking,
  Endpoint,
  EndpointDns,
  PendingAttach,
} from '../../network/network.types.js';
import type { PublishTarget } from '../../network/ports/port-publisher.js';
import { type PortRequest, type PublishedPort, portRequests } from '../../network/ports/port-spec.js';
import type { Container } from '../core/container.js';
import { namespacePath } from '../core/namespaces.js';
import type { DetachedNetwork, LinkTarget, NetworkPort, StartNetwork } from '../core/ports.js';
import type { LinkRecord, NetworkingConfig } from '../core/record.types.js';
import type { ContainerSet } from '../core/set.js';
import type { ContainerStore } from '../core/store.js';
import { endpointSysctlList } from '../core/validate.js';
import { attachedNetworkNames, dnsNames, endpointsOf } from '../core/views.js';
import {
  addOwnHostsAddress,
  dnsClientOptions,
  type HostsEntry,
  hostsContent,
  readHostResolvConf,
  removeOwnHostsAddress,
  resolvConfContent,
  rewriteInPlace,
  writeContainerFiles,
} from './files.js';
import { LegacyLinks } from './legacy-links.js';
import { mergeLinkEnv, parseLink } from './links.js';
import type { SwarmNetworkPort } from './swarm-networks.port.js';

/**
 * A container's networking as the state machine sees it: which network a start attaches to, the
 * bridge attachment (a namespace file and CNI, in src/engine/network), the endpoint in the record,
 * the files a container gets (/etc/hosts, /etc/hostname, /etc/resolv.conf), connect/disconnect
 * events, and legacy links (legacy-links.ts).
 */

/**
 * `bridge`: a sandbox on bridge networks (the default bridge, user-defined networks);
 * `none`/`host`: dockerd's predefined networks;
 * `container`: another container's namespace; `private`: no network layer (loopback only), for
 * an engine without networking and for a container with `NetworkDisabled` (whatever its mode, as
 * dockerd: no network, no /etc/hosts or /etc/resolv.conf of the engine's).
 */
export type NetworkKind = 'bridge' | 'none' | 'host' | 'container' | 'private';

export interface NetworksDeps {
  set: ContainerSet;
  store: ContainerStore;
  /** The engine's networks (absent: every container gets loopback only). */
  network?: ContainerNetworking;
  /** Swarm-scoped networks (attachable overlays) while the node is in a swarm (absent: none). */
  swarm?: SwarmNetworkPort;
  log: Logger;
}

/** The container side of networking: NetworkPort for the state machine, links and views for the API. */
export class ContainerNetworks implements NetworkPort {
  readonly links: LegacyLinks;
  /** Bridge attachments of starts under way (released when the start fails). */
  private readonly starting = new Map<
    string,
    {
      attach: PendingAttach;
      linkHosts: HostsEntry[];
      publishing?: Promise<PublishedPort[]>;
      /** The swarm networks it joins (attached once the bridge interfaces are there). */
      swarm: string[];
    }
  >();
  /** Published ports of running containers being bound again at engine start. */
  private restoring: Promise<void>[] = [];

  constructor(private readonly d: NetworksDeps) {
    this.links = new LegacyLinks(d.set, d.store, (c) => this.onBridge(c), d.log);
  }

  kind(c: Container): NetworkKind {
    if (c.record.Config.NetworkDisabled) return 'private';
    const nm = c.hostConfig.NetworkMode || 'default';
    if (nm.startsWith('container:')) return 'container';
    const network = this.d.network;
    if (!network) return nm === 'host' ? 'host' : 'private';
    if (nm === 'host') return 'host';
    if (nm === 'none') return 'none';
    if (nm !== 'default' && nm !== 'bridge') return 'bridge';
    return network.bridge ? 'bridge' : 'none';
  }

  /**
   * Whether a network name is a swarm network's: no network of this engine's, and the node is in
   * a swarm (a manager resolves it when the container joins).
   */
  private isSwarmNetwork(name: string): boolean {
    if (name === 'bridge' || name === 'host' || name === 'none' || name === 'default') return false;
    if (!this.d.swarm?.active()) return false;
    return !this.d.network?.isUserNetwork(name);
  }

  /**
   * A container naming a network the engine does not have, while the node's swarm agent is not up
   * yet (the engine is starting): its start waits for the agent (bounded), so that a
   * restart-policy container on an attachable overlay comes back attached, as with dockerd.
   */
  private async awaitSwarm(c: Container): Promise<void> {
    const swarm = this.d.swarm;
    if (!swarm || swarm.active() || this.kind(c) !== 'bridge') return;
    const local = (n: string) =>
      n === 'bridge' || n === 'default' || n === 'host' || n === 'none' || this.d.network?.isUserNetwork(n);
    if (attachedNetworkNames(c.hostConfig, c.record).every(local)) return;
    await swarm.whenActive();
  }

  /** The container's swarm networks, in its networks' order. */
  private swarmNetworks(c: Container): string[] {
    return attachedNetworkNames(c.hostConfig, c.record).filter((n) => this.isSwarmNetwork(n));
  }

  /** The networks a start attaches to, the main one first, with the addresses and MACs asked for. */
  private attachRequests(c: Container): AttachRequest[] {
    const eps = c.record.NetworkingConfig.EndpointsConfig ?? {};
    const names = attachedNetworkNames(c.hostConfig, c.record).filter((n) => !this.isSwarmNetwork(n));
    return names.map((name, i) => {
      const ep = eps[name] ?? (name === 'bridge' ? eps.default : undefined);
      const mac = i === 0 ? this.macAddress(c, name) : ep?.MacAddress;
      const ip = ep?.IPAMConfig?.IPv4Address;
      const ip6 = ep?.IPAMConfig?.IPv6Address;
      const dns = this.dnsOf(c, name, ep?.Aliases ?? [], ep?.Links ?? []);
      return {
        network: name,
        ...(ip ? { ipv4Address: ip } : {}),
        ...(ip6 ? { ipv6Address: ip6 } : {}),
        ...(mac ? { macAddress: mac.replaceAll('-', ':').toLowerCase() } : {}),
        ...(dns ? { dns } : {}),
      };
    });
  }

  /**
   * The names the engine's DNS answers for the container on a user-defined network, and its legacy
   * links there (`--link name:alias`: the alias resolves to the target for this container only, as
   * dockerd makes them on user-defined networks: no variables, no /etc/hosts lines).
   */
  private dnsOf(
    c: Container,
    network: string,
    aliases: string[],
    links: string[] = [],
  ): EndpointDns | undefined {
    const names = dnsNames(c.record, network, aliases);
    if (!names) return undefined;
    const parsed = links.map((l) => parseLink(l));
    return { names, ...dnsClientOptions(c.hostConfig), ...(parsed.length ? { links: parsed } : {}) };
  }

  /**
   * The engine's DNS address when the container is on a user-defined network (its first one; as
   * dockerd, whose sandbox gets the embedded DNS once it joins one, the default bridge beside).
   */
  private embeddedDns(c: Container): string | undefined {
    for (const name of attachedNetworkNames(c.hostConfig, c.record)) {
      if (name === 'bridge' || name === 'host' || name === 'none') continue;
      const address = this.d.network?.dnsAddress(name);
      if (address) return address;
    }
    return undefined;
  }

  private onBridge(c: Container): boolean {
    const nm = c.hostConfig.NetworkMode || 'default';
    return (
      (nm === 'default' || nm === 'bridge') && !c.record.Config.NetworkDisabled && !!this.d.network?.bridge
    );
  }

  /** The ID of a network by name (list filters); undefined without networking or such a network. */
  networkId(name: string): string | undefined {
    const network = this.d.network;
    if (!network) return undefined;
    if (name === 'bridge' || name === 'host' || name === 'none') return network.networkId(name);
    return network.isUserNetwork(name) ? network.lookup(name).id : undefined;
  }

  defaultNetworkMode(): string {
    return this.d.network?.bridge ? 'bridge' : 'default';
  }

  checkCreate(hc: HostConfig, nc: NetworkingConfig = {}): LinkTarget[] {
    const nm = hc.NetworkMode ?? '';
    const network = this.d.network;
    if (!['', 'default', 'bridge', 'host', 'none'].includes(nm) && !nm.startsWith('container:')) {
      // 400, not dockerd's 404: on a 404 the CLI pulls the image and tries again
      const swarmName = this.isSwarmNetwork(nm);
      if (!swarmName && !network?.isUserNetwork(nm)) throw invalidParameter(`network ${nm} not found`);
      // as dockerd's Networks map: by the network's name (a swarm network's: as given, a
      // manager resolves it when the container joins)
      const name = swarmName || !network ? nm : network.lookup(nm).name;
      const eps = nc.EndpointsConfig;
      if (eps && name !== nm && eps[nm]) {
        eps[name] = eps[nm] ?? {};
        delete eps[nm];
      }
      hc.NetworkMode = name;
    }
    // an engine without a default bridge (--bridge none) has no `bridge` network
    if (nm === 'bridge' && network && !network.bridge) {
      throw invalidParameter('network bridge not found');
    }
    const mode = hc.NetworkMode || 'default';
    const isolated = mode === 'host' || mode === 'none' || mode.startsWith('container:');
    const keys = Object.keys(nc.EndpointsConfig ?? {});
    if (keys.length > 1 && (isolated || keys.some((k) => k === 'host' || k === 'none'))) {
      // host, none and container: modes are on one network only (dockerd's message)
      throw invalidParameter(`Container cannot be connected to network endpoints: ${keys.join(', ')}`);
    }
    for (const [key, ep] of Object.entries(nc.EndpointsConfig ?? {})) {
      const name = key === 'default' ? 'bridge' : key;
      const ip = ep?.IPAMConfig?.IPv4Address;
      const ip6 = ep?.IPAMConfig?.IPv6Address;
      if (!network) continue;
      if (isolated && name !== mode) {
        throw invalidParameter(
          `container cannot be connected to network ${name}: its network mode is ${mode}`,
        );
      }
      if (name === 'host' || name === 'none') continue;
      if (this.isSwarmNetwork(name)) continue;
      if (name !== 'bridge' && !network.isUserNetwork(name))
        throw invalidParameter(`network ${name} not found`);
      const aliases = (ep?.Aliases?.length ?? 0) > 0;
      if (name === 'bridge' && !network.bridge) {
        if (ip || ip6)
          throw invalidParameter('user specified IP address is supported on user defined networks only');
        continue;
      }
      if (ip || ip6 || aliases) network.checkEndpoint(name, { ipv4Address: ip, ipv6Address: ip6, aliases });
    }
    // on a user-defined network links are the endpoint's DNS aliases (EndpointsConfig.Links): a
    // target need not exist at create, as dockerd; HostConfig.Links register no link names there
    const userMode = !['default', 'bridge', 'host', 'none'].includes(mode) && !mode.startsWith('container:');
    for (const [key, ep] of Object.entries(nc.EndpointsConfig ?? {})) {
      if (!ep?.Links?.length) continue;
      if (key === 'default' || key === 'bridge' || key === 'host' || key === 'none') continue;
      for (const l of ep.Links) parseLink(l);
    }
    if (userMode) return [];
    return this.links.resolve(hc);
  }

  keptLinks(name: string, links: LinkTarget[]): LinkRecord[] {
    return this.links.kept(name, links);
  }

  registerLinks(c: Container): void {
    this.links.register(c);
  }

  private macAddress(c: Container, network = 'bridge'): string | undefined {
    const eps = c.record.NetworkingConfig.EndpointsConfig;
    const own =
      network === 'bridge' ? eps?.bridge?.MacAddress || eps?.default?.MacAddress : eps?.[network]?.MacAddress;
    const mac = own || c.record.Config.MacAddress || '';
    return mac ? mac.replaceAll('-', ':').toLowerCase() : undefined;
  }

  /**
   * Start, before the spec: the links are checked (their errors are dockerd's), the bridge
   * attachment begins (the namespace, then CNI, while the rest of the start goes on), and the
   * container's files are written: its own, or with `container:<x>`, the other container's
   * (whose hostname it takes, as dockerd). NetworkDisabled: a namespace of its own with loopback
   * only, and only /etc/hostname of the engine's.
   */
  async prepare(c: Container): Promise<StartNetwork> {
    await this.awaitSwarm(c);
    const rec = c.record;
    const hc = c.hostConfig;
    const dir = this.d.store.dir(c.id);
    const nm = hc.NetworkMode ?? 'default';
    const disabled = rec.Config.NetworkDisabled === true;
    let netns: string | undefined;
    let hostsPath = join(dir, 'hosts');
    let hostnamePath = join(dir, 'hostname');
    let resolvConfPath = join(dir, 'resolv.conf');
    if (disabled) {
      hostsPath = '';
      resolvConfPath = '';
    } else if (nm === 'host') netns = 'host';
    else if (nm.startsWith('container:')) {
      const ref = nm.slice('container:'.length);
      netns = namespacePath(this.d.set, ref, 'net', 'network');
      const other = this.d.set.get(ref);
      rec.Config.Hostname = other.record.Config.Hostname ?? '';
      rec.Config.Domainname = other.record.Config.Domainname ?? '';
      hostsPath = other.record.HostsPath;
      hostnamePath = other.record.HostnamePath;
      resolvConfPath = other.record.ResolvConfPath;
    }
    this.starting.delete(c.id);
    let linkHosts: HostsEntry[] = [];
    let env: string[] | undefined;
    if (this.kind(c) === 'bridge' && this.d.network) {
      // legacy links are the default bridge's (on user-defined networks, names resolve by DNS)
      const links = this.onBridge(c) ? this.links.forStart(c) : { hosts: [], env: [] };
      const requests = this.attachRequests(c);
      // disconnected from every network too: a namespace of the engine's (loopback only), which a
      // later `network connect` plumbs into
      const network = this.d.network;
      const swarm = this.swarmNetworks(c);
      const attach = network.attach(requests);
      // the ports are published (on the main network) as soon as its address is known, while
      // the start goes on
      const ports = this.portRequests(c);
      const publishing = ports.length
        ? attach.endpoints.then((eps) =>
            eps[0] ? network.ports.publish(this.publishTarget(c, eps[0]), ports) : [],
          )
        : undefined;
      publishing?.catch(() => undefined);
      this.starting.set(c.id, { attach, linkHosts: links.hosts, publishing, swarm });
      netns = attach.sandboxKey;
      linkHosts = links.hosts;
      if (links.env.length) env = mergeLinkEnv(links.env, rec.Config.Env ?? []);
    }
    // on a swarm network, the node's DNS on the gateway bridge answers the swarm's names
    const swarmDns =
      this.kind(c) === 'bridge' && this.d.swarm && !this.embeddedDns(c) && this.swarmNetworks(c).length > 0
        ? await this.d.swarm.dnsAddress()
        : undefined;
    if (disabled || !nm.startsWith('container:')) {
      await writeContainerFiles({
        hostsPath,
        hostnamePath,
        resolvConfPath,
        hostname: rec.Config.Hostname ?? c.id.slice(0, 12),
        domainname: rec.Config.Domainname,
        hostConfig: hc,
        hostNetwork: nm === 'host' && !disabled,
        links: linkHosts,
        hostGateway: this.d.network?.hostGateway,
        ...(this.kind(c) === 'bridge' ? { embeddedDns: this.embeddedDns(c) ?? swarmDns } : {}),
        fresh: !rec.HasBeenStartedBefore,
      });
    }
    rec.HostsPath = hostsPath;
    rec.HostnamePath = hostnamePath;
    rec.ResolvConfPath = resolvConfPath;
    const sysctls = this.kind(c) === 'bridge' ? this.networkSysctls(c) : undefined;
    return {
      ...(netns !== undefined ? { netns } : {}),
      ...(env ? { env } : {}),
      ...(sysctls ? { sysctls } : {}),
    };
  }

  /** What the container publishes: its PortBindings, and its exposed ports with -P. */
  private portRequests(c: Container): PortRequest[] {
    return portRequests(
      Object.keys(c.record.Config.ExposedPorts ?? {}),
      c.hostConfig.PortBindings,
      c.hostConfig.PublishAllPorts === true,
    );
  }

  private publishTarget(c: Container, ep: Endpoint): PublishTarget {
    return {
      owner: c.id,
      endpointName: c.record.Name.replace(/^\//, ''),
      endpointId: ep.endpointId,
      bridge: ep.bridge?.name ?? '',
      subnet: ep.bridge?.subnet ?? '',
      ip: ep.ipAddress,
    };
  }

  /**
   * The namespace's sysctls that its networks ask for: IPv6 on (the runtime turns it off
   * otherwise) when one of them is an EnableIPv6 network, and the endpoint's interface sysctls.
   * The container's own --sysctl still wins.
   */
  private networkSysctls(c: Container): Record<string, string> | undefined {
    const own = this.interfaceSysctls(c);
    const network = this.d.network;
    const v6 = attachedNetworkNames(c.hostConfig, c.record).some((n) => network?.ipv6Enabled(n));
    if (!v6) return own;
    const on: Record<string, string> = {};
    for (const key of ['net.ipv6.conf.all.disable_ipv6', 'net.ipv6.conf.default.disable_ipv6']) {
      if (c.hostConfig.Sysctls?.[key] === undefined) on[key] = '0';
    }
    return { ...on, ...(own ?? {}) };
  }

  /**
   * The endpoint's com.docker.network.endpoint.sysctls with the interface named (`IFNAME` is the
   * container's eth0 on the default bridge): set in its namespace as it starts.
   */
  private interfaceSysctls(c: Container): Record<string, string> | undefined {
    const eps = c.record.NetworkingConfig.EndpointsConfig;
    const list = endpointSysctlList((eps?.bridge ?? eps?.default)?.DriverOpts);
    if (!list.length) return undefined;
    const out: Record<string, string> = {};
    for (const setting of list) {
      const eq = setting.indexOf('=');
      const name = (eq < 0 ? setting : setting.slice(0, eq)).split('.');
      if (name[3] === 'IFNAME' || name[3] === 'ifname') name[3] = 'eth0';
      out[name.join('.')] = eq < 0 ? '' : setting.slice(eq + 1);
    }
    return out;
  }

  async ready(c: Container): Promise<void> {
    await this.starting.get(c.id)?.attach.ready;
  }

  /**
   * Before the process runs: the endpoint goes into the record, the container's own address into
   * its /etc/hosts (in place: the runtime already bind-mounted the file), `network connect` is
   * announced (dockerd's order: connect, then start), and containers linking to this one see its
   * address.
   */
  async connect(c: Container): Promise<void> {
    const kind = this.kind(c);
    const rec = c.record;
    const network = this.d.network;
    if (!network) return;
    if (kind === 'none' || kind === 'host') {
      const ep = network.plainEndpoint(kind);
      rec.Endpoint = ep;
      rec.Sandbox = { ID: ep.sandboxId, Key: '', Network: kind, NetworkID: ep.networkId };
      network.announce('connect', c.id, kind);
      return;
    }
    const starting = this.starting.get(c.id);
    if (!starting) return;
    const bridged = await starting.attach.endpoints;
    const eps = await this.joinSwarm(c, starting, bridged);
    this.starting.delete(c.id);
    const ep = eps[0];
    if (!ep) {
      // on no network (every one disconnected): the namespace made for this run is still the
      // container's, for a later `network connect` and for its release at stop
      const { sandboxId, sandboxKey } = starting.attach;
      rec.Sandbox = {
        ID: sandboxId,
        Key: sandboxKey,
        Network: rec.Sandbox?.Network ?? 'bridge',
        NetworkID: rec.Sandbox?.NetworkID ?? '',
      };
      rec.SandboxKey = sandboxKey;
      return;
    }
    rec.Endpoint = ep;
    rec.Endpoints = eps;
    rec.Sandbox = { ID: ep.sandboxId, Key: ep.sandboxKey, Network: ep.network, NetworkID: ep.networkId };
    rec.SandboxKey = ep.sandboxKey;
    for (const e of eps) {
      this.rememberNetworkId(c, e);
      network.announce('connect', c.id, e.network, e.swarm ? { id: e.networkId } : undefined);
    }
    // a failure from here fails the start, which releases the endpoint (the record's now); a
    // publish that failed let go of what it had bound
    if (starting.publishing) rec.PublishedPorts = await starting.publishing;
    await rewriteInPlace(rec.HostsPath, this.ownHosts(c, starting.linkHosts, ep.ipAddress, ep.ipv6Address));
    if (this.onBridge(c)) await this.links.targetStarted(c, ep.ipAddress);
  }

  /**
   * The container's swarm networks, after its bridge interfaces (a manager hands out the
   * addresses); its endpoints in its networks' order. A failure fails the start (abort releases).
   */
  private async joinSwarm(
    c: Container,
    starting: { attach: PendingAttach; swarm: string[] },
    bridged: Endpoint[],
  ): Promise<Endpoint[]> {
    const swarm = this.d.swarm;
    if (!swarm || starting.swarm.length === 0) return bridged;
    const eps = c.record.NetworkingConfig.EndpointsConfig ?? {};
    const joined = await swarm.attach({
      containerId: c.id,
      sandboxId: starting.attach.sandboxId,
      sandboxKey: starting.attach.sandboxKey,
      networks: starting.swarm.map((n) => this.swarmRequest(c, n, eps[n])),
      firstIndex: bridged.length,
      usedIfnames: bridged.map((e) => e.ifname ?? 'eth0'),
      defaultRoute: bridged.length === 0,
    });
    const order = attachedNetworkNames(c.hostConfig, c.record);
    return [...bridged, ...joined].sort((a, b) => order.indexOf(a.network) - order.indexOf(b.network));
  }

  /** What the container asks of a swarm network: its names there, the addresses it wants (`--ip`, `--ip6`). */
  private swarmRequest(c: Container, network: string, ep: EndpointSettings | null | undefined) {
    const ip = ep?.IPAMConfig?.IPv4Address;
    const ip6 = ep?.IPAMConfig?.IPv6Address;
    return {
      network,
      names: dnsNames(c.record, network, ep?.Aliases ?? []) ?? [],
      ...(ip ? { ipv4Address: ip } : {}),
      ...(ip6 ? { ipv6Address: ip6 } : {}),
    };
  }

  /** dockerd keeps each network's ID in the endpoint settings once the container joined it. */
  private rememberNetworkId(c: Container, e: Endpoint): void {
    const eps = c.record.NetworkingConfig.EndpointsConfig;
    const given = eps?.[e.network] ?? (e.network === 'bridge' ? eps?.default : undefined);
    if (given) given.NetworkID = e.networkId;
  }

  private ownHosts(c: Container, links: HostsEntry[], ip: string, ip6?: string): string {
    return hostsContent({
      extraHosts: c.hostConfig.ExtraHosts ?? [],
      links,
      ip,
      ...(ip6 ? { ip6 } : {}),
      hostname: c.record.Config.Hostname ?? '',
      domainname: c.record.Config.Domainname,
      hostGateway: this.d.network?.hostGateway,
    });
  }

  abort(c: Container): void {
    const starting = this.starting.get(c.id);
    this.starting.delete(c.id);
    const network = this.d.network;
    // connect() not reached: the record still shows the last run's sandbox, not this attachment
    const detached = starting ? undefined : this.detach(c);
    if (!network) return;
    if (starting && starting.swarm.length > 0) void this.d.swarm?.detach(c.id);
    c.record.PublishedPorts = undefined;
    if (starting?.publishing) {
      void starting.publishing.then(
        () => network.ports.unpublish(c.id),
        () => undefined,
      );
    } else void network.ports.unpublish(c.id);
    if (detached) {
      this.release(c, detached);
    } else if (starting) {
      const settled = starting.attach.endpoints.then(
        () => undefined,
        () => undefined,
      );
      void settled.then(() => network.release(starting.attach));
    }
  }

  detach(c: Container): DetachedNetwork | undefined {
    const rec = c.record;
    const endpoints = endpointsOf(rec);
    rec.Endpoint = undefined;
    rec.Endpoints = undefined;
    // the host ports are free at once, the rules go in the background
    if (rec.PublishedPorts) void this.d.network?.ports.unpublish(c.id);
    rec.PublishedPorts = undefined;
    const first = endpoints[0];
    const sandboxKey = rec.Sandbox?.Key ?? first?.sandboxKey ?? '';
    const sandboxId = rec.Sandbox?.ID ?? first?.sandboxId ?? '';
    if (!first && !sandboxKey) return undefined;
    return { sandboxId, sandboxKey, endpoints };
  }

  release(c: Container, detached: DetachedNetwork | undefined): void {
    const network = this.d.network;
    if (!detached || !network) return;
    if (detached.endpoints.some((e) => e.swarm)) void this.d.swarm?.detach(c.id);
    void network.release({
      sandboxId: detached.sandboxId,
      sandboxKey: detached.sandboxKey,
      plumbed: detached.endpoints.flatMap((e) =>
        e.bridge ? [{ ifname: e.ifname ?? 'eth0', bridge: e.bridge, addresses: endpointAddresses(e) }] : [],
      ),
    });
    for (const e of detached.endpoints)
      network.announce('disconnect', c.id, e.network, e.swarm ? { id: e.networkId } : undefined);
  }

  restore(c: Container): void {
    const swarmEps = endpointsOf(c.record).filter((e) => e.swarm);
    const sandbox = c.record.Sandbox;
    if (swarmEps.length > 0 && sandbox)
      this.d.swarm?.restore(
        c.id,
        { sandboxId: sandbox.ID, sandboxKey: sandbox.Key },
        swarmEps,
        endpointsOf(c.record)
          .filter((e) => !e.swarm)
          .map((e) => e.ifname ?? 'eth0'),
      );
    const eps = c.record.NetworkingConfig.EndpointsConfig ?? {};
    for (const ep of endpointsOf(c.record)) {
      // its names as the record says now (a rename is saved before the endpoint is)
      if (ep.dns) {
        const given = eps[ep.network];
        ep.dns = this.dnsOf(c, ep.network, given?.Aliases ?? [], given?.Links ?? []) ?? ep.dns;
      }
      this.d.network?.restore(ep);
    }
    const main = c.record.Endpoint;
    const published = c.record.PublishedPorts ?? [];
    if (main && published.length && main.bridge && this.d.network) {
      this.restoring.push(this.d.network.ports.restore(this.publishTarget(c, main), published));
    }
  }

  /**
   * POST /networks/{id}/connect: the network joins the container's endpoint settings; a running
   * container gets one more interface at once (`network connect` announced).
   */
  async connectNetwork(c: Container, idOrName: string, settings: EndpointSettings): Promise<void> {
    const network = this.d.network;
    if (!network) throw notFound(`network ${idOrName} not found`);
    if (this.isSwarmNetwork(idOrName)) return this.connectSwarm(c, idOrName, settings);
    const n = network.lookup(idOrName);
    const nm = c.hostConfig.NetworkMode || 'default';
    if (nm === 'host' || nm.startsWith('container:') || n.name === 'host') {
      throw forbidden(
        'container sharing network namespace with another container or host cannot be connected to any other network',
      );
    }
    if (nm === 'none' || n.name === 'none') {
      throw forbidden('container cannot be disconnected from host network or connected to host network');
    }
    if (c.record.Config.NetworkDisabled) throw forbidden('container has networking disabled');
    const names = attachedNetworkNames(c.hostConfig, c.record);
    if (names.includes(n.name)) {
      throw forbidden(`endpoint with name ${c.name.slice(1)} already exists in network ${n.name}`);
    }
    const ip = settings.IPAMConfig?.IPv4Address;
    const ip6 = settings.IPAMConfig?.IPv6Address;
    for (const l of settings.Links ?? []) parseLink(l);
    network.checkEndpoint(n.name, {
      ipv4Address: ip,
      ipv6Address: ip6,
      aliases: (settings.Aliases?.length ?? 0) > 0,
    });
    const running = c.isRunningProcess && c.record.Sandbox?.Key;
    let added: Endpoint | undefined;
    const rec = c.record;
    if (running && rec.Sandbox) {
      // (and the interfaces swarm networks made: the gateway bridge's is in no endpoint)
      const used = new Set([
        ...endpointsOf(rec).map((e) => e.ifname ?? 'eth0'),
        ...(this.d.swarm?.interfaces(c.id) ?? []),
      ]);
      let i = 0;
      while (used.has(`eth${i}`)) i++;
      const dns = this.dnsOf(c, n.name, settings.Aliases ?? [], settings.Links ?? []);
      added = await network.attachMore(
        { sandboxId: rec.Sandbox.ID, sandboxKey: rec.Sandbox.Key },
        {
          network: n.name,
          ...(ip ? { ipv4Address: ip } : {}),
          ...(ip6 ? { ipv6Address: ip6 } : {}),
          ...(settings.MacAddress
            ? { macAddress: settings.MacAddress.replaceAll('-', ':').toLowerCase() }
            : {}),
          ...(dns ? { dns } : {}),
        },
        `eth${i}`,
      );
      // as dockerd: the new address gets a line of the container's own names in /etc/hosts
      if (rec.HostsPath) {
        const hosts = await readFile(rec.HostsPath, 'utf8').catch(() => undefined);
        if (hosts !== undefined) {
          const hostname = rec.Config.Hostname ?? '';
          let next = addOwnHostsAddress(hosts, added.ipAddress, hostname, rec.Config.Domainname);
          if (added.ipv6Address)
            next = addOwnHostsAddress(next, added.ipv6Address, hostname, rec.Config.Domainname);
          await rewriteInPlace(rec.HostsPath, next);
        }
      }
    }
    const hadDns = this.embeddedDns(c);
    this.explicitNetworks(c);
    rec.NetworkingConfig.EndpointsConfig ??= {};
    const eps = rec.NetworkingConfig.EndpointsConfig;
    // as dockerd: the network's ID shows once the container joined it
    eps[n.name] = added ? { ...settings, NetworkID: n.id } : { ...settings };
    if (added) {
      rec.Endpoints = [...endpointsOf(rec), added];
      rec.Endpoint ??= added;
      network.announce('connect', c.id, n.name);
      // its first user-defined network: names resolve through the engine's DNS from now on
      const dns = this.embeddedDns(c);
      if (!hadDns && dns && rec.ResolvConfPath) {
        const host = await readHostResolvConf(false);
        await rewriteInPlace(rec.ResolvConfPath, resolvConfContent(host, c.hostConfig, false, dns));
      }
    }
  }

  /**
   * POST /networks/{id}/disconnect: the network leaves the endpoint settings; a running
   * container's interface goes at once (`network disconnect` announced).
   */
  async disconnectNetwork(c: Container, idOrName: string, force: boolean): Promise<void> {
    const network = this.d.network;
    if (!network) throw notFound(`network ${idOrName} not found`);
    if (this.swarmNetworks(c).includes(idOrName)) return this.disconnectSwarm(c, idOrName);
    let name: string;
    try {
      name = network.lookup(idOrName).name;
    } catch (err) {
      // Force: a network that is gone still leaves the container's settings
      if (!force) throw err;
      name = idOrName;
    }
    const nm = c.hostConfig.NetworkMode || 'default';
    if (nm === 'host' || name === 'host') {
      throw forbidden('container cannot be disconnected from host network or connected to host network');
    }
    const names = attachedNetworkNames(c.hostConfig, c.record);
    if (!names.includes(name)) {
      throw forbidden(`container ${c.id} is not connected to network ${name}`);
    }
    const rec = c.record;
    const ep = endpointsOf(rec).find((e) => e.network === name);
    if (ep && rec.Sandbox && c.isRunningProcess) {
      await network.detachOne({ sandboxId: rec.Sandbox.ID, sandboxKey: rec.Sandbox.Key }, ep);
      if (rec.HostsPath) {
        const hosts = await readFile(rec.HostsPath, 'utf8').catch(() => undefined);
        if (hosts !== undefined) {
          let next = removeOwnHostsAddress(hosts, ep.ipAddress);
          if (ep.ipv6Address) next = removeOwnHostsAddress(next, ep.ipv6Address);
          await rewriteInPlace(rec.HostsPath, next);
        }
      }
      const rest = endpointsOf(rec).filter((e) => e !== ep);
      rec.Endpoints = rest;
      if (rec.Endpoint === ep) rec.Endpoint = rest[0];
      network.announce('disconnect', c.id, name);
    }
    this.explicitNetworks(c);
    const eps = rec.NetworkingConfig.EndpointsConfig ?? {};
    delete eps[name];
    if (name === 'bridge') delete eps.default;
  }

  /**
   * `network connect` to a swarm network: in the settings; a running container's sandbox joins
   * it at once (its swarm networks plugged again, the new one with them), its nameserver then the
   * node's swarm DNS if it had no embedded DNS.
   */
  private async connectSwarm(c: Container, name: string, settings: EndpointSettings): Promise<void> {
    const network = this.d.network;
    const nm = c.hostConfig.NetworkMode || 'default';
    if (nm === 'host' || nm.startsWith('container:'))
      throw forbidden(
        'container sharing network namespace with another container or host cannot be connected to any other network',
      );
    if (nm === 'none')
      throw forbidden('container cannot be disconnected from host network or connected to host network');
    if (c.record.Config.NetworkDisabled) throw forbidden('container has networking disabled');
    if (attachedNetworkNames(c.hostConfig, c.record).includes(name))
      throw forbidden(`endpoint with name ${c.name.slice(1)} already exists in network ${name}`);
    const rec = c.record;
    const hadDns = this.embeddedDns(c) ?? (this.swarmNetworks(c).length > 0 ? 'swarm' : undefined);
    this.explicitNetworks(c);
    rec.NetworkingConfig.EndpointsConfig ??= {};
    const eps = rec.NetworkingConfig.EndpointsConfig;
    eps[name] = { ...settings };
    if (!(c.isRunningProcess && rec.Sandbox?.Key) || !network) return;
    let joined: Endpoint[];
    try {
      joined = await this.replugSwarm(c);
    } catch (err) {
      delete eps[name];
      throw err;
    }
    const added = joined.find((e) => e.network === name);
    if (!added) return;
    eps[name] = { ...settings, NetworkID: added.networkId };
    network.announce('connect', c.id, name, { id: added.networkId });
    if (rec.HostsPath) {
      const hosts = await readFile(rec.HostsPath, 'utf8').catch(() => undefined);
      if (hosts !== undefined)
        await rewriteInPlace(
          rec.HostsPath,
          addOwnHostsAddress(hosts, added.ipAddress, rec.Config.Hostname ?? '', rec.Config.Domainname),
        );
    }
    if (!hadDns && rec.ResolvConfPath && this.d.swarm) {
      const host = await readHostResolvConf(false);
      const dns = await this.d.swarm.dnsAddress();
      await rewriteInPlace(rec.ResolvConfPath, resolvConfContent(host, c.hostConfig, false, dns));
    }
  }

  /** `network disconnect` from a swarm network: its address goes back, its interface goes. */
  private async disconnectSwarm(c: Container, name: string): Promise<void> {
    const rec = c.record;
    const ep = endpointsOf(rec).find((e) => e.swarm && e.network === name);
    this.explicitNetworks(c);
    const eps = rec.NetworkingConfig.EndpointsConfig ?? {};
    delete eps[name];
    if (!ep || !c.isRunningProcess || !rec.Sandbox) return;
    if (this.swarmNetworks(c).length === 0) {
      await this.d.swarm?.detach(c.id);
      const rest = endpointsOf(rec).filter((e) => !e.swarm);
      rec.Endpoints = rest;
      if (rec.Endpoint?.swarm) rec.Endpoint = rest[0];
    } else await this.replugSwarm(c);
    if (rec.HostsPath) {
      const hosts = await readFile(rec.HostsPath, 'utf8').catch(() => undefined);
      if (hosts !== undefined)
        await rewriteInPlace(rec.HostsPath, removeOwnHostsAddress(hosts, ep.ipAddress));
    }
    this.d.network?.announce('disconnect', c.id, name, { id: ep.networkId });
  }

  /** A running container's swarm networks plugged again, as its settings list them now. */
  private async replugSwarm(c: Container): Promise<Endpoint[]> {
    const rec = c.record;
    const swarm = this.d.swarm;
    if (!swarm || !rec.Sandbox) return [];
    const bridged = endpointsOf(rec).filter((e) => !e.swarm);
    const first = bridged.reduce((m, e) => Math.max(m, Number((e.ifname ?? 'eth0').slice(3)) + 1), 0);
    const eps = rec.NetworkingConfig.EndpointsConfig ?? {};
    const joined = await swarm.attach({
      containerId: c.id,
      sandboxId: rec.Sandbox.ID,
      sandboxKey: rec.Sandbox.Key,
      networks: this.swarmNetworks(c).map((n) => this.swarmRequest(c, n, eps[n])),
      firstIndex: first,
      usedIfnames: bridged.map((e) => e.ifname ?? 'eth0'),
      defaultRoute: bridged.length === 0,
    });
    const order = attachedNetworkNames(c.hostConfig, rec);
    const all = [...bridged, ...joined].sort((a, b) => order.indexOf(a.network) - order.indexOf(b.network));
    rec.Endpoints = all;
    rec.Endpoint = all[0];
    return joined;
  }

  /** From the first connect/disconnect on, the endpoint settings list the container's networks. */
  private explicitNetworks(c: Container): void {
    const rec = c.record;
    if (rec.NetworksExplicit) return;
    const names = attachedNetworkNames(c.hostConfig, rec);
    rec.NetworkingConfig.EndpointsConfig ??= {};
    const eps = rec.NetworkingConfig.EndpointsConfig;
    if (eps.default && !eps.bridge) {
      eps.bridge = eps.default;
    }
    delete eps.default;
    for (const name of names) eps[name] ??= {};
    rec.NetworksExplicit = true;
  }

  async sweep(): Promise<void> {
    await Promise.allSettled(this.restoring);
    this.restoring = [];
    await this.d.network?.sweep();
  }

  removed(c: Container): void {
    this.links.release(c);
  }

  renamed(c: Container, oldName: string): void {
    this.links.renamed(c, oldName);
    // a running container answers to its new name on its user-defined networks
    const eps = c.record.NetworkingConfig.EndpointsConfig ?? {};
    for (const ep of endpointsOf(c.record)) {
      if (!ep.dns || !c.isRunningProcess) continue;
      const dns = this.dnsOf(c, ep.network, eps[ep.network]?.Aliases ?? [], eps[ep.network]?.Links ?? []);
      if (!dns) continue;
      ep.dns = dns;
      this.d.network?.updateDns(ep);
    }
  }

  /** `DELETE /containers/{parent}/{alias}?link=1`: a running parent's /etc/hosts is written again. */
  async removeLink(idOrName: string): Promise<void> {
    await this.links.remove(idOrName, async (parent) => {
      const ep = endpointsOf(parent.record).find((e) => e.network === 'bridge');
      if (parent.isRunningProcess && ep) {
        await rewriteInPlace(
          parent.record.HostsPath,
          this.ownHosts(parent, this.links.runningHosts(parent), ep.ipAddress),
        );
      }
    });
  }
}
