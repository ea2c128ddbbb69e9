import { systemError } from '../../common/errors.js';

/**
 * The CNI network configurations berth hands to the plugins of containernetworking-plugins, and
 * what it reads back from their results (CNI spec 1.0.0). Pure.
 */

export const CNI_VERSION = '1.0.0';

/** What a bridge network's plugin configuration is made from. */
export interface BridgeNetwork {
  /** The CNI network name: host-local's directory under dataDir. */
  cniName: string;
  /** The Linux bridge. */
  bridge: string;
  /** `172.18.0.0/16` */
  subnet: string;
  /** The bridge's address, `172.18.0.1`. */
  gateway: string;
  /** host-local's allocation directory. */
  dataDir: string;
  /** Whether the interface gets the default route (the container's main network, not Internal). */
  defaultRoute?: boolean;
  /** `com.docker.network.driver.mtu`. */
  mtu?: number;
  /** The network's IPv6 block and the bridge's address on it (EnableIPv6 networks). */
  subnet6?: string;
  gateway6?: string;
  /**
   * The addresses the engine chose (IPv4, then IPv6), handed to host-local as `args.cni.ips`: its
   * CNI_ARGS `IP=` takes one address only.
   */
  ips?: string[];
}

/**
 * The bridge plugin with host-local IPAM: the bridge is the containers' gateway (isGateway, and
 * their default route). No ipMasq: the engine masquerades the whole block with one nat rule of its
 * own (iptables.ops.ts), where the plugin would add and remove a nat chain per container.
 */
export function bridgePluginConfig(n: BridgeNetwork): Record<string, unknown> {
  return {
    cniVersion: CNI_VERSION,
    name: n.cniName,
    type: 'bridge',
    bridge: n.bridge,
    isGateway: true,
    ipMasq: false,
    // a container reaches its own published ports through the host's addresses: with
    // br_netfilter the DNATed frame goes back out of the port it came in by (dockerd sets hairpin
    // mode too when the kernel carries published ports, --userland-proxy=false)
    hairpinMode: true,
    ...(n.mtu ? { mtu: n.mtu } : {}),
    ipam: {
      type: 'host-local',
      ranges: [
        [n.gateway ? { subnet: n.subnet, gateway: n.gateway } : { subnet: n.subnet }],
        ...(n.subnet6
          ? [[n.gateway6 ? { subnet: n.subnet6, gateway: n.gateway6 } : { subnet: n.subnet6 }]]
          : []),
      ],
      // the container's default routes, through the bridge (its main network only)
      routes: n.defaultRoute === false ? [] : [{ dst: '0.0.0.0/0' }, ...(n.subnet6 ? [{ dst: '::/0' }] : [])],
      dataDir: n.dataDir,
    },
    ...(n.ips?.length ? { args: { cni: { ips: n.ips } } } : {}),
  };
}

/** CNI_ARGS for an ADD: a fixed MAC address when the container asks for one. */
export function cniArgs(opts: { mac?: string; ip?: string }): string | undefined {
  const args = [];
  if (opts.ip) args.push(`IP=${opts.ip}`);
  if (opts.mac) args.push(`MAC=${opts.mac}`);
  return args.length ? ['IgnoreUnknown=1', ...args].join(';') : undefined;
}

/** The container side of an ADD: its address, prefix length, gateway and MAC. */
export interface AddedInterface {
  ipAddress: string;
  prefixLen: number;
  gateway: string;
  macAddress: string;
  /** On an EnableIPv6 network. */
  ipv6Address?: string;
  ipv6PrefixLen?: number;
  ipv6Gateway?: string;
}

interface CniInterface {
  name?: unknown;
  mac?: unknown;
  sandbox?: unknown;
}

interface CniIp {
  interface?: unknown;
  address?: unknown;
  gateway?: unknown;
}

/** Read the bridge plugin's ADD result: the IPv4 address given to `ifname` inside the sandbox. */
export function parseAddResult(result: unknown, ifname: string): AddedInterface {
  const r = (result ?? {}) as { interfaces?: unknown; ips?: unknown };
  const interfaces = Array.isArray(r.interfaces) ? (r.interfaces as CniInterface[]) : [];
  const ips = Array.isArray(r.ips) ? (r.ips as CniIp[]) : [];
  const index = interfaces.findIndex((i) => i.name === ifname && typeof i.sandbox === 'string');
  const ip = ips.find(
    (i) =>
      typeof i.address === 'string' &&
      i.address.includes('.') &&
      (index < 0 || i.interface === undefined || i.interface === index),
  );
  const m = typeof ip?.address === 'string' ? /^(\d+\.\d+\.\d+\.\d+)\/(\d+)$/.exec(ip.address) : null;
  if (!m) throw systemError(`the CNI bridge plugin returned no IPv4 address for ${ifname}`);
  const mac = index >= 0 ? interfaces[index]?.mac : undefined;
  const ip6 = ips.find(
    (i) =>
      typeof i.address === 'string' &&
      i.address.includes(':') &&
      (index < 0 || i.interface === undefined || i.interface === index),
  );
  const m6 = typeof ip6?.address === 'string' ? /^([0-9a-fA-F:]+)\/(\d+)$/.exec(ip6.address) : null;
  return {
    ipAddress: m[1] ?? '',
    prefixLen: Number(m[2]),
    gateway: typeof ip?.gateway === 'string' ? ip.gateway : '',
    macAddress: typeof mac === 'string' ? mac : '',
    ...(m6
      ? {
          ipv6Address: m6[1] ?? '',
          ipv6PrefixLen: Number(m6[2]),
          ipv6Gateway: typeof ip6?.gateway === 'string' ? ip6.gateway : '',
        }
      : {}),
  };
}

/** A plugin's error result (`{code, msg, details}`) as one message. */
export function cniErrorMessage(plugin: string, command: string, stdout: string, stderr: string): string {
  try {
    const e = JSON.parse(stdout) as { code?: unknown; msg?: unknown; details?: unknown };
    if (typeof e.msg === 'string') {
      const details = typeof e.details === 'string' && e.details ? `: ${e.details}` : '';
      return `CNI ${plugin} ${command}: ${e.msg}${details}`;
    }
  } catch {
    // not JSON: fall through
  }
  const text = (stderr || stdout).trim();
  return `CNI ${plugin} ${command} failed${text ? `: ${text}` : ''}`;
}
