import type { OverlayLocalFacts } from '../../network/overlay/overlay.types.js';
import type { LocalNetworkFacts } from './network-view.js';

/** What the local facts need of a container: its name and its own endpoints' IDs by network. */
export interface ContainerEndpoints {
  Name: string;
  NetworkSettings: { Networks: Record<string, { NetworkID?: string; EndpointID?: string }> | null };
}

/**
 * A plumbed overlay network's `Containers` and `Peers` as dockerd 20.10's network inspect fills
 * them on a node that has the network: each local sandbox by its container ID (Name the
 * container's name, EndpointID its own endpoint's when its settings name one, else the data
 * plane's stable one), the routing mesh's sandbox as `ingress-sbox` (Name `ingress-endpoint`),
 * and the nodes the network is in use on. A container gone meanwhile is left out.
 */
export async function localNetworkFacts(
  networkId: string,
  facts: OverlayLocalFacts,
  inspect: (containerId: string) => Promise<ContainerEndpoints | undefined>,
): Promise<LocalNetworkFacts> {
  const containers: LocalNetworkFacts['containers'] = {};
  for (const e of facts.endpoints) {
    let name = e.name;
    let endpointId = e.endpointId;
    if (name === undefined) {
      const c = await inspect(e.sandbox);
      if (!c) continue;
      name = c.Name.replace(/^\//, '');
      const own = Object.values(c.NetworkSettings.Networks ?? {}).find((n) => n.NetworkID === networkId);
      if (own?.EndpointID) endpointId = own.EndpointID;
    }
    containers[e.sandbox] = {
      Name: name,
      EndpointID: endpointId,
      MacAddress: e.mac,
      IPv4Address: e.ipv4,
      IPv6Address: '',
    };
  }
  return { containers, peers: facts.peers.map((p) => ({ Name: p.name, IP: p.ip })) };
}
