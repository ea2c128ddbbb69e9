import { invalidParameter } from '../../../common/errors.js';
import { formatIpv4, networkAddress, parseCidr } from '../ipv4.js';
import type { IngressPort } from './lb.types.js';
import { addressSet, type NftChain, replaceTable, roundRobin } from './nft-script.js';

/**
 * The ingress routing mesh's rules (dockerd's DOCKER-INGRESS chains and ingress_sbox, with
 * nftables in place of IPVS). Two tables, both named `ip berth-ingress` (the host's name can be
 * changed), each replaced whole by one `nft -f`:
 *
 * On the host (the node's namespace):
 *   chain ingress-raw   filter prerouting, priority raw: nothing from the sandbox link to
 *                       127.0.0.0/8 (route_localnet on that link must not open the host's
 *                       loopback services to it)
 *   chain ingress-pre   nat prerouting: a published port on any local address → the sandbox's
 *   chain ingress-out   nat output: the same for the host's own connections (127.0.0.1 included)
 *   chain ingress-post  nat postrouting: what leaves for the sandbox from 127.0.0.0/8 is
 *                       masqueraded to the link's address (a loopback source cannot travel)
 * In the ingress sandbox:
 *   chain ingress-dnat  nat prerouting: what comes from the host on a published port → the
 *                       next backend's address and target port, round robin
 *   chain ingress-snat  nat postrouting: those connections leave with the sandbox's address on
 *                       the ingress network (masquerade), so the replies come back through it
 *   chain ingress-fwd   filter forward: the sandbox forwards only those connections (and their
 *                       replies): it is no router from the ingress network into the host
 * And, in the host's iptables filter FORWARD (whose policy may be DROP: dockerd sets it, and an
 * nft accept cannot override another table's drop), two rules with the comment
 * `berth ingress <link>`: what goes to the sandbox, and its replies, are forwarded (dockerd's
 * DOCKER-INGRESS filter chain).
 * A published port with no backend is still sent to the sandbox, where nothing listens: refused
 * at once (TCP reset, ICMP port unreachable). Pure.
 */

export const INGRESS_TABLE = 'berth-ingress';
/** The sandbox's end of its link to the host. */
export const SANDBOX_LINK = 'host0';

/** The two ends of the host–sandbox link: `.1` the host's, `.2` the sandbox's. */
export interface IngressLink {
  hostIp: string;
  sandboxIp: string;
  prefixLen: number;
}

export function ingressLink(subnet: string): IngressLink {
  const c = parseCidr(subnet);
  if (!c || !subnet.includes('/') || c.prefixLen > 30)
    throw invalidParameter(
      `invalid ingress link subnet ${JSON.stringify(subnet)}: an IPv4 block of /30 or larger`,
    );
  const net = networkAddress(c);
  return { hostIp: formatIpv4(net + 1), sandboxIp: formatIpv4(net + 2), prefixLen: c.prefixLen };
}

function checkPort(n: unknown, what: string): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 65535)
    throw invalidParameter(`invalid ${what} ${JSON.stringify(n)}: a port is 1-65535`);
  return n;
}

/** The ports checked and in canonical order (by protocol, then published port; backends sorted). */
export function normalizePorts(ports: IngressPort[]): IngressPort[] {
  if (!Array.isArray(ports)) throw invalidParameter('invalid ingress ports: not a list');
  const seen = new Set<string>();
  const out = ports.map((p) => {
    if (p?.protocol !== 'tcp' && p?.protocol !== 'udp')
      throw invalidParameter(`invalid ingress protocol ${JSON.stringify(p?.protocol)}: tcp or udp`);
    const publishedPort = checkPort(p.publishedPort, 'published port');
    const key = `${publishedPort}/${p.protocol}`;
    if (seen.has(key)) throw invalidParameter(`ingress port ${key} is given twice`);
    seen.add(key);
    return {
      protocol: p.protocol,
      publishedPort,
      targetPort: checkPort(p.targetPort, 'target port'),
      backends: addressSet(p.backends, `backend of ingress port ${key}`),
    };
  });
  return out.sort((a, b) => a.protocol.localeCompare(b.protocol) || a.publishedPort - b.publishedPort);
}

