import {
  BerthError,
  conflict,
  errorMessage,
  invalidParameter,
  notFound,
  unavailable,
} from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { rfc3339Nano } from '../../../common/time.js';
import type { OverlayNetworkState } from '../../network/overlay/overlay.types.js';
import { newSwarmId } from '../ca/tokens.js';
import { keys, PREFIX } from '../keys.js';
import { NO_LEADER } from '../messages.js';
import type { StoredCluster } from '../records.js';
import type { StoredService } from '../services/service.types.js';
import { specNetworks } from '../services/service-spec.js';
import type { ClusterStore, KeyValue } from '../store/cluster-store.js';
import { isAttachment, type StoredTask, stateRank } from '../tasks/task.types.js';
import type { EspProbe } from './kernel-esp.js';
import {
  INGRESS_VNI,
  type IpamOwner,
  type StoredSwarmNetwork,
  type SwarmIpamConfig,
  type SwarmNetworkRequest,
} from './network.types.js';
import { networkKeys } from './network-keys.js';
import {
  filterSwarmNetworks,
  type LocalNetworkFacts,
  type SwarmNetworkView,
  swarmNetworkView,
} from './network-view.js';
import { checkedConfig, nextSubnet, nextVni } from './pools.js';

/** What swarm networks need of the swarm: the store of an active manager (or dockerd's 503). */
export interface NetworkStoreAccess {
  managerStore(): ClusterStore;
  /** Whether this node is an active manager now (listings leave swarm networks out otherwise). */
  isManager(): boolean;
}

export interface SwarmNetworksOptions {
  swarm: NetworkStoreAccess;
  log: Logger;
  esp: EspProbe;
  /** The networks this node's tasks use (the node's overlay picture): what a worker lists. */
  local?: () => OverlayNetworkState[];
  /** A network's endpoints and peers here, while this node has it plumbed (inspect's Containers, Peers). */
  localFacts?: (networkId: string) => Promise<LocalNetworkFacts | undefined>;
  now?: () => Date;
  newId?: () => string;
}

/**
 * The `allocation` key: every network create reads it and writes it back in its txn (compare on
 * its mod revision), so two creates never pick the same block or VNI.
 */
const ALLOCATION_KEY = `${PREFIX}/netalloc`;

const DEFAULT_INGRESS_SUBNET = '10.0.0.0/24';

export const ENCRYPTED_REFUSED = 'encrypted overlay networks are not supported on this kernel (no ESP)';

/**
 * Swarm-scope (overlay) networks on a manager: `P/networks/<id>` with the name claimed under
 * `P/names/networks/<name>` and the gateway under `P/ipam/<id>/<gateway>` in the same
 * transaction; the block is the next free `SubnetSize` block of `DefaultAddrPool` unless given,
 * the VNI the next from 4097 (ingress: 4096). Removal is refused while a service uses it.
 */
export class SwarmNetworks {
  private readonly now: () => Date;
  private readonly newId: () => string;

  constructor(private readonly opts: SwarmNetworksOptions) {
    this.now = opts.now ?? (() => new Date());
    this.newId = opts.newId ?? newSwarmId;
  }

  /** Swarm networks of GET /networks (none when this node is not an active manager). */
  async list(filters: Map<string, string[]>): Promise<SwarmNetworkView[]> {
    if (!this.opts.swarm.isManager()) {
      // a worker shows the networks its tasks use, as dockerd does
      const local = this.localNetworks();
      return filterSwarmNetworks(local, filters, () => true).map((n) => swarmNetworkView(n));
    }
    const store = this.opts.swarm.managerStore();
    const all = await this.call(() => allNetworks(store));
    let users: Set<string> | undefined;
    if (filters.has('dangling')) users = await this.call(() => networksInUse(store));
    return filterSwarmNetworks(all, filters, (id) => users?.has(id) ?? false).map((n) => swarmNetworkView(n));
  }

