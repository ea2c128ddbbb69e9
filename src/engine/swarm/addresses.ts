import { isIP } from 'node:net';
import { invalidParameter } from '../../common/errors.js';
import { runTool } from '../../common/host/run-tool.js';

/**
 * ListenAddr and AdvertiseAddr: `addr:port`, `iface:port`, `addr` or `iface` (then the default
 * port), and the advertise address found on the host when none is given. Interfaces and their
 * addresses come from netlink (`ip -j -d addr`), never /sys: an engine in another network
 * namespace sees the machine's /sys/class/net.
 */

export const DEFAULT_LISTEN_PORT = 2377;
export const DEFAULT_LISTEN_ADDR = `0.0.0.0:${DEFAULT_LISTEN_PORT}`;

export interface HostInterface {
  name: string;
  up: boolean;
  loopback: boolean;
  /** The link kind (`bridge`, `veth`, `vxlan`...); empty for a plain device. */
  kind: string;
  addresses: { ip: string; family: 4 | 6; scope: string }[];
}

export interface InterfaceLister {
  list(): Promise<HostInterface[]>;
}

interface IpJsonLink {
  ifname?: string;
  flags?: string[];
  linkinfo?: { info_kind?: string };
  addr_info?: { family?: string; local?: string; scope?: string }[];
}

export const hostInterfaces: InterfaceLister = {
  async list() {
    const r = await runTool('ip', ['-j', '-d', 'addr', 'show'], { stdout: true });
    if (r.code !== 0) throw new Error(`ip addr show: ${r.stderr}`);
    const links = JSON.parse(r.stdout || '[]') as IpJsonLink[];
    return links.map((l) => ({
      name: l.ifname ?? '',
      up: l.flags?.includes('UP') === true,
      loopback: l.flags?.includes('LOOPBACK') === true,
      kind: l.linkinfo?.info_kind ?? '',
      addresses: (l.addr_info ?? [])
        .filter((a) => a.local && (a.family === 'inet' || a.family === 'inet6'))
        .map((a) => ({ ip: a.local ?? '', family: a.family === 'inet' ? 4 : 6, scope: a.scope ?? '' })),
    }));
  },
};

export interface HostPort {
  /** An IP address or an interface name. */
  host: string;
  port: number;
}

/** `addr:port`, `[v6]:port`, `iface:port`, or a host alone (the default port). */
export function parseHostPort(value: string, field: string, defaultPort: number): HostPort {
  const bad = (why: string) => invalidParameter(`invalid ${field} ${JSON.stringify(value)}: ${why}`);
  let host = value;
  let portText: string | undefined;
  const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(value);
  if (v6) {
    host = v6[1] ?? '';
    portText = v6[2];
  } else if (isIP(value) === 6) {
    host = value;
  } else {
    const colon = value.lastIndexOf(':');
    if (colon >= 0) {
      host = value.slice(0, colon);
      portText = value.slice(colon + 1);
    }
  }
  if (host === '' && portText === undefined) throw bad('an address or interface is required');
  if (host.includes(':') && isIP(host) !== 6) throw bad('not an address, an interface or a port');
  if (host !== '' && isIP(host) === 0 && !/^[A-Za-z0-9_.@-]{1,15}$/.test(host)) {
    throw bad('not an IP address or an interface name');
  }
  let port = defaultPort;
  if (portText !== undefined) {
    if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535)
      throw bad(`invalid port ${JSON.stringify(portText)}`);
    port = Number(portText);
  }
  return { host: host === '' ? '0.0.0.0' : host, port };
}

function isUnspecified(ip: string): boolean {
  return ip === '0.0.0.0' || ip === '::';
}

