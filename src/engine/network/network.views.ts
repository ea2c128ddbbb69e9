import { invalidParameter } from '../../common/errors.js';
import { checkFilterNames } from '../../common/filters.js';
import { filterMatch } from '../../common/go-regexp.js';
import type { AttachedContainer, BridgeInfo, PredefinedNetwork } from './network.types.js';

/** GET /networks and /networks/{id} of the predefined networks, in dockerd 20.10's shape. Pure. */

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
 * One network. `containers` (inspect only; the list shows `{}`) are the running containers with
 * an endpoint on it.
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
  return {
    Name: n.name,
    Id: n.id,
    Created: n.created,
    Scope: 'local',
    Driver: DRIVERS[n.name],
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
