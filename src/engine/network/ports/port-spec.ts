import { isIP } from 'node:net';
import { invalidParameter } from '../../../common/errors.js';

/**
 * Port publishing as plain data: what a container asks for (HostConfig.PortBindings,
 * PublishAllPorts, its exposed ports) turned into one request per host address, and what was
 * bound shaped as dockerd shows it (NetworkSettings.Ports, the list's Ports). Pure.
 */

export type PortProto = 'tcp' | 'udp' | 'sctp';

/** One host address and port range to bind for one container port. */
export interface PortRequest {
  containerPort: number;
  proto: PortProto;
  /** `0.0.0.0`, `::` or a host address; the IPv6 twin of an unspecified binding is `::`. */
  hostIp: string;
  /** The host ports it may take; 0..0 for an ephemeral port from the kernel's range. */
  hostPortStart: number;
  hostPortEnd: number;
  /**
   * The `::` twin of a binding given without HostIp: it takes the port its IPv4 sibling got, and
   * a host without IPv6 skips it (dockerd 20.10 publishes both families).
   */
  twinOf?: number;
}

/** A host port bound for a container port (persisted in the container's record). */
export interface PublishedPort {
  containerPort: number;
  proto: PortProto;
  hostIp: string;
  hostPort: number;
}

interface Binding {
  HostIp?: string;
  HostPort?: string;
}

function parseKey(key: string): { start: number; end: number; proto: string } {
  const m = /^(\d+)(?:-(\d+))?(?:\/(\w+))?$/.exec(key);
  const start = Number(m?.[1]);
  const end = m?.[2] === undefined ? start : Number(m[2]);
  if (!m || !(start >= 0 && end >= start && end <= 65535)) {
    throw invalidParameter(`invalid port specification: "${key}"`);
  }
  return { start, end, proto: (m[3] ?? 'tcp').toLowerCase() };
}

/** `''` → ephemeral (0..0); `8080`; `8000-8010`. */
export function parseHostPort(text: string | undefined): { start: number; end: number } {
  if (!text) return { start: 0, end: 0 };
  const m = /^(\d+)(?:-(\d+))?$/.exec(text);
  const start = Number(m?.[1]);
  const end = m?.[2] === undefined ? start : Number(m[2]);
  if (!m || !(start >= 0 && end >= start && end <= 65535)) {
    throw invalidParameter(`invalid port specification: "${text}"`);
  }
  return { start, end };
}

/**
 * The requests of a container, in dockerd's order (by container port, protocol, then binding):
 * every port of PortBindings with its bindings, and with PublishAllPorts every exposed port
 * without a binding gets an ephemeral one. A binding without HostIp publishes on `0.0.0.0` and
 * on `::` (the same port). Other protocols than tcp, udp and sctp are left out.
 */
export function portRequests(
  exposed: readonly string[],
  bindings: Record<string, readonly (Binding | null)[] | null> | null | undefined,
  publishAll: boolean,
): PortRequest[] {
  const keys = new Set<string>([...Object.keys(bindings ?? {}), ...(publishAll ? exposed : [])]);
  const sorted = [...keys]
    .map((k) => ({ k, p: parseKey(k) }))
    .sort((a, b) => a.p.start - b.p.start || (a.p.proto < b.p.proto ? -1 : a.p.proto > b.p.proto ? 1 : 0));
  const out: PortRequest[] = [];
  for (const { k, p } of sorted) {
    if (p.proto !== 'tcp' && p.proto !== 'udp' && p.proto !== 'sctp') continue;
    const proto = p.proto;
    let list = (bindings?.[k] ?? []).filter((b): b is Binding => !!b);
    if (!list.length) list = publishAll ? [{}] : [];
    for (let port = p.start; port <= p.end; port++) {
      for (const b of list) {
        const host = parseHostPort(b.HostPort);
        // a container range with a host range maps port to port (8000-8010:80-90)
        const offset = port - p.start;
        const ranged = p.end > p.start && host.start > 0 && host.end - host.start === p.end - p.start;
        const start = ranged ? host.start + offset : host.start;
        const end = ranged ? host.start + offset : host.end;
        const ip = (b.HostIp ?? '').replace(/^\[(.*)\]$/, '$1');
        if (ip && isIP(ip) === 0) throw invalidParameter(`invalid IP address: ${b.HostIp}`);
        if (ip) {
          out.push({ containerPort: port, proto, hostIp: ip, hostPortStart: start, hostPortEnd: end });
          continue;
        }
        out.push({ containerPort: port, proto, hostIp: '0.0.0.0', hostPortStart: start, hostPortEnd: end });
        out.push({
          containerPort: port,
          proto,
          hostIp: '::',
          hostPortStart: start,
          hostPortEnd: end,
          twinOf: out.length - 1,
        });
      }
    }
  }
  return out;
}

/** A port key as dockerd writes it: `80/tcp`. */
export function portKey(port: number, proto: string): string {
  return `${port}/${proto}`;
}

/**
 * NetworkSettings.Ports of a running container: every exposed or bound port, with the host
 * bindings it got (null when none), as dockerd shows them.
 */
export function portsMap(
  exposed: readonly string[],
  bound: readonly string[],
  published: readonly PublishedPort[],
): Record<string, Array<{ HostIp: string; HostPort: string }> | null> {
  const out: Record<string, Array<{ HostIp: string; HostPort: string }> | null> = {};
  for (const k of [...exposed, ...bound]) {
    const p = /^(\d+)(?:\/(\w+))?$/.exec(k);
    out[p ? portKey(Number(p[1]), (p[2] ?? 'tcp').toLowerCase()) : k] = null;
  }
  for (const p of published) {
    const key = portKey(p.containerPort, p.proto);
    const list = out[key] ?? [];
    list.push({ HostIp: p.hostIp, HostPort: String(p.hostPort) });
    out[key] = list;
  }
  return out;
}
