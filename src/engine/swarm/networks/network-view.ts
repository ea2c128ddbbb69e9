import { filterMatch } from '../../../common/go-regexp.js';
import { labelsMatch } from '../../network/network.views.js';
import { OVERLAY_VNI_OPTION, type StoredSwarmNetwork } from './network.types.js';

/**
 * A swarm network as GET /networks and /networks/{id} show it on a manager (dockerd 20.10's
 * shape for an overlay network; `Containers` null and no `Peers` unless the node has it plumbed:
 * `local` gives the node's own containers and peers then, and `Labels` is `{}` rather than null,
 * as dockerd shows its local view). Pure.
 */

export interface LocalNetworkFacts {
  containers: Record<
    string,
    { Name: string; EndpointID: string; MacAddress: string; IPv4Address: string; IPv6Address: string }
  >;
  peers: Array<{ Name: string; IP: string }>;
}

export interface SwarmNetworkView {
  Name: string;
  Id: string;
  Created: string;
  Scope: 'swarm';
  Driver: string;
  EnableIPv4: boolean;
  EnableIPv6: boolean;
  IPAM: {
    Driver: string;
    Options: Record<string, string> | null;
    Config: Array<{ Subnet: string; IPRange?: string; Gateway: string }>;
  };
  Internal: boolean;
  Attachable: boolean;
  Ingress: boolean;
  ConfigFrom: { Network: string };
  ConfigOnly: boolean;
  Containers: LocalNetworkFacts['containers'] | null;
  Options: Record<string, string>;
  Labels: Record<string, string> | null;
  Peers?: LocalNetworkFacts['peers'];
}

export function swarmNetworkView(n: StoredSwarmNetwork, local?: LocalNetworkFacts): SwarmNetworkView {
  const view: SwarmNetworkView = {
    Name: n.Spec.Name,
    Id: n.ID,
    Created: n.CreatedAt,
    Scope: 'swarm',
    Driver: n.Spec.Driver,
    EnableIPv4: true,
    EnableIPv6: false,
    IPAM: {
      Driver: n.Spec.IPAM.Driver,
      Options: n.Spec.IPAM.Options,
      Config: n.Spec.IPAM.Config.map((c) => ({ ...c })),
    },
    Internal: n.Spec.Internal,
    Attachable: n.Spec.Attachable,
    Ingress: n.Spec.Ingress,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Containers: local ? local.containers : null,
    Options: { [OVERLAY_VNI_OPTION]: String(n._.vni), ...n.Spec.Options },
    // the node's own (libnetwork's) view in dockerd: labels `{}` rather than null
    Labels: local ? (n.Spec.Labels ?? {}) : n.Spec.Labels,
  };
  if (local) view.Peers = local.peers;
  return view;
}

/**
 * GET /networks filters on swarm networks, as dockerd reads them for local ones (the filter names
 * were checked by the local listing): name and id as patterns, driver and scope exactly, type
 * (swarm networks are `custom`), label; `dangling` is answered by `inUse`.
 */
export function filterSwarmNetworks(
  list: StoredSwarmNetwork[],
  filters: Map<string, string[]>,
  inUse: (id: string) => boolean,
): StoredSwarmNetwork[] {
  const any = (key: string, ok: (v: string) => boolean) => {
    const want = filters.get(key) ?? [];
    return want.length === 0 || want.some(ok);
  };
  return list.filter(
    (n) =>
      any('name', (p) => filterMatch(p, n.Spec.Name)) &&
      any('id', (p) => filterMatch(p, n.ID)) &&
      any('driver', (d) => d === n.Spec.Driver) &&
      any('scope', (s) => s === 'swarm') &&
      any('type', (t) => t === 'custom') &&
      any('dangling', (d) => (d === 'true' || d === '1' ? !inUse(n.ID) : inUse(n.ID))) &&
      labelsMatch(n.Spec.Labels ?? {}, filters),
  );
}