/** The address of the interface `name` (its only global IPv4, else its only global IPv6). */
function interfaceAddress(iface: HostInterface, field: string): string {
  const usable = iface.addresses.filter((a) => a.scope !== 'link' && a.scope !== 'host');
  const v4 = usable.filter((a) => a.family === 4);
  const v6 = usable.filter((a) => a.family === 6);
  const pick = v4.length > 0 ? v4 : v6;
  if (pick.length === 0) {
    throw invalidParameter(`invalid ${field}: interface ${iface.name} has no usable IPv4 or IPv6 address`);
  }
  if (pick.length > 1) {
    throw invalidParameter(
      `invalid ${field}: interface ${iface.name} has more than one ${pick === v4 ? 'IPv4' : 'IPv6'} address (${pick[0]?.ip} and ${pick[1]?.ip})`,
    );
  }
  return pick[0]?.ip ?? '';
}

/** An IP address as given, or the address of the interface named. */
export async function resolveHost(host: string, field: string, lister: InterfaceLister): Promise<string> {
  if (isIP(host)) return host;
  const iface = (await lister.list()).find((i) => i.name === host);
  if (!iface) throw invalidParameter(`invalid ${field}: no such interface ${JSON.stringify(host)}`);
  return interfaceAddress(iface, field);
}

/**
 * The host's one address to advertise: the global addresses of interfaces that are up, leaving
 * out loopback and bridges (berth's, docker0 and the like: container-facing, never how other
 * hosts reach this one). One interface with an IPv4 and an IPv6 address gives the IPv4.
 */
export async function detectAdvertiseAddress(lister: InterfaceLister): Promise<string> {
  const candidates: { ip: string; iface: string }[] = [];
  for (const iface of await lister.list()) {
    if (!iface.up || iface.loopback || iface.kind === 'bridge') continue;
    const global = iface.addresses.filter((a) => a.scope === 'global');
    const v4 = global.filter((a) => a.family === 4);
    const v6 = global.filter((a) => a.family === 6);
    for (const a of v4.length > 0 ? v4 : v6) candidates.push({ ip: a.ip, iface: iface.name });
  }
  const [first, second] = candidates;
  if (!first) {
    throw invalidParameter("could not find the system's IP address - specify one with --advertise-addr");
  }
  if (second) {
    throw invalidParameter(
      `could not choose an IP address to advertise since this system has multiple addresses on different interfaces (${first.ip} on ${first.iface} and ${second.ip} on ${second.iface})`,
    );
  }
  return first.ip;
}

export interface ResolvedAddresses {
  listenHost: string;
  listenPort: number;
  advertiseHost: string;
  advertisePort: number;
  dataPathAddr: string;
}

/**
 * The addresses of an init or a join: the advertise address given (an IP or an interface, its
 * port the listen port unless given), else the listen address when it is a specific IP, else the
 * one found on the host.
 */
export async function resolveAddresses(
  req: { ListenAddr?: string; AdvertiseAddr?: string; DataPathAddr?: string },
  lister: InterfaceLister,
): Promise<ResolvedAddresses> {
  const listen = parseHostPort(req.ListenAddr || DEFAULT_LISTEN_ADDR, 'ListenAddr', DEFAULT_LISTEN_PORT);
  const listenHost = await resolveHost(listen.host, 'ListenAddr', lister);
  let advertiseHost: string;
  let advertisePort = listen.port;
  if (req.AdvertiseAddr) {
    const adv = parseHostPort(req.AdvertiseAddr, 'AdvertiseAddr', listen.port);
    advertiseHost = await resolveHost(adv.host, 'AdvertiseAddr', lister);
    if (isUnspecified(advertiseHost)) {
      throw invalidParameter(
        `invalid AdvertiseAddr ${JSON.stringify(req.AdvertiseAddr)}: it must be a specific address`,
      );
    }
    advertisePort = adv.port;
  } else if (!isUnspecified(listenHost)) {
    advertiseHost = listenHost;
  } else {
    advertiseHost = await detectAdvertiseAddress(lister);
  }
  let dataPathAddr = advertiseHost;
  if (req.DataPathAddr) {
    const dp = parseHostPort(req.DataPathAddr, 'DataPathAddr', 0);
    dataPathAddr = await resolveHost(dp.host, 'DataPathAddr', lister);
  }
  return { listenHost, listenPort: listen.port, advertiseHost, advertisePort, dataPathAddr };
}

/** `host:port`, with brackets around an IPv6 host. */
export function joinHostPort(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}
