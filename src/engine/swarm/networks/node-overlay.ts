import { macFromIpv4 } from '../../network/ipam.allocations.js';
import type {
  IngressPortState,
  NodeOverlayState,
  OverlayName,
  OverlayNetworkState,
  OverlayVip,
} from '../../network/overlay/overlay.types.js';
import { containerNameOf } from '../agent/container-config.js';
import { keys } from '../keys.js';
import { isLive } from '../orchestrator/task-life.js';
import { dataPathAddrOf, type StoredCluster, type StoredNode } from '../records.js';
import type { StoredService } from '../services/service.types.js';
import type { ClusterStore } from '../store/cluster-store.js';
import { isTerminal, type StoredTask } from '../tasks/task.types.js';
import type { IpamOwner, StoredSwarmNetwork } from './network.types.js';
import { networkKeys } from './network-keys.js';
import { withPrefix } from './pools.js';

/**
 * What a node's data plane needs (the assignments stream's `overlay`, issue 14 §6: "the overlay
 * peers of the networks its tasks use"), read from the store by the manager the node streams
 * from: each swarm network one of the node's live tasks is attached to, with
 * - every live attachment on it, on any node: address, MAC (from the address), the node's
 *   data-path address (static FDB and neighbour entries: no gossip);
 * - the names the embedded DNS answers there, from the running tasks: `tasks.<service>`, the
 *   service name (dnsrr: the tasks; vip: the VIP) and the spec's aliases alike, the task's
 *   container name `<service>.<slot|node>.<task>`;
 * - each vip service's VIP with its running tasks behind it (the load balancer's table); a
 *   task its node said unhealthy is behind no VIP and answers no name any more.
 */
