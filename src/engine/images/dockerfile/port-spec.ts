import { isIP } from 'node:net';
import { invalidParameter } from '../../../common/errors.js';

/** EXPOSE arguments as go-connections/nat parses them: ports, ranges, protocols, host parts. */
/** strconv.ParseUint(s, 10, 16). */
export function parsePortNumber(s: string): number | undefined {
  if (!/^[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return n <= 65535 ? n : undefined;
}

export function parsePortRange(ports: string): [number, number] | undefined {
  if (ports === '') return undefined;
  if (!ports.includes('-')) {
    const n = parsePortNumber(ports);
    return n === undefined ? undefined : [n, n];
  }
  const parts = ports.split('-');
  const start = parsePortNumber(parts[0] as string);
  const end = parsePortNumber(parts[1] as string);
  if (start === undefined || end === undefined || end < start) return undefined;
  return [start, end];
}

/** net.SplitHostPort's host, or its error text. */
export function splitHost(hostport: string): { host: string } | { error: string } {
  const fail = (why: string) => ({ error: `address ${hostport}: ${why}` });
  const i = hostport.lastIndexOf(':');
  if (i < 0) return fail('missing port in address');
  let host: string;
  let j = 0;
  let k = 0;
  if (hostport[0] === '[') {
    const end = hostport.indexOf(']');
    if (end < 0) return fail("missing ']' in address");
    if (end + 1 === hostport.length) return fail('missing port in address');
    if (end + 1 !== i) {
      return fail(hostport[end + 1] === ':' ? 'too many colons in address' : 'missing port in address');
    }
    host = hostport.slice(1, end);
    j = 1;
    k = end + 1;
  } else {
    host = hostport.slice(0, i);
    if (host.includes(':')) return fail('too many colons in address');
  }
  if (hostport.slice(j).includes('[')) return fail("unexpected '[' in address");
  if (hostport.slice(k).includes(']')) return fail("unexpected ']' in address");
  return { host };
}

/** nat.ParsePortSpec, the exposed ports only. */
export function parsePortSpec(raw: string): string[] {
  const parts = raw.split(':');
  const n = parts.length;
  let containerPort = parts[n - 1] as string;
  const hostPort = n >= 2 ? (parts[n - 2] as string) : '';
  const rawIP = n >= 3 ? parts.slice(0, n - 2).join(':') : '';
  let proto = '';
  const pp = containerPort.split('/');
  if (containerPort === '' || pp[0] === '') containerPort = '';
  else if (pp.length === 1) proto = 'tcp';
  else {
    proto = pp[1] === '' ? 'tcp' : (pp[1] as string);
    containerPort = pp[0] as string;
  }
  const split = splitHost(`${rawIP}:`);
  if ('error' in split) throw invalidParameter(`Invalid ip address ${rawIP}: ${split.error}`);
  const ip = split.host;
  if (ip !== '' && (ip.includes('%') || isIP(ip) === 0)) throw invalidParameter(`Invalid ip address: ${ip}`);
  if (containerPort === '') throw invalidParameter(`No port specified: ${raw}<empty>`);
  const range = parsePortRange(containerPort);
  if (!range) throw invalidParameter(`Invalid containerPort: ${containerPort}`);
  const [start, end] = range;
  if (hostPort !== '') {
    const hostRange = parsePortRange(hostPort);
    if (!hostRange) throw invalidParameter(`Invalid hostPort: ${hostPort}`);
    if (end - start !== hostRange[1] - hostRange[0] && end !== start) {
      throw invalidParameter(
        `Invalid ranges specified for container and host Ports: ${containerPort} and ${hostPort}`,
      );
    }
  }
  const lower = proto.toLowerCase();
  if (lower !== 'tcp' && lower !== 'udp' && lower !== 'sctp')
    throw invalidParameter(`Invalid proto: ${proto}`);
  const out: string[] = [];
  for (let p = start; p <= end; p++) out.push(`${p}/${lower}`);
  return out;
}