  /** By ID, name, or unique ID prefix; undefined when there is no such swarm network (or no manager). */
  async find(ref: string): Promise<SwarmNetworkView | undefined> {
    if (!this.opts.swarm.isManager()) {
      const local = this.localNetworks();
      const found =
        local.find((n) => n.ID === ref) ??
        local.find((n) => n.Spec.Name === ref) ??
        (ref ? local.filter((n) => n.ID.startsWith(ref)) : []).at(0);
      return found ? swarmNetworkView(found, await this.opts.localFacts?.(found.ID)) : undefined;
    }
    const store = this.opts.swarm.managerStore();
    const found = await this.call(() => findNetwork(store, ref));
    return found
      ? swarmNetworkView(found.network, await this.opts.localFacts?.(found.network.ID))
      : undefined;
  }

  async create(req: SwarmNetworkRequest): Promise<{ Id: string; Warning: string }> {
    const store = this.opts.swarm.managerStore();
    const name = req.Name;
    if (!name) throw invalidParameter('rpc error: code = InvalidArgument desc = meta: name must be provided');
    if (req.Options && Object.hasOwn(req.Options, 'encrypted')) {
      // berth makes no IPsec tunnels; where the kernel lacks ESP, dockerd's own would not work either
      throw invalidParameter(
        (await this.opts.esp()) ? 'encrypted overlay networks are not supported by berth' : ENCRYPTED_REFUSED,
      );
    }
    if (req.EnableIPv6) throw invalidParameter('IPv6 is not supported on overlay networks by berth');
    if (req.IPAM?.Driver && req.IPAM.Driver !== 'default') {
      throw invalidParameter(`IPAM driver ${req.IPAM.Driver} is not supported on swarm networks`);
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const [cluster, networks, lock] = await this.call(() =>
        Promise.all([store.get(keys.cluster), allNetworks(store), store.get(ALLOCATION_KEY)]),
      );
      if (networks.some((n) => n.Spec.Name === name))
        throw conflict(`network with name ${name} already exists`);
      if (req.Ingress && networks.some((n) => n.Spec.Ingress)) {
        throw conflict('rpc error: code = AlreadyExists desc = ingress network already present');
      }
      const taken = networks.flatMap((n) => n.Spec.IPAM.Config.map((c) => c.Subnet));
      const stored = this.newNetwork(
        req,
        cluster,
        taken,
        networks.map((n) => n._.vni),
      );
      const id = stored.ID;
      const res = await this.call(() =>
        store.txn(
          [
            { key: keys.name('networks', name), target: 'create', op: 'equal', value: 0 },
            { key: ALLOCATION_KEY, target: 'mod', op: 'equal', value: lock?.modRevision ?? 0 },
          ],
          [
            { put: { key: networkKeys.object(id), value: JSON.stringify(stored) } },
            { put: { key: keys.name('networks', name), value: id } },
            { put: { key: ALLOCATION_KEY, value: id } },
            ...stored.Spec.IPAM.Config.map((c) => ({
              put: {
                key: networkKeys.ipam(id, c.Gateway),
                value: JSON.stringify({ kind: 'gateway' } satisfies IpamOwner),
              },
            })),
          ],
        ),
      );
      if (res.succeeded) return { Id: id, Warning: '' };
    }
    throw conflict(`rpc error: code = Aborted desc = network ${name} could not be allocated, try again`);
  }

  /** The `ingress` network of a new swarm (Ingress, 10.0.0.0/24 from the default pool, VNI 4096). */
  async createIngress(): Promise<string> {
    const res = await this.create({ Name: 'ingress', Driver: 'overlay', Ingress: true, Labels: {} });
    return res.Id;
  }

