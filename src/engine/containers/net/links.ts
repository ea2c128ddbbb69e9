import { posix } from 'node:path';
import { invalidParameter } from '../../../common/errors.js';

/**
 * Legacy container links (`--link name:alias`) on the default bridge, as dockerd 20.10 makes them:
 * the link string grammar, link names (`/parent/alias`), the environment a link gives
 * (moby's daemon/links) and the /etc/hosts entries. Pure.
 */

/** dockerd's opts.ParseLink: `name:alias`; a bare name is its own alias; `/name:/parent/alias`. */
export function parseLink(value: string): { name: string; alias: string } {
  if (value === '') throw invalidParameter('empty string specified for links');
  const parts = value.split(':');
  if (parts.length > 2) throw invalidParameter(`bad format for links: ${value}`);
  if (parts.length === 1) return { name: value, alias: value };
  const [name = '', alias = ''] = parts;
  // the form inspect shows (`/target:/parent/alias`) is accepted back
  if (name.startsWith('/')) return { name: name.slice(1), alias: posix.basename(alias) };
  return { name, alias };
}

/** The name a link is known by: `/parent/alias` (path.Join: an empty alias is the parent's name). */
export function linkName(parentName: string, alias: string): string {
  return posix.join(parentName, alias);
}

interface Port {
  port: number;
  text: string;
  proto: string;
}

function parsePort(key: string): Port {
  const [text = '', proto = 'tcp'] = key.split('/');
  const n = Number.parseInt(text, 10);
  return { port: Number.isNaN(n) ? 0 : n, text, proto: proto || 'tcp' };
}

/** moby's port order for links: by number, tcp first at equal numbers. */
function sortPorts(ports: Port[]): Port[] {
  return [...ports].sort((a, b) => {
    if (a.port !== b.port) return a.port - b.port;
    const at = a.proto.toLowerCase() === 'tcp';
    const bt = b.proto.toLowerCase() === 'tcp';
    if (at !== bt) return at ? -1 : 1;
    return a.proto < b.proto ? -1 : a.proto > b.proto ? 1 : 0;
  });
}

/** The index of the last port of the run starting at `index` whose numbers follow each other. */
function nextContiguous(ports: Port[], value: number, index: number): number {
  if (index + 1 === ports.length) return index;
  let v = value;
  for (let i = index + 1; i < ports.length; i++) {
    if ((ports[i]?.port ?? 0) > v + 1) return i - 1;
    v++;
  }
  return ports.length - 1;
}

/**
 * The environment a link gives the parent (moby's Link.ToEnv): `ALIAS_NAME=/parent/alias`,
 * `ALIAS_PORT...` for the target's exposed ports (runs of consecutive ports also as
 * `_START`/`_END`), and `ALIAS_ENV_X` for the target's Config.Env (HOME and PATH left out).
 */
export function linkEnv(link: {
  /** `/parent/alias` */
  name: string;
  childIp: string;
  childEnv: readonly string[];
  exposedPorts: readonly string[];
}): string[] {
  const alias = posix.basename(link.name).toUpperCase().replaceAll('-', '_');
  const ip = link.childIp;
  const ports = sortPorts(link.exposedPorts.map(parsePort));
  const env: string[] = [];
  const first = ports[0];
  if (first) env.push(`${alias}_PORT=${first.proto}://${ip}:${first.text}`);
  for (let i = 0; i < ports.length; ) {
    const p = ports[i] as Port;
    const j = nextContiguous(ports, p.port, i);
    if (j > i + 1) {
      const q = ports[j] as Port;
      const P = p.proto.toUpperCase();
      const key = `${alias}_PORT_${p.text}_${P}`;
      env.push(`${key}_START=${p.proto}://${ip}:${p.text}`);
      env.push(`${key}_ADDR=${ip}`);
      env.push(`${key}_PROTO=${p.proto}`);
      env.push(`${key}_PORT_START=${p.text}`);
      const endKey = `${alias}_PORT_${p.text}_${q.proto.toUpperCase()}`;
      env.push(`${endKey}_END=${q.proto}://${ip}:${q.text}`);
      env.push(`${endKey}_PORT_END=${q.text}`);
      i = j + 1;
      continue;
    }
    i++;
  }
  for (const p of ports) {
    const key = `${alias}_PORT_${p.text}_${p.proto.toUpperCase()}`;
    env.push(`${key}=${p.proto}://${ip}:${p.text}`);
    env.push(`${key}_ADDR=${ip}`);
    env.push(`${key}_PORT=${p.text}`);
    env.push(`${key}_PROTO=${p.proto}`);
  }
  env.push(`${alias}_NAME=${link.name}`);
  for (const e of link.childEnv) {
    const eq = e.indexOf('=');
    if (eq < 0) continue;
    const key = e.slice(0, eq);
    if (key === 'HOME' || key === 'PATH') continue;
    env.push(`${alias}_ENV_${key}=${e.slice(eq + 1)}`);
  }
  return env;
}

/**
 * Link variables merged with the container's own Config.Env as dockerd orders them: link
 * variables (an own variable of the same name replaces one in place; a bare `NAME` drops it),
 * then the own variables that remain. The spec builder then puts PATH, HOSTNAME and TERM first.
 */
export function mergeLinkEnv(links: readonly string[], own: readonly string[]): string[] {
  const out: (string | null)[] = [...links];
  const index = new Map<string, number>();
  out.forEach((e, i) => {
    const eq = (e as string).indexOf('=');
    index.set(eq < 0 ? (e as string) : (e as string).slice(0, eq), i);
  });
  const rest: string[] = [];
  for (const e of own) {
    const eq = e.indexOf('=');
    const i = index.get(eq < 0 ? e : e.slice(0, eq));
    if (i === undefined) rest.push(e);
    else out[i] = eq < 0 ? null : e;
  }
  return [...out.filter((e): e is string => e !== null), ...rest];
}

/**
 * The /etc/hosts names of a linked container: the alias, its hostname, and its name when that
 * differs from the alias (`172.17.0.2\tdb 0123456789ab postgres`).
 */
export function linkHostNames(alias: string, childHostname: string, childName: string): string {
  const bare = childName.replace(/^\//, '');
  const names = `${alias} ${childHostname}`;
  return alias === bare ? names : `${names} ${bare}`;
}
