import { join } from 'node:path';
import {
  errorMessage,
  forbidden,
  invalidParameter,
  notFound,
  notImplemented,
  systemError,
} from '../../common/errors.js';
import { randomId } from '../../common/ids.js';
import type { Logger } from '../../common/log.js';
import type { EventsService } from '../events/events.service.js';
import { type CniRunner, HostCniRunner } from './adapters/cni.runner.js';
import { HostLinkOps, type LinkOps } from './adapters/iproute.ops.js';
import { type FirewallOps, HostFirewallOps } from './adapters/iptables.ops.js';
import { HostNetnsOps, type NetnsOps } from './adapters/netns.ops.js';
import { setupBridge } from './bridge.setup.js';
import { bridgePluginConfig, cniArgs, loopbackPluginConfig, parseAddResult } from './cni.config.js';
import { listAllocations, lowestFree, macFromIpv4 } from './ipam.allocations.js';
import { formatNetwork, parseCidr } from './ipv4.js';
import { loadNetworks, newNetworkIdentity, saveNetworks } from './network.state.js';
import type {
  AttachedContainer,
  BridgeInfo,
  BridgePlumbing,
  ContainerNetworking,
  Endpoint,
  PendingAttach,
  PredefinedNetwork,
  ReleaseTarget,
} from './network.types.js';
import { filterNetworks, type NetworkFacts, networkView } from './network.views.js';

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
  ops?: { cni?: CniRunner; netns?: NetnsOps; link?: LinkOps; firewall?: FirewallOps };
  /** The host-wide lock taken while picking an address block. */
  lockPath?: string;
}

/** The network layer: the containers' side (ContainerNetworking) and the /networks API's. */
export interface NetworkService extends ContainerNetworking {
  list(filters: Map<string, string[]>): Array<Record<string, unknown>>;
  /** By ID, name or unique ID prefix; `scope` other than the network's is a 404, as dockerd. */
  inspect(idOrName: string, opts?: { scope?: string }): Record<string, unknown>;
  /**
   * What the API's network writes can do while the engine has only its predefined networks:
   * refuse what dockerd refuses on them (403), and say that user-defined networks are not there.
   */
  create(name: string): never;
  remove(idOrName: string): never;
  connect(idOrName: string): never;
  disconnect(idOrName: string): never;
  /** Nothing to prune: predefined networks never are. */
  prune(filters: Map<string, string[]>): { NetworksDeleted: string[] };
  /** Wait for the releases under way (engine shutdown; sandboxes of running containers stay). */
  close(): Promise<void>;
}

export const DEFAULT_LOCK_PATH = '/run/lock/berth-network.lock';

const USER_DEFINED =
  'user-defined networks are not supported by this engine yet (only bridge, host and none)';
const CLOSE_WAIT_MS = 20_000;