  /** Removes it, its name and its addresses' claims; refused while a service uses it. */
  async remove(ref: string): Promise<void> {
    // not a manager: no swarm network to look in (dockerd answers the local lookup's 404)
    if (!this.opts.swarm.isManager()) throw notFound(`network ${ref} not found`);
    const store = this.opts.swarm.managerStore();
    const found = await this.call(() => findNetwork(store, ref));
    if (!found) throw notFound(`network ${ref} not found`);
    const { network, kv } = found;
    const services = await this.call(() => store.range(keys.services));
    const serviceIds = new Set<string>();
    for (const s of services.kvs) {
      const svc = JSON.parse(s.value) as StoredService;
      serviceIds.add(svc.ID);
      if (serviceUses(svc, network)) {
        throw invalidParameter(
          `rpc error: code = FailedPrecondition desc = network ${network.ID} is in use by service ${svc.ID}`,
        );
      }
    }
    // swarmkit: a task that is to run and has not ended holds the network. The tasks of a
    // removed service do not (they are on their way out: `docker stack rm` removes the services
    // and then at once their network); their addresses' claims go with the network.
    const tasks = await this.call(() => store.range(keys.tasks));
    for (const t of tasks.kvs) {
      const task = JSON.parse(t.value) as StoredTask;
      // a container's network-attachment task holds the network too, until its container leaves
      if (!serviceIds.has(task.ServiceID) && !isAttachment(task)) continue;
      if (
        stateRank(task.DesiredState) > stateRank('running') ||
        stateRank(task.Status.State) > stateRank('running')
      )
        continue;
      if ((task.NetworksAttachments ?? []).some((a) => a.Network.ID === network.ID)) {
        throw invalidParameter(
          `rpc error: code = FailedPrecondition desc = network ${network.ID} is in use by task ${task.ID}`,
        );
      }
    }
    const res = await this.call(() =>
      store.txn(
        [{ key: kv.key, target: 'mod', op: 'equal', value: kv.modRevision }],
        [
          { delete: { key: kv.key } },
          { delete: { key: keys.name('networks', network.Spec.Name) } },
          { delete: { key: networkKeys.ipamOf(network.ID), prefix: true } },
        ],
      ),
    );
    if (!res.succeeded) throw conflict(`rpc error: code = Aborted desc = network ${ref} changed, try again`);
  }

  private newNetwork(
    req: SwarmNetworkRequest,
    cluster: KeyValue | undefined,
    taken: string[],
    vnis: number[],
  ): StoredSwarmNetwork {
    const c = cluster ? (JSON.parse(cluster.value) as StoredCluster) : undefined;
    const pools = c?.DefaultAddrPool?.length ? c.DefaultAddrPool : ['10.0.0.0/8'];
    const size = c?.SubnetSize || 24;
    const given = (req.IPAM?.Config ?? []).filter((x) => x.Subnet || x.Gateway || x.IPRange);
    let configs: SwarmIpamConfig[];
    if (given.length > 0) {
      configs = [];
      for (const g of given) {
        if (!g.Subnet)
          throw invalidParameter(
            'rpc error: code = InvalidArgument desc = ipam config: subnet must be given with a gateway or an ip range',
          );
        configs.push(checkedConfig(g, [...taken, ...configs.map((x) => x.Subnet)]));
      }
    } else {
      const defaultPool = pools.length === 1 && pools[0] === '10.0.0.0/8' && size === 24;
      const subnet =
        req.Ingress && defaultPool && !taken.includes(DEFAULT_INGRESS_SUBNET)
          ? DEFAULT_INGRESS_SUBNET
          : nextSubnet(taken, pools, size);
      configs = [checkedConfig({ Subnet: subnet }, taken)];
    }
    const labels = nonEmpty(req.Labels);
    return {
      ID: this.newId(),
      CreatedAt: rfc3339Nano(this.now().getTime()),
      Spec: {
        Name: req.Name,
        Labels: req.Ingress ? (labels ?? {}) : labels,
        Driver: 'overlay',
        Options: { ...(req.Options ?? {}) },
        Attachable: req.Attachable === true,
        Ingress: req.Ingress === true,
        Internal: req.Internal === true,
        IPAM: { Driver: 'default', Options: nonEmpty(req.IPAM?.Options), Config: configs },
      },
      _: {
        vni: req.Ingress
          ? vnis.includes(INGRESS_VNI)
            ? nextVni(vnis)
            : INGRESS_VNI
          : nextVni([...vnis, INGRESS_VNI]),
      },
    };
  }