export async function nodeOverlay(store: ClusterStore, nodeId: string): Promise<NodeOverlayState> {
  const [tasksR, servicesR, networksR, nodesR, clusterKv] = await Promise.all([
    store.range(keys.tasks),
    store.range(keys.services),
    store.range(networkKeys.all),
    store.range(keys.nodes),
    store.get(keys.cluster),
  ]);
  const tasks = tasksR.kvs.map((kv) => JSON.parse(kv.value) as StoredTask);
  const services = new Map(
    servicesR.kvs.map((kv) => {
      const s = JSON.parse(kv.value) as StoredService;
      return [s.ID, s] as const;
    }),
  );
  const networks = new Map(
    networksR.kvs.map((kv) => {
      const n = JSON.parse(kv.value) as StoredSwarmNetwork;
      return [n.ID, n] as const;
    }),
  );
  const nodeRecords = new Map(
    nodesR.kvs.map((kv) => {
      const n = JSON.parse(kv.value) as StoredNode;
      return [n.ID, n] as const;
    }),
  );
  // the VXLAN destination of each node: its data-path address
  const nodeAddr = new Map([...nodeRecords].map(([id, n]) => [id, dataPathAddrOf(n)] as const));
  const cluster = clusterKv ? (JSON.parse(clusterKv.value) as StoredCluster) : undefined;
  const live = tasks.filter((t) => isLive(t) && !isTerminal(t.Status.State) && t.NodeID);
  const mine = new Set<string>();
  for (const t of live)
    if (t.NodeID === nodeId) for (const a of t.NetworksAttachments ?? []) mine.add(a.Network.ID);
  // the nodes' ingress sandboxes: their addresses on `ingress` (the allocator's `node` claims)
  const ingressNet = [...networks.values()].find((n) => n.Spec.Ingress);
  const sandboxes = new Map<string, string>();
  if (ingressNet) {
    const claims = await store.range(networkKeys.ipamOf(ingressNet.ID));
    for (const kv of claims.kvs) {
      const owner = JSON.parse(kv.value) as IpamOwner;
      if (owner.kind === 'node')
        sandboxes.set(owner.node, kv.key.slice(networkKeys.ipamOf(ingressNet.ID).length));
    }
    if (sandboxes.has(nodeId)) mine.add(ingressNet.ID);
  }

  const out: OverlayNetworkState[] = [];
  for (const id of [...mine].sort()) {
    const n = networks.get(id);
    const config = n?.Spec.IPAM.Config[0];
    if (!n || !config) continue;
    const state: OverlayNetworkState = {
      id,
      name: n.Spec.Name,
      info: {
        created: n.CreatedAt,
        labels: n.Spec.Labels,
        options: n.Spec.Options,
        attachable: n.Spec.Attachable,
        internal: n.Spec.Internal,
        ingress: n.Spec.Ingress,
        ...(config.IPRange ? { ipRange: config.IPRange } : {}),
      },
      vni: n._.vni,
      subnet: config.Subnet,
      gateway: config.Gateway,
      peers: [],
      nodes: [],
      names: [],
      vips: [],
    };
    const using = new Set<string>();
    const running = new Map<string, string[]>();
    for (const t of live) {
      const a = (t.NetworksAttachments ?? []).find((x) => x.Network.ID === id);
      const ip = a?.Addresses[0]?.split('/')[0];
      if (!ip) continue;
      state.peers.push({ ip, mac: macFromIpv4(ip) ?? '', node: nodeAddr.get(t.NodeID ?? '') ?? '' });
      using.add(t.NodeID ?? '');
      if (!serving(t)) continue;
      // a plain container's attachment: its names (container name, short ID, aliases)
      const own = t._?.names;
      if (own) {
        if (own.length > 0) state.names.push({ names: [...own], ip });
        continue;
      }
      const svc = services.get(t.ServiceID);
      if (!svc) continue;
      const name = svc.Spec.Name ?? '';
      const aliases = (t.Spec.Networks ?? []).find((x) => x.Target === id)?.Aliases ?? [];
      const dnsrr = svc.Spec.EndpointSpec?.Mode === 'dnsrr';
      const names = [`tasks.${name}`, containerNameOf(name, t)];
      if (dnsrr) names.push(name, ...aliases);
      state.names.push({ names, ip });
      running.set(svc.ID, [...(running.get(svc.ID) ?? []), ip]);
    }
    if (n.Spec.Ingress) {
      for (const [node, ip] of sandboxes) {
        state.peers.push({ ip, mac: macFromIpv4(ip) ?? '', node: nodeAddr.get(node) ?? '' });
        using.add(node);
      }
    }
    state.nodes = [...using]
      .map((nid) => nodeRecords.get(nid))
      .filter((x): x is StoredNode => x !== undefined)
      .map((x) => ({ name: x.Description?.Hostname ?? '', ip: x.Status?.Addr ?? '' }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.ip < b.ip ? -1 : 1));
    for (const svc of services.values()) {
      const vip = svc.Endpoint?.VirtualIPs?.find((v) => v.NetworkID === id);
      if (!vip) continue;
      const addr = vip.Addr.split('/')[0] ?? '';
      const aliases =
        (svc.Spec.TaskTemplate?.Networks ?? svc.Spec.Networks ?? []).find((x) => x.Target === id)?.Aliases ??
        [];
      const entry: OverlayName = { names: [svc.Spec.Name ?? '', ...aliases], ip: addr };
      state.names.push(entry);
      const v: OverlayVip = { service: svc.ID, vip: addr, backends: (running.get(svc.ID) ?? []).sort() };
      state.vips.push(v);
    }
    state.peers.sort((a, b) => (a.ip < b.ip ? -1 : 1));
    out.push(state);
  }
  const own = sandboxes.get(nodeId);
  const ingressConfig = ingressNet?.Spec.IPAM.Config[0];
  return {
    local: nodeAddr.get(nodeId) ?? '',
    port: cluster?.DataPathPort || 4789,
    networks: out,
    ...(ingressNet && own && ingressConfig
      ? {
          ingress: {
            networkId: ingressNet.ID,
            address: withPrefix(own, ingressConfig.Subnet),
            ports: ingressPortsOf(services.values(), live, ingressNet.ID),
          },
        }
      : {}),
  };
}

/** Each ingress-published port of the services, with the running tasks' addresses on `ingress`. */
function ingressPortsOf(
  services: Iterable<StoredService>,
  live: StoredTask[],
  ingressId: string,
): IngressPortState[] {
  const out: IngressPortState[] = [];
  for (const svc of services) {
    const backends = live
      .filter((t) => t.ServiceID === svc.ID && serving(t))
      .map((t) => t.NetworksAttachments?.find((a) => a.Network.ID === ingressId)?.Addresses[0]?.split('/')[0])
      .filter((ip): ip is string => ip !== undefined)
      .sort();
    for (const p of svc.Endpoint?.Ports ?? []) {
      if ((p.PublishMode ?? 'ingress') !== 'ingress' || !p.PublishedPort || !p.TargetPort) continue;
      const protocol = p.Protocol ?? 'tcp';
      if (protocol === 'sctp') continue;
      out.push({ protocol, publishedPort: p.PublishedPort, targetPort: p.TargetPort, backends });
    }
  }
  return out.sort((a, b) => a.publishedPort - b.publishedPort || (a.protocol < b.protocol ? -1 : 1));
}

/** A backend of its services' VIPs, names and ingress ports: running, and not said unhealthy. */
function serving(t: StoredTask): boolean {
  return t.Status.State === 'running' && t._?.unhealthy !== true;
}
