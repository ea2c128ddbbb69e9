import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { invalidParameter, notFound } from '../../common/errors.js';
import { type RegistryTls, readCertsDirs } from './certs.js';

/** The domain of Docker Hub names (`busybox`, `library/busybox`, `docker.io/library/busybox`). */
export const HUB_DOMAIN = 'docker.io';

/** One place a repository can be fetched from. */
export interface Endpoint {
  /** `https://127.0.0.1:5000` (no trailing slash; a mirror may add a path prefix). */
  base: string;
  /** `host:port` as certs.d folders and X-Registry-Auth's serveraddress name it. */
  host: string;
  /** A registry mirror for docker.io names (not the repository's own registry). */
  mirror: boolean;
  /** Plain HTTP, or TLS without verifying the server (an insecure registry tried over https). */
  insecure: boolean;
  tls: RegistryTls;
}

export interface EndpointOptions {
  /** `--insecure-registry`: `host:port`, `host` or CIDRs; loopback is always insecure. */
  insecureRegistries: string[];
  /** `--registry-mirror`: URLs asked for docker.io names, in order. */
  mirrors: string[];
  /** certs.d directories (DEFAULT_CERTS_DIRS). */
  certsDirs: string[];
}

/** The message when a docker.io name is asked for and no mirror is configured. */
export function noMirrorMessage(name: string): string {
  return `pull access for ${name} is not available: no registry mirror is configured for docker.io (there is no Docker Hub here); start the engine with --registry-mirror or use a registry's host:port in the name`;
}

/** Decides, for a registry domain, the endpoints to try (https before http for insecure ones). */
export class EndpointResolver {
  private readonly cidrs = new BlockList();
  private readonly names = new Set<string>();

  constructor(private readonly opts: EndpointOptions) {
    this.cidrs.addSubnet('127.0.0.0', 8, 'ipv4');
    this.cidrs.addAddress('::1', 'ipv6');
    for (const entry of opts.insecureRegistries) {
      const m = /^([^/]+)\/(\d+)$/.exec(entry);
      if (m && isIP(m[1] as string)) {
        const family = isIP(m[1] as string) === 6 ? 'ipv6' : 'ipv4';
        this.cidrs.addSubnet(m[1] as string, Number(m[2]), family);
      } else {
        this.names.add(
          entry
            .replace(/^[a-z]+:\/\//, '')
            .replace(/\/+$/, '')
            .toLowerCase(),
        );
      }
    }
  }

  /** Whether `host` (host[:port]) is reached without verified TLS (dockerd's isSecureIndex, negated). */
  async isInsecure(host: string): Promise<boolean> {
    const h = host.toLowerCase();
    if (this.names.has(h)) return true;
    const hostname = splitHost(h).hostname;
    if (this.names.has(hostname)) return true;
    if (hostname === 'localhost') return true;
    const ips: string[] = [];
    if (isIP(hostname)) ips.push(hostname);
    else {
      try {
        for (const a of await lookup(hostname, { all: true })) ips.push(a.address);
      } catch {
        return false;
      }
    }
    return ips.some((ip) => this.cidrs.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4'));
  }

  /**
   * The endpoints for a domain, in the order to try: mirrors for docker.io (NotFound naming the
   * missing configuration when there are none), else the registry itself, https first; an
   * insecure registry is tried over https without verification, then over plain http.
   */
  async endpoints(domain: string, familiar: string): Promise<Endpoint[]> {
    if (domain === HUB_DOMAIN) {
      if (!this.opts.mirrors.length) throw notFound(noMirrorMessage(familiar));
      const out: Endpoint[] = [];
      for (const m of this.opts.mirrors) {
        let url: URL;
        try {
          url = new URL(m);
        } catch {
          throw invalidParameter(`invalid registry mirror ${JSON.stringify(m)}`);
        }
        const base = `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}`;
        const insecure = url.protocol === 'http:' || (await this.isInsecure(url.host));
        out.push({
          base,
          host: url.host,
          mirror: true,
          insecure,
          tls: await readCertsDirs(this.opts.certsDirs, url.host),
        });
      }
      return out;
    }
    const tls = await readCertsDirs(this.opts.certsDirs, domain);
    const insecure = await this.isInsecure(domain);
    const out: Endpoint[] = [{ base: `https://${domain}`, host: domain, mirror: false, insecure, tls }];
    if (insecure) out.push({ base: `http://${domain}`, host: domain, mirror: false, insecure, tls });
    return out;
  }
}

export function splitHost(host: string): { hostname: string; port?: string } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(host);
  if (v6) return { hostname: v6[1] as string, port: v6[2] };
  const i = host.lastIndexOf(':');
  if (i > 0 && /^\d+$/.test(host.slice(i + 1)))
    return { hostname: host.slice(0, i), port: host.slice(i + 1) };
  return { hostname: host };
}
