import { writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { HostConfig } from '../../../common/docker-types.js';
import { errnoCode, systemError } from '../../../common/errors.js';
import { writeFileAtomic } from '../../../common/fs/atomic.js';
import { readFile, writeFile } from '../../../common/fs/quick.js';
import {
  FALLBACK_NAMESERVERS,
  onlyResolvedStub,
  parseResolvConf,
  readHostResolvConf,
  usableNameservers,
} from '../../network/dns/host-resolvers.js';

/** The /etc/hosts, /etc/hostname and /etc/resolv.conf a container gets, as dockerd writes them. */

const DEFAULT_HOSTS = [
  '127.0.0.1\tlocalhost',
  '::1\tlocalhost ip6-localhost ip6-loopback',
  'fe00::0\tip6-localnet',
  'ff00::0\tip6-mcastprefix',
  'ff02::1\tip6-allnodes',
  'ff02::2\tip6-allrouters',
];

/** One /etc/hosts line: an address and its names (space-separated). */
export interface HostsEntry {
  ip: string;
  names: string;
}

/**
 * /etc/hosts as dockerd writes it: the defaults, ExtraHosts, the linked containers
 * (`IP alias hostname name`), then the container's own address with its names (the FQDN and the
 * bare name when the hostname or domainname has a dot).
 */
export function hostsContent(opts: {
  extraHosts: string[];
  links?: HostsEntry[];
  ip?: string;
  /** The container's IPv6 address on an EnableIPv6 network (a line of its own, as dockerd). */
  ip6?: string;
  hostname: string;
  domainname?: string;
  /** What `host-gateway` stands for: --host-gateway-ip, else the default bridge's address (dockerd's). */
  hostGateway?: string;
}): string {
  const lines = [...DEFAULT_HOSTS];
  for (const entry of opts.extraHosts) {
    const i = entry.indexOf(':');
    const host = entry.slice(0, i);
    const ip = entry.slice(i + 1).replace(/^\[|\]$/g, '');
    if (ip === 'host-gateway' && !opts.hostGateway) {
      // dockerd's error when it has neither --host-gateway-ip nor a default bridge
      throw systemError('unable to derive the IP value for host-gateway');
    }
    lines.push(`${ip === 'host-gateway' ? opts.hostGateway : ip}\t${host}`);
  }
  for (const l of opts.links ?? []) lines.push(`${l.ip}\t${l.names}`);
  if (opts.ip) lines.push(ownHostsLine(opts.ip, opts.hostname, opts.domainname));
  if (opts.ip && opts.ip6) lines.push(ownHostsLine(opts.ip6, opts.hostname, opts.domainname));
  return `${lines.join('\n')}\n`;
}

/** The container's own line: its address, the FQDN, and the bare name when the FQDN has a dot. */
function ownHostsLine(ip: string, hostname: string, domainname?: string): string {
  const fqdn = domainname ? `${hostname}.${domainname}` : hostname;
  const dot = fqdn.indexOf('.');
  return `${ip}\t${dot < 0 ? fqdn : `${fqdn} ${fqdn.slice(0, dot)}`}`;
}

/**
 * A container joining another network while it runs (`network connect`): dockerd appends a line
 * with the new address and the container's names; nothing when the address has one already.
 */
export function addOwnHostsAddress(
  content: string,
  ip: string,
  hostname: string,
  domainname?: string,
): string {
  if (content.split('\n').some((l) => l.startsWith(`${ip}\t`))) return content;
  const body = content.endsWith('\n') || content === '' ? content : `${content}\n`;
  return `${body}${ownHostsLine(ip, hostname, domainname)}\n`;
}

/**
 * A container leaving a network (`network disconnect`): the line of that address goes. (dockerd
 * 20.10 deletes every line with the container's names, the other networks' too; berth keeps them.)
 */
export function removeOwnHostsAddress(content: string, ip: string): string {
  return content
    .split('\n')
    .filter((l) => !l.startsWith(`${ip}\t`))
    .join('\n');
}

/**
 * etchosts.Update: give the lines naming `alias` first the address `ip` (a linked container
 * started again with another address).
 */
export function updateHostsAddress(content: string, alias: string, ip: string): string {
  return content
    .split('\n')
    .map((line) => {
      const tab = line.indexOf('\t');
      if (tab < 0) return line;
      const names = line.slice(tab + 1);
      return names === alias || names.startsWith(`${alias} `) || names.startsWith(`${alias}.`)
        ? `${ip}${line.slice(tab)}`
        : line;
    })
    .join('\n');
}

/**
 * Rewrite a running container's /etc/hosts in place (same inode): the container sees the file
 * bind-mounted, so a rename would not reach it.
 */
export async function rewriteInPlace(path: string, content: string): Promise<void> {
  await writeFile(path, content);
}

/**
 * resolv.conf from the host's (loopback nameservers dropped, as dockerd does when the container
 * has its own network namespace; Google's servers when none remain) or from Dns/DnsSearch/DnsOptions.
 * With `embeddedDns` (a user-defined network: the address of the engine's DNS responder), as
 * dockerd's rebuildDNS: that nameserver first, then only the IPv6 ones (the IPv4 ones are the
 * responder's to forward to: dnsClientOptions), `ndots:0` added unless the options set ndots,
 * and no other lines.
 */
export function resolvConfContent(
  hostResolv: string,
  hc: HostConfig,
  hostNetwork: boolean,
  embeddedDns?: string,
): string {
  const host = parseResolvConf(hostResolv);
  let nameservers = hostNetwork ? host.nameservers : usableNameservers(host.nameservers);
  let search = host.search;
  let options = host.options;
  let other = host.other;
  if ((hc.Dns ?? []).length > 0) nameservers = [...(hc.Dns ?? [])];
  // as dockerd's resolvconf.Build: a search list of `.` alone is none; a `.` among others stays
  if ((hc.DnsSearch ?? []).length > 0)
    search = hc.DnsSearch?.join(' ').trim() === '.' ? [] : [...(hc.DnsSearch ?? [])];
  if ((hc.DnsOptions ?? []).length > 0) options = [...(hc.DnsOptions ?? [])];
  if (nameservers.length === 0) nameservers = [...FALLBACK_NAMESERVERS];
  // dockerd cannot rebuild the file around its DNS with a malformed ndots: the plain one stays
  const badNdots = options.some((o) => o.includes('ndots') && !/^ndots:-?\d+$/.test(o));
  if (embeddedDns !== undefined && !badNdots) {
    nameservers = [embeddedDns, ...nameservers.filter((ns) => isIP(ns.replace(/%.*$/, '')) === 6)];
    if (!options.some((o) => /^ndots:\d+$/.test(o))) options = [...options, 'ndots:0'];
    other = [];
  }
  const out: string[] = [];
  if (search.length > 0) out.push(`search ${search.join(' ')}`);
  for (const ns of nameservers) out.push(`nameserver ${ns}`);
  if (options.length > 0) out.push(`options ${options.join(' ')}`);
  out.push(...other);
  return `${out.join('\n')}\n`;
}

/**
 * What the engine's DNS needs of a container's HostConfig (the fields of its DnsEntry): the servers
 * its other queries go to (dockerd's ExtServers: the IPv4 ones of its Dns; none without Dns, then
 * the host's), and whether its DnsOptions set ndots above 0 (then single-label names the network
 * does not know are not forwarded: the client tries its search domains).
 */
export function dnsClientOptions(hc: HostConfig): { upstreams?: string[]; ndotsSet?: boolean } {
  const v4 = (hc.Dns ?? []).filter((ns) => isIP(ns) === 4);
  const ndots = (hc.DnsOptions ?? []).some((o) => /^ndots:\d+$/.test(o) && Number(o.slice(6)) > 0);
  return { ...(v4.length ? { upstreams: v4 } : {}), ...(ndots ? { ndotsSet: true } : {}) };
}

export { onlyResolvedStub, readHostResolvConf };

export async function readHostHosts(): Promise<string> {
  try {
    return await readFile('/etc/hosts', 'utf8');
  } catch {
    return `${DEFAULT_HOSTS.join('\n')}\n`;
  }
}

export async function writeContainerFiles(paths: {
  hostsPath: string;
  hostnamePath: string;
  resolvConfPath: string;
  hostname: string;
  domainname?: string;
  hostConfig: HostConfig;
  hostNetwork: boolean;
  /** /etc/hosts lines of linked containers. */
  links?: HostsEntry[];
  hostGateway?: string;
  /** On a user-defined network: the address of the engine's DNS responder (the only IPv4 nameserver). */
  embeddedDns?: string;
  /** The container never started: the files are most likely not there yet (see writeNetFile). */
  fresh?: boolean;
}): Promise<void> {
  // as dockerd: the container's hostname (with the host's network, create made it the host's
  // name unless one was given); the host's /etc/hosts with the host's network, unless ExtraHosts
  // are given (then the default lines and those)
  const hostname = paths.hostname;
  const [hosts, hostResolvConf] = await Promise.all([
    paths.hostNetwork && !(paths.hostConfig.ExtraHosts ?? []).length
      ? readHostHosts()
      : hostsContent({
          extraHosts: paths.hostConfig.ExtraHosts ?? [],
          links: paths.links,
          hostname: paths.hostname,
          domainname: paths.domainname,
          hostGateway: paths.hostGateway,
        }),
    readHostResolvConf(paths.hostNetwork),
  ]);
  // three independent files (an empty path: not this one): written, each atomically, at once;
  // no fsync: they are written again at every start (after a reboot too) before anything reads them
  const fresh = paths.fresh === true;
  await Promise.all([
    writeNetFile(paths.hostnamePath, `${hostname}\n`, fresh),
    paths.hostsPath && writeNetFile(paths.hostsPath, hosts, fresh),
    paths.resolvConfPath &&
      writeNetFile(
        paths.resolvConfPath,
        resolvConfContent(hostResolvConf, paths.hostConfig, paths.hostNetwork, paths.embeddedDns),
        fresh,
      ),
  ]);
}

/**
 * One of a container's network files, no fsync (written again at every start, after a reboot too,
 * before anything reads them). Atomically (a temp file renamed over it) when it may be there
 * already: a reader, or a bind mount of a running container sharing it, sees the old content or
 * the new. A `fresh` file (a first start) is made in place with O_EXCL: a new file nobody can have
 * open, written before the container that mounts it starts; one that is there after all (an
 * earlier start failed after writing it) or a missing directory takes the atomic way.
 */
function writeNetFile(path: string, content: string, fresh: boolean): Promise<void> {
  if (fresh) {
    try {
      writeFileSync(path, content, { flag: 'wx', mode: 0o644 });
      return Promise.resolve();
    } catch (err) {
      const code = errnoCode(err);
      if (code !== 'EEXIST' && code !== 'ENOENT') return Promise.reject(err);
    }
  }
  return writeFileAtomic(path, content, 0o644, 'none');
}