export async function createNetworkService(o: NetworkServiceOptions): Promise<NetworkService> {
  const log = o.log.child('network');
  const cni = o.ops?.cni ?? new HostCniRunner();
  const netns = o.ops?.netns ?? new HostNetnsOps();
  const link = o.ops?.link ?? new HostLinkOps();
  const firewall = o.ops?.firewall ?? new HostFirewallOps();
  const stateDir = join(o.dataRoot, 'network');
  const statePath = join(stateDir, 'networks.json');
  const ipamDir = join(stateDir, 'ipam');
  const netnsDir = join(o.execRoot, 'netns');

  const saved = await loadNetworks(statePath);
  let bridge: BridgeInfo | null = null;
  if (o.bridge !== null) {
    const setup = await setupBridge({
      name: o.bridge,
      bip: o.bip,
      saved: saved.bridge,
      link,
      firewall,
      lockPath: o.lockPath ?? DEFAULT_LOCK_PATH,
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
  await saveNetworks(statePath, saved);

  /** Sandboxes in use (attached, or restored at start): never swept. */
  const active = new Set<string>();
  const releasing = new Map<string, Promise<void>>();
  let containerSource: () => AttachedContainer[] = () => [];

  const ids: Record<PredefinedNetwork, string> = {
    bridge: saved.bridge?.id ?? '',
    host: saved.host.id,
    none: saved.none.id,
  };

  /**
   * Addresses this engine chose, by sandbox, from the pick until the sandbox is released: a
   * listing of host-local's files taken before an ADD wrote its file must not hand it out again.
   */
  const reserved = new Map<string, string>();

  /** The lowest address of the bridge's subnet nobody holds or is being given (dockerd's IPAM). */
  async function pickAddress(sandboxId: string, p: BridgePlumbing): Promise<string | undefined> {
    const held = await listAllocations(ipamDir).catch(() => []);
    // from here on synchronous: concurrent picks see each other's choice
    const taken = new Set(reserved.values());
    for (const a of held) if (a.network === p.cniName) taken.add(a.ip);
    const ip = lowestFree(p.subnet, p.gateway, taken);
    if (ip) reserved.set(sandboxId, ip);
    return ip;
  }

  function plumbingConfig(p: BridgePlumbing): Record<string, unknown> {
    return bridgePluginConfig({
      cniName: p.cniName,
      bridge: p.name,
      subnet: p.subnet,
      gateway: p.gateway,
      dataDir: ipamDir,
    });
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
    return out;
  }

  async function releaseNow(t: ReleaseTarget): Promise<void> {
    if (t.bridge) {
      const config = plumbingConfig(t.bridge);
      const call = { command: 'DEL' as const, containerId: t.sandboxId, ifname: 'eth0', config };
      try {
        await cni.exec('bridge', { ...call, netns: t.sandboxKey });
      } catch (err) {
        // The file is there but no namespace (a crash before it was bound): release the address.
        log.debug('CNI DEL in the namespace failed; releasing the address only', {
          sandbox: t.sandboxId,
          error: errorMessage(err),
        });
        await cni.exec('bridge', { ...call, netns: '' });
      }
    }
    // The loopback plugin's DEL only takes lo down: the namespace goes away instead.
    if (t.sandboxKey) await netns.remove(t.sandboxKey);
  }

  /** DEL of an allocation nobody knows (no endpoint left): its own network's plumbing. */
  function orphanPlumbing(network: string, ip: string): BridgePlumbing {
    if (bridge && network === bridge.cniName) {
      return { name: bridge.name, cniName: bridge.cniName, subnet: bridge.subnet, gateway: bridge.gateway };
    }
    const c = parseCidr(`${ip}/24`);
    return { name: network, cniName: network, subnet: c ? formatNetwork(c) : `${ip}/32`, gateway: '' };
  }

  const service: NetworkService = {
    get bridge() {
      return bridge;
    },

    get hostGateway() {
      return o.hostGatewayIp ?? bridge?.gateway;
    },

    networkId(name) {
      return ids[name];
    },

    attachBridge(opts) {
      const br = bridge;
      if (!br) throw systemError('the engine has no default bridge (--bridge none)');
      const sandboxId = randomId();
      const sandboxKey = join(netnsDir, sandboxId.slice(0, 12));
      const plumbing: BridgePlumbing = {
        name: br.name,
        cniName: br.cniName,
        subnet: br.subnet,
        gateway: br.gateway,
      };
      active.add(sandboxId);
      const ready = netns.create(sandboxKey);
      const endpoint = ready.then(async (): Promise<Endpoint> => {
        const common = { containerId: sandboxId, netns: sandboxKey };
        // as dockerd: the lowest free address, and a MAC made of it unless one was asked for
        const ip = await pickAddress(sandboxId, plumbing);
        try {
          const [added] = await Promise.all([
            cni.exec('bridge', {
              ...common,
              command: 'ADD',
              ifname: 'eth0',
              args: cniArgs({ ip, mac: opts.macAddress ?? (ip ? macFromIpv4(ip) : undefined) }),
              config: plumbingConfig(plumbing),
            }),
            cni.exec('loopback', { ...common, command: 'ADD', ifname: 'lo', config: loopbackPluginConfig() }),
          ]);
          return {
            network: 'bridge',
            networkId: br.id,
            endpointId: randomId(),
            sandboxId,
            sandboxKey,
            ...parseAddResult(added, 'eth0'),
            bridge: plumbing,
          };
        } catch (err) {
          reserved.delete(sandboxId);
          throw err;
        }
      });
      // Whoever starts the container awaits these; a start abandoned early must not leave an
      // unhandled rejection behind.
      ready.catch(() => undefined);
      endpoint.catch(() => undefined);
      const pending: PendingAttach = { sandboxId, sandboxKey, bridge: plumbing, ready, endpoint };
      return pending;
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
      const under = releasing.get(t.sandboxId);
      if (under) return under;
      if (!t.bridge && !t.sandboxKey) return Promise.resolve();
      const work = releaseNow(t)
        .catch((err) =>
          log.warn('cannot release a network sandbox (swept at the next start)', {
            sandbox: t.sandboxId,
            error: errorMessage(err),
          }),
        )
        .finally(() => {
          releasing.delete(t.sandboxId);
          reserved.delete(t.sandboxId);
        });
      releasing.set(t.sandboxId, work);
      return work;
    },

    restore(ep) {
      active.add(ep.sandboxId);
    },

    async sweep() {
      const keep = (id: string) => active.has(id) || releasing.has(id);
      const orphans = new Map<string, ReleaseTarget>();
      for (const a of await listAllocations(ipamDir)) {
        if (!a.containerId || keep(a.containerId) || orphans.has(a.containerId)) continue;
        orphans.set(a.containerId, {
          sandboxId: a.containerId,
          sandboxKey: join(netnsDir, a.containerId.slice(0, 12)),
          bridge: orphanPlumbing(a.network, a.ip),
        });
      }
      for (const file of await netns.list(netnsDir)) {
        const owned = [...active, ...releasing.keys(), ...orphans.keys()].some((id) => id.startsWith(file));
        if (!owned) orphans.set(file, { sandboxId: file, sandboxKey: join(netnsDir, file) });
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
    },

    announce(action, containerId, network) {
      o.events.publish('network', action, ids[network], {
        container: containerId,
        name: network,
        type: network === 'none' ? 'null' : network,
      });
    },

    setContainerSource(source) {
      containerSource = source;
    },

    list(filters) {
      return filterNetworks(facts(), filters).map((n) => networkView(n));
    },

    inspect(idOrName, opts = {}) {
      const found = find(idOrName);
      if (opts.scope && opts.scope !== 'local') throw notFound(`network ${idOrName} not found`);
      return networkView(found, containerSource());
    },

    create(name) {
      if (!name) throw invalidParameter('network name must not be empty');
      if (name === 'bridge' || name === 'host' || name === 'none') {
        throw forbidden(`operation is not permitted on predefined ${name} network`);
      }
      throw notImplemented(USER_DEFINED);
    },

    remove(idOrName) {
      const n = find(idOrName);
      throw forbidden(`${n.name} is a pre-defined network and cannot be removed`);
    },

    connect(idOrName) {
      find(idOrName);
      throw notImplemented(`connecting a running container to another network: ${USER_DEFINED}`);
    },

    disconnect(idOrName) {
      find(idOrName);
      throw notImplemented(`disconnecting a container from its network: ${USER_DEFINED}`);
    },

    prune(filters) {
      for (const key of filters.keys()) {
        if (key !== 'until' && key !== 'label' && key !== 'label!')
          throw invalidParameter(`invalid filter '${key}'`);
      }
      return { NetworksDeleted: [] };
    },

    async close() {
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
