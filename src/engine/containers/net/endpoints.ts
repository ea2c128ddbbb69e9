import { join } from 'node:path';
import type { HostConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { ContainerNetworking, Endpoint, PendingAttach } from '../../network/network.types.js';
import type { Container } from '../core/container.js';
import { namespacePath } from '../core/namespaces.js';
import type { LinkTarget, NetworkPort, StartNetwork } from '../core/ports.js';
import type { LinkRecord } from '../core/record.types.js';
import type { ContainerSet } from '../core/set.js';
import type { ContainerStore } from '../core/store.js';
import { endpointSysctlList } from '../core/validate.js';
import { type HostsEntry, hostsContent, rewriteInPlace, writeContainerFiles } from './files.js';
import { LegacyLinks } from './legacy-links.js';
import { mergeLinkEnv } from './links.js';

/**
 * A container's networking as the state machine sees it: which network a start attaches to, the
 * bridge attachment (a namespace file and CNI, in src/engine/network), the endpoint in the record,
 * the files a container gets (/etc/hosts, /etc/hostname, /etc/resolv.conf), connect/disconnect
 * events, and legacy links (legacy-links.ts).
 */

/**
 * `bridge`: a sandbox on the default bridge; `none`/`host`: dockerd's predefined networks;
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
  log: Logger;
}

/** The container side of networking: NetworkPort for the state machine, links and views for the API. */
export class ContainerNetworks implements NetworkPort {
  readonly links: LegacyLinks;
  /** Bridge attachments of starts under way (released when the start fails). */
  private readonly starting = new Map<string, { attach: PendingAttach; linkHosts: HostsEntry[] }>();

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
    return network.bridge ? 'bridge' : 'none';
  }

  private onBridge(c: Container): boolean {
    const nm = c.hostConfig.NetworkMode || 'default';
    return (
      (nm === 'default' || nm === 'bridge') && !c.record.Config.NetworkDisabled && !!this.d.network?.bridge
    );
  }

  /** The ID of a predefined network (list filters); undefined without networking. */
  networkId(name: string): string | undefined {
    const network = this.d.network;
    return network && (name === 'bridge' || name === 'host' || name === 'none')
      ? network.networkId(name)
      : undefined;
  }

  defaultNetworkMode(): string {
    return this.d.network?.bridge ? 'bridge' : 'default';
  }

  checkCreate(hc: HostConfig): LinkTarget[] {
    const nm = hc.NetworkMode ?? '';
    if (!['', 'default', 'bridge', 'host', 'none'].includes(nm) && !nm.startsWith('container:')) {
      throw invalidParameter(`network ${nm} not found`);
    }
    // an engine without a default bridge (--bridge none) has no `bridge` network
    if (nm === 'bridge' && this.d.network && !this.d.network.bridge) {
      throw invalidParameter('network bridge not found');
    }
    return this.links.resolve(hc);
  }

  keptLinks(name: string, links: LinkTarget[]): LinkRecord[] {
    return this.links.kept(name, links);
  }

  registerLinks(c: Container): void {
    this.links.register(c);
  }

  private macAddress(c: Container): string | undefined {
    const eps = c.record.NetworkingConfig.EndpointsConfig;
    const mac = eps?.bridge?.MacAddress || eps?.default?.MacAddress || c.record.Config.MacAddress || '';
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
      const links = this.links.forStart(c);
      const attach = this.d.network.attachBridge({ macAddress: this.macAddress(c) });
      this.starting.set(c.id, { attach, linkHosts: links.hosts });
      netns = attach.sandboxKey;
      linkHosts = links.hosts;
      if (links.env.length) env = mergeLinkEnv(links.env, rec.Config.Env ?? []);
    }
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
      });
    }
    rec.HostsPath = hostsPath;
    rec.HostnamePath = hostnamePath;
    rec.ResolvConfPath = resolvConfPath;
    const sysctls = this.kind(c) === 'bridge' ? this.interfaceSysctls(c) : undefined;
    return {
      ...(netns !== undefined ? { netns } : {}),
      ...(env ? { env } : {}),
      ...(sysctls ? { sysctls } : {}),
    };
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
    const ep = await starting.attach.endpoint;
    this.starting.delete(c.id);
    rec.Endpoint = ep;
    rec.Sandbox = { ID: ep.sandboxId, Key: ep.sandboxKey, Network: 'bridge', NetworkID: ep.networkId };
    rec.SandboxKey = ep.sandboxKey;
    network.announce('connect', c.id, 'bridge');
    // a failure from here fails the start, which releases the endpoint (the record's now)
    await rewriteInPlace(rec.HostsPath, this.ownHosts(c, starting.linkHosts, ep.ipAddress));
    await this.links.targetStarted(c, ep.ipAddress);
  }

  private ownHosts(c: Container, links: HostsEntry[], ip: string): string {
    return hostsContent({
      extraHosts: c.hostConfig.ExtraHosts ?? [],
      links,
      ip,
      hostname: c.record.Config.Hostname ?? '',
      domainname: c.record.Config.Domainname,
      hostGateway: this.d.network?.hostGateway,
    });
  }

  abort(c: Container): void {
    const starting = this.starting.get(c.id);
    this.starting.delete(c.id);
    const ep = c.record.Endpoint;
    c.record.Endpoint = undefined;
    const network = this.d.network;
    if (!network) return;
    if (ep) {
      void network.release(ep);
      network.announce('disconnect', c.id, ep.network);
    } else if (starting) {
      const settled = starting.attach.endpoint.then(
        () => undefined,
        () => undefined,
      );
      void settled.then(() => network.release(starting.attach));
    }
  }

  detach(c: Container): Endpoint | undefined {
    const ep = c.record.Endpoint;
    c.record.Endpoint = undefined;
    return ep;
  }

  release(c: Container, ep: Endpoint | undefined): void {
    if (!ep || !this.d.network) return;
    void this.d.network.release(ep);
    this.d.network.announce('disconnect', c.id, ep.network);
  }

  restore(c: Container): void {
    if (c.record.Endpoint) this.d.network?.restore(c.record.Endpoint);
  }

  async sweep(): Promise<void> {
    await this.d.network?.sweep();
  }

  removed(c: Container): void {
    this.links.release(c);
  }

  renamed(c: Container, oldName: string): void {
    this.links.renamed(c, oldName);
  }

  /** `DELETE /containers/{parent}/{alias}?link=1`: a running parent's /etc/hosts is written again. */
  async removeLink(idOrName: string): Promise<void> {
    await this.links.remove(idOrName, async (parent) => {
      const ep = parent.record.Endpoint;
      if (parent.isRunningProcess && ep?.network === 'bridge') {
        await rewriteInPlace(
          parent.record.HostsPath,
          this.ownHosts(parent, this.links.runningHosts(parent), ep.ipAddress),
        );
      }
    });
  }
}