function portSet(ports: IngressPort[], protocol: 'tcp' | 'udp'): string | undefined {
  const list = ports.filter((p) => p.protocol === protocol).map((p) => p.publishedPort);
  if (!list.length) return undefined;
  return list.length === 1 ? String(list[0]) : `{ ${list.join(', ')} }`;
}

/** The host's table for `ports` (normalized); deleted when there are none. */
export function hostIngressScript(
  table: string,
  hostLink: string,
  link: IngressLink,
  ports: IngressPort[],
): string {
  if (!ports.length) return replaceTable(table, []);
  const dnat = (['tcp', 'udp'] as const).flatMap((proto) => {
    const set = portSet(ports, proto);
    return set ? [`fib daddr type local ${proto} dport ${set} dnat to ${link.sandboxIp}`] : [];
  });
  return replaceTable(table, [
    {
      name: 'ingress-raw',
      hook: 'type filter hook prerouting priority -300; policy accept;',
      rules: [`iifname "${hostLink}" ip daddr 127.0.0.0/8 drop`],
    },
    { name: 'ingress-pre', hook: 'type nat hook prerouting priority -100; policy accept;', rules: dnat },
    { name: 'ingress-out', hook: 'type nat hook output priority -100; policy accept;', rules: dnat },
    {
      name: 'ingress-post',
      hook: 'type nat hook postrouting priority 100; policy accept;',
      rules: [`oifname "${hostLink}" ip saddr 127.0.0.0/8 masquerade`],
    },
  ]);
}

/** The sandbox's table for `ports` (normalized; with none, it forwards nothing). */
export function sandboxIngressScript(ports: IngressPort[]): string {
  const dnat = ports
    .filter((p) => p.backends.length)
    .map(
      (p) =>
        `iifname "${SANDBOX_LINK}" ${p.protocol} dport ${p.publishedPort} dnat to ${roundRobin(
          p.backends.map((b) =>
            p.backends.length === 1 ? `${b}:${p.targetPort}` : `${b} . ${p.targetPort}`,
          ),
        )}`,
    );
  const chains: NftChain[] = [];
  if (dnat.length)
    chains.push({
      name: 'ingress-dnat',
      hook: 'type nat hook prerouting priority -100; policy accept;',
      rules: dnat,
    });
  chains.push(
    {
      name: 'ingress-snat',
      hook: 'type nat hook postrouting priority 100; policy accept;',
      rules: [`oifname != "${SANDBOX_LINK}" ct status dnat masquerade`],
    },
    {
      name: 'ingress-fwd',
      hook: 'type filter hook forward priority 0; policy drop;',
      rules: ['ct state established,related accept', `iifname "${SANDBOX_LINK}" ct status dnat accept`],
    },
  );
  return replaceTable(INGRESS_TABLE, chains);
}

/** The comment of the host's FORWARD rules of the link. */
export function forwardComment(hostLink: string): string {
  return `berth ingress ${hostLink}`;
}

/** The host's FORWARD rules of the link (iptables -S form, without -A). */
export function forwardAccepts(hostLink: string): string[] {
  const c = `-m comment --comment "${forwardComment(hostLink)}"`;
  return [
    `FORWARD -o ${hostLink} ${c} -j ACCEPT`,
    `FORWARD -i ${hostLink} -m conntrack --ctstate RELATED,ESTABLISHED ${c} -j ACCEPT`,
  ];
}

/**
 * The iptables-restore input that makes the link's FORWARD rules `want` (inserted first, in
 * order) from `have` (iptables -S FORWARD): '' when they are there, in order (wherever they are:
 * nothing of berth's before them drops what they accept).
 */
export function forwardUpdate(have: string, hostLink: string, want: string[]): string {
  const lines = have.split('\n').filter((l) => l.startsWith('-A FORWARD '));
  const mine = lines.filter((l) => l.includes(`"${forwardComment(hostLink)}"`));
  if (mine.length === want.length && mine.every((l, i) => l === `-A ${want[i]}`)) return '';
  return [
    '*filter',
    ...mine.map((l) => `-D ${l.slice(3)}`),
    ...want.map((r, i) => `-I FORWARD ${i + 1}${r.slice('FORWARD'.length)}`),
    'COMMIT',
    '',
  ].join('\n');
}
