import { invalidParameter } from '../../common/errors.js';
import { checkFilterNames } from '../../common/filters.js';
import { filterMatch } from '../../common/go-regexp.js';
import { broadcastAddress, containsIp, networkAddress, parseCidr, parseIpv4 } from './ipv4.js';
import type { SavedUserNetwork } from './network.state.js';
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
  /** A predefined network's name, or a user-defined network's. */
  name: string;
  id: string;
  created: string;
  /** The bridge's facts (the `bridge` network only). */
  bridge?: BridgeInfo;
  /** A user-defined network's facts. */
  user?: SavedUserNetwork;
}

const DRIVERS: Record<PredefinedNetwork, string> = { bridge: 'bridge', host: 'host', none: 'null' };

function driverOf(n: NetworkFacts): string {
  return n.user ? 'bridge' : (DRIVERS[n.name as PredefinedNetwork] ?? 'bridge');
}

/** A `label` filter value (`key` or `key=value`) against a network's labels. */
function labelMatches(labels: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return Object.hasOwn(labels, filter);
  return labels[filter.slice(0, i)] === filter.slice(i + 1);
}

/** `label` (all must match) and `label!` (none may) of list and prune filters. */
export function labelsMatch(labels: Record<string, string>, filters: Map<string, string[]>): boolean {
  return (
    (filters.get('label') ?? []).every((l) => labelMatches(labels, l)) &&
    !(filters.get('label!') ?? []).some((l) => labelMatches(labels, l))
  );
}

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
  const blocks = n.bridge
    ? [{ Subnet: n.bridge.subnet, Gateway: n.bridge.gateway }]
    : (n.user?.ipam ?? []).filter((c) => c.Subnet && !c.Subnet.includes(':'));
  if (!blocks.length) return { IPAM: {} };
  const ips = containers
    .filter((c) => c.endpoint.networkId === n.id && c.endpoint.ipAddress)
    .map((c) => c.endpoint.ipAddress);
  const subnets: Record<string, SubnetStatus> = {};
  for (const b of blocks) subnets[b.Subnet] = subnetStatus(b.Subnet, b.Gateway ?? '', ips);
  return { IPAM: { Subnets: subnets } };
}

/**
 * One network. `containers` (inspect only; the list shows `{}` and no Status) are the running
 * containers with an endpoint on it.
 */
export function networkView(n: NetworkFacts, containers?: AttachedContainer[]): Record<string, unknown> {
  const config: Array<Record<string, unknown>> = [];
  if (n.bridge) {
    const c: Record<string, string> = { Subnet: n.bridge.subnet };
    if (n.bridge.gatewayInConfig) c.Gateway = n.bridge.gateway;
    config.push(c);
  }
  for (const c of n.user?.ipam ?? []) {
    const shown: Record<string, unknown> = { ...c };
    if (n.user?.implicitGateways?.includes(c.Subnet)) delete shown.Gateway;
    config.push(shown);
  }
  const members: Record<string, Record<string, string>> = {};
  for (const c of containers ?? []) {
    if (c.endpoint.networkId !== n.id) continue;
    members[c.id] = {
      Name: c.name,
      EndpointID: c.endpoint.endpointId,
      MacAddress: c.endpoint.macAddress,
      IPv4Address: c.endpoint.ipAddress ? `${c.endpoint.ipAddress}/${c.endpoint.prefixLen}` : '',
      IPv6Address: c.endpoint.ipv6Address ? `${c.endpoint.ipv6Address}/${c.endpoint.ipv6PrefixLen}` : '',
    };
  }
  const u = n.user;
  const view: Record<string, unknown> = {
    Name: n.name,
    Id: n.id,
    Created: n.created,
    Scope: 'local',
    Driver: driverOf(n),
    EnableIPv4: true,
    EnableIPv6: u?.enableIPv6 ?? false,
    IPAM: { Driver: 'default', Options: u ? u.ipamOptions : null, Config: config },
    Internal: u?.internal ?? false,
    Attachable: u?.attachable ?? false,
    Ingress: false,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Containers: members,
    Options: n.bridge ? bridgeOptions(n.bridge) : u ? { ...u.options } : {},
    Labels: u ? { ...u.labels } : {},
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
 * type builtin|custom, dangling (user-defined networks no container is attached to; predefined
 * networks never are), label.
 */
export function filterNetworks(
  list: NetworkFacts[],
  filters: Map<string, string[]>,
  inUse: (id: string) => boolean = () => false,
): NetworkFacts[] {
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
      any('driver', (d) => d === driverOf(n)) &&
      any('scope', (s) => s === 'local') &&
      any('type', (t) => t === (n.user ? 'custom' : 'builtin')) &&
      any('dangling', (d) => {
        const dangling = n.user !== undefined && !inUse(n.id);
        return d === 'true' || d === '1' ? dangling : !dangling;
      }) &&
      (filters.get('label') ?? []).every((l) => labelMatches(n.user?.labels ?? {}, l)),
  );
}
