import { isIP } from 'node:net';
import { StatCachedFile } from '../../../common/fs/stat-cached.js';

/**
 * The host's resolver configuration as dockerd reads it: /etc/resolv.conf (systemd-resolved's real
 * list when it names only the stub), its nameservers with the loopback ones dropped (a container's
 * own network cannot reach them), Google's servers when none remain. The containers' resolv.conf
 * (src/engine/containers/net/files.ts) and the embedded DNS's forwarding both start from here.
 */

/** dockerd's defaults when the host names no usable nameserver (resolvconf.defaultIPv4Dns). */
export const FALLBACK_NAMESERVERS = ['8.8.8.8', '8.8.4.4'];

export interface ResolvConf {
  nameservers: string[];
  /** The last `search` or `domain` line's domains. */
  search: string[];
  /** Every `options` line's options, in order. */
  options: string[];
  /** Lines of other kinds (`sortlist` …), kept as they are. */
  other: string[];
}

export function parseResolvConf(text: string): ResolvConf {
  const out: ResolvConf = { nameservers: [], search: [], options: [], other: [] };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const [key, ...rest] = line.split(/\s+/);
    if (key === 'nameserver') {
      if (rest[0]) out.nameservers.push(rest[0]);
    } else if (key === 'search' || key === 'domain') out.search = rest;
    else if (key === 'options') out.options.push(...rest);
    else out.other.push(line);
  }
  return out;
}

export function isLoopbackAddress(ip: string): boolean {
  const bare = ip.replace(/%.*$/, '');
  if (isIP(bare) === 4) return bare.startsWith('127.');
  return bare === '::1' || bare === '0:0:0:0:0:0:0:1';
}

/** The nameservers a container's own network can use: loopback ones dropped, dockerd's defaults when none is left. */
export function usableNameservers(nameservers: string[]): string[] {
  const kept = nameservers.filter((ns) => !isLoopbackAddress(ns));
  return kept.length ? kept : [...FALLBACK_NAMESERVERS];
}

const etcResolvConf = new StatCachedFile('/etc/resolv.conf');
const resolvedResolvConf = new StatCachedFile('/run/systemd/resolve/resolv.conf');

/**
 * The host's resolv.conf, as dockerd picks it (resolvconf.Path): when it names only
 * systemd-resolved's stub (127.0.0.53), which a container's own network cannot reach,
 * systemd-resolved's list of the real servers instead. Read at every container start: each file
 * is looked at with one `stat` at once and read again only when it changed (StatCachedFile).
 */
export async function readHostResolvConf(hostNetwork = false): Promise<string> {
  const etc = etcResolvConf.current() ?? '';
  if (hostNetwork || !onlyResolvedStub(etc)) return etc;
  return resolvedResolvConf.current() ?? etc;
}

export function onlyResolvedStub(resolvConf: string): boolean {
  const servers = parseResolvConf(resolvConf).nameservers;
  return servers.length > 0 && servers.every((ns) => ns === '127.0.0.53');
}

/** The servers the embedded DNS forwards to by default: the host's usable nameservers. */
export async function hostUpstreams(): Promise<string[]> {
  return usableNameservers(parseResolvConf(await readHostResolvConf()).nameservers);
}