  /** The node's overlay picture as network objects. */
  private localNetworks(): StoredSwarmNetwork[] {
    return (this.opts.local?.() ?? []).map((n) => ({
      ID: n.id,
      CreatedAt: n.info.created,
      Spec: {
        Name: n.name,
        Labels: n.info.labels,
        Driver: 'overlay',
        Options: { ...n.info.options },
        Attachable: n.info.attachable,
        Ingress: n.info.ingress,
        Internal: n.info.internal,
        IPAM: {
          Driver: 'default',
          Options: null,
          Config: [
            { Subnet: n.subnet, ...(n.info.ipRange ? { IPRange: n.info.ipRange } : {}), Gateway: n.gateway },
          ],
        },
      },
      _: { vni: n.vni },
    }));
  }

  /** A store that cannot answer is the swarm without a leader (dockerd's 503). */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BerthError) throw err;
      this.opts.log.warn('cluster store call for networks failed', { error: errorMessage(err) });
      throw unavailable(NO_LEADER);
    }
  }
}

export async function allNetworks(store: ClusterStore): Promise<StoredSwarmNetwork[]> {
  const r = await store.range(networkKeys.all);
  return r.kvs.map((kv) => JSON.parse(kv.value) as StoredSwarmNetwork);
}

export async function findNetwork(
  store: ClusterStore,
  ref: string,
): Promise<{ network: StoredSwarmNetwork; kv: KeyValue } | undefined> {
  if (ref === '' || ref.includes('/')) return undefined;
  const parse = (kv: KeyValue) => ({ network: JSON.parse(kv.value) as StoredSwarmNetwork, kv });
  const byId = await store.get(networkKeys.object(ref));
  if (byId) return parse(byId);
  const named = await store.get(keys.name('networks', ref));
  const byName = named ? await store.get(networkKeys.object(named.value)) : undefined;
  if (byName) return parse(byName);
  const prefixed = await store.range(networkKeys.object(ref));
  if (prefixed.kvs.length > 1) {
    throw invalidParameter(
      `network ${ref} is ambiguous (${prefixed.kvs.length} matches found based on ID prefix)`,
    );
  }
  return prefixed.kvs[0] ? parse(prefixed.kvs[0]) : undefined;
}

/** Whether the service is on the network (its Targets; the ingress: its ingress-published ports). */
export function serviceUses(svc: StoredService, network: StoredSwarmNetwork): boolean {
  if (network.Spec.Ingress) return ingressPorts(svc);
  return specNetworks(svc.Spec).some((n) => n.Target === network.ID);
}

/** The service publishes a port through the ingress mesh. */
export function ingressPorts(svc: StoredService): boolean {
  return (svc.Spec.EndpointSpec?.Ports ?? []).some((p) => (p.PublishMode ?? 'ingress') === 'ingress');
}

async function networksInUse(store: ClusterStore): Promise<Set<string>> {
  const [services, networks] = await Promise.all([store.range(keys.services), allNetworks(store)]);
  const out = new Set<string>();
  for (const kv of services.kvs) {
    const svc = JSON.parse(kv.value) as StoredService;
    for (const n of networks) if (serviceUses(svc, n)) out.add(n.ID);
  }
  return out;
}

/** A map as swarmkit keeps it: an empty one is none (dockerd shows null). */
function nonEmpty(m: Record<string, string> | null | undefined): Record<string, string> | null {
  return m && Object.keys(m).length > 0 ? { ...m } : null;
}
