import { invalidParameter } from '../../common/errors.js';
import { checkFilterNames } from '../../common/filters.js';
import { filterMatch } from '../../common/go-regexp.js';
import { broadcastAddress, containsIp, networkAddress, parseCidr, parseIpv4 } from './ipv4.js';
import type {
  AttachedContainer,
  BridgeInfo,
  NetworkStatus,
  PredefinedNetwork,
  SubnetStatus,
} from './network.types.js';

/**
 * GET /networks and /networks/{id} of the predefined networks: dockerd 20.10's shape with what
 * newer dockerds add (EnableIPv4, inspect's Status); the API layer leaves out what the request's
 * version does not have. Pure.
 */

export interface NetworkFacts {
  name: PredefinedNetwork;
  id: string;
  created: string;
  /** The bridge's facts (the `bridge` network only). */
  bridge?: BridgeInfo;
}

const DRIVERS: Record<PredefinedNetwork, string> = { bridge: 'bridge', host: 'host', none: 'null' };

export function bridgeOptions(bridge: BridgeInfo): Record<string, string> {
  return {
    'com.docker.network.bridge.default_bridge': 'true',
    'com.docker.network.bridge.enable_icc': 'true',
    'com.docker.network.bridge.enable_ip_masquerade': 'true',
    'com.docker.network.bridge.host_binding_ipv4': '0.0.0.0',
    'com.docker.network.bridge.name': bridge.name,
    'com.docker.network.driver.mtu': '1500',
  };
}

/**
 * The IPAM state of one block as libnetwork's default IPAM reports it: the addresses taken (the
 * network and broadcast addresses, which it reserves, the gateway and the endpoints' addresses)
 * and how many are left to hand out (the whole block is the range).
 */
export function subnetStatus(subnet: string, gateway: string, endpointIps: readonly string[]): SubnetStatus {
  const block = parseCidr(subnet);
  if (!block) return { IPsInUse: 0, DynamicIPsAvailable: 0 };
  const size = 2 ** (32 - block.prefixLen);
  const taken = new Set<number>();
  if (block.prefixLen < 31) {
    taken.add(networkAddress(block));
    taken.add(broadcastAddress(block));
  }
  for (const text of [gateway, ...endpointIps]) {
    const ip = parseIpv4(text);
    if (ip !== undefined && containsIp(block, ip)) taken.add(ip);
  }
  return { IPsInUse: taken.size, DynamicIPsAvailable: size - taken.size };
}

/**
 * Inspect's `Status` (API 1.52): the bridge's block with its use by the running containers'
 * endpoints; host and none hand out no addresses (an empty IPAM status, Subnets left out).
 */
export function networkStatus(n: NetworkFacts, containers: readonly AttachedContainer[]): NetworkStatus {
  if (!n.bridge) return { IPAM: {} };
  const ips = containers.filter((c) => c.endpoint.networkId === n.id && c.endpoint.ipAddress);
  return {
    IPAM: {
      Subnets: {
        [n.bridge.subnet]: subnetStatus(
          n.bridge.subnet,
          n.bridge.gateway,
          ips.map((c) => c.endpoint.ipAddress),
        ),
      },
    },
  };
}

/**
 * One network. `containers` (inspect only; the list shows `{}` and no Status) are the running
 * containers with an endpoint on it.
 */
export function networkView(n: NetworkFacts, containers?: AttachedContainer[]): Record<string, unknown> {
  const config: Array<Record<string, string>> = [];
  if (n.bridge) {
    const c: Record<string, string> = { Subnet: n.bridge.subnet };
    if (n.bridge.gatewayInConfig) c.Gateway = n.bridge.gateway;
    config.push(c);
  }
  const members: Record<string, Record<string, string>> = {};
  for (const c of containers ?? []) {
    if (c.endpoint.networkId !== n.id) continue;
    members[c.id] = {
      Name: c.name,
      EndpointID: c.endpoint.endpointId,
      MacAddress: c.endpoint.macAddress,
      IPv4Address: c.endpoint.ipAddress ? `${c.endpoint.ipAddress}/${c.endpoint.prefixLen}` : '',
      IPv6Address: '',
    };
  }
  const view: Record<string, unknown> = {
    Name: n.name,
    Id: n.id,
    Created: n.created,
    Scope: 'local',
    Driver: DRIVERS[n.name],
    EnableIPv4: true,
    EnableIPv6: false,
    IPAM: { Driver: 'default', Options: null, Config: config },
    Internal: false,
    Attachable: false,
    Ingress: false,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Containers: members,
    Options: n.bridge ? bridgeOptions(n.bridge) : {},
    Labels: {},
  };
  if (containers) view.Status = networkStatus(n, containers);
  return view;
}

export const NETWORK_LIST_FILTERS = ['dangling', 'driver', 'id', 'label', 'name', 'scope', 'type'] as const;

function matches(value: string, pattern: string): boolean {
  return filterMatch(pattern, value);
}

/**
 * GET /networks filters, as dockerd reads them: name and id as patterns, driver and scope exactly,
 * type builtin|custom, dangling (predefined networks are never dangling), label (none here).
 */
export function filterNetworks(list: NetworkFacts[], filters: Map<string, string[]>): NetworkFacts[] {
  checkFilterNames(filters, NETWORK_LIST_FILTERS);
  for (const t of filters.get('type') ?? []) {
    if (t !== 'custom' && t !== 'builtin') throw invalidParameter(`invalid filter: 'type'='${t}'`);
  }
  for (const d of filters.get('dangling') ?? []) {
    if (!['true', 'false', '1', '0'].includes(d)) {
      throw invalidParameter(`invalid filter 'dangling=${d}'`);
    }
  }
  const any = (key: string, ok: (v: string) => boolean) => {
    const want = filters.get(key) ?? [];
    return want.length === 0 || want.some(ok);
  };
  return list.filter(
    (n) =>
      any('name', (p) => matches(n.name, p)) &&
      any('id', (p) => matches(n.id, p)) &&
      any('driver', (d) => d === DRIVERS[n.name]) &&
      any('scope', (s) => s === 'local') &&
      any('type', (t) => t === 'builtin') &&
      any('dangling', (d) => d === 'false' || d === '0') &&
      (filters.get('label') ?? []).length === 0,
  );
}
