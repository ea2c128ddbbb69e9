import { readdir } from 'node:fs/promises';
import { systemError } from '../../../common/errors.js';
import { runTool } from '../../../common/host/run-tool.js';
import { randomMac } from '../adapters/iproute.ops.js';
import { formatNetwork, parseCidr } from '../ipv4.js';

/**
 * The host calls of the overlay data plane, through iproute2 (`ip -j`, `bridge`) and nsenter,
 * never /sys: named network namespaces (`ip netns`), a bridge and a VXLAN device in each, veths
 * into task containers (entered by path: `nsenter --net=/proc/<pid>/ns/net`), the
 * node's docker_gwbridge and its NAT rule. Unit tests substitute a fake.
 */
export interface OverlayOps {
  /** Names of the network namespaces in /run/netns starting with `prefix`. */
  listNamespaces(prefix: string): Promise<string[]>;
  /** The namespace `ns` with `br0` (the gateway address) and `vxlan<vni>` in it, made if missing. */
  ensureNetwork(
    ns: string,
    o: { vni: number; port: number; local: string; gateway: string; prefixLen: number; mtu: number },
  ): Promise<void>;
  /** The namespace goes, and with it its bridge, VXLAN device and veth ends. */
  deleteNamespace(ns: string): Promise<void>;
  /** The VXLAN device's static neighbour and FDB entries become exactly `peers`. */
  setPeers(ns: string, vni: number, peers: Array<{ ip: string; mac: string; node: string }>): Promise<void>;
  /** A veth from the namespace's bridge into the network namespace at `netns` (a path) as `ifname`. */
  plugContainer(
    ns: string,
    netns: string,
    o: { ifname: string; address: string; mac: string; mtu: number },
  ): Promise<void>;
  /** The node's gateway bridge with its address and the NAT of its block (made if missing). */
  ensureGwBridge(name: string, o: { gateway: string; prefixLen: number; subnet: string }): Promise<void>;
  /** The gateway bridge and its NAT rule go (its veths with it). */
  deleteGwBridge(name: string, subnet: string): Promise<void>;
  /**
   * A veth from the gateway bridge into the namespace at `netns`, with the default route unless
   * `defaultRoute` is false (a container that keeps its own default network).
   */
  plugGateway(
    bridge: string,
    netns: string,
    o: { ifname: string; address: string; gateway: string; defaultRoute?: boolean },
  ): Promise<void>;
  /**
   * The bridge forgets what it learnt of `mac` on the VXLAN port (an address that was on another
   * node is now a local container's: frames to it must not go on following the old entry).
   */
  forgetMac(ns: string, vni: number, mac: string): Promise<void>;
  /** The interface `ifname` in the namespace at `netns` goes, with its veth peer (gone already: fine). */
  unplugContainer(netns: string, ifname: string): Promise<void>;
  /** Whether a link of that name exists in the engine's namespace. */
  hasLink(name: string): Promise<boolean>;
  /** The IPv4 block of a bridge's address (`172.18.0.0/16`), if it has one. */
  bridgeBlock(name: string): Promise<string | undefined>;
}

async function run(cmd: string, args: string[], what: string, ok?: RegExp): Promise<string> {
  const r = await runTool(cmd, args, { stdout: true });
  if (r.code !== 0 && !ok?.test(r.stderr))
    throw systemError(`${what}: ${cmd} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const ip = (args: string[], what: string, ok?: RegExp) => run('ip', args, what, ok);
const EXISTS = /File exists|already exists/i;
const GONE = /Cannot find device|does not exist|No such file|not found/i;

/** A random suffix for a veth's names (at most 15 characters with its prefix). */
function vethSuffix(): string {
  return Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(8, '0');
}

interface NeighJson {
  dst?: string;
  lladdr?: string;
}
interface FdbJson {
  mac?: string;
  dst?: string;
  flags?: string[];
}

export class HostOverlayOps implements OverlayOps {
  async listNamespaces(prefix: string): Promise<string[]> {
    const names = await readdir('/run/netns').catch(() => [] as string[]);
    return names.filter((n) => n.startsWith(prefix));
  }

  async ensureNetwork(
    ns: string,
    o: { vni: number; port: number; local: string; gateway: string; prefixLen: number; mtu: number },
  ): Promise<void> {
    const existing = await this.listNamespaces(ns);
    if (!existing.includes(ns)) await ip(['netns', 'add', ns], 'cannot make the overlay namespace');
    await ip(['-n', ns, 'link', 'set', 'lo', 'up'], 'overlay namespace');
    const links = JSON.parse(
      (await ip(['-n', ns, '-j', 'link', 'show'], 'overlay namespace')) || '[]',
    ) as Array<{ ifname: string }>;
    if (!links.some((l) => l.ifname === 'br0')) {
      await ip(
        ['-n', ns, 'link', 'add', 'br0', 'mtu', String(o.mtu), 'address', randomMac(), 'type', 'bridge'],
        'overlay bridge',
        EXISTS,
      );
      await ip(
        ['-n', ns, 'addr', 'add', `${o.gateway}/${o.prefixLen}`, 'dev', 'br0'],
        'overlay bridge',
        EXISTS,
      );
      await ip(['-n', ns, 'link', 'set', 'br0', 'up'], 'overlay bridge');
    }
    const vx = `vxlan${o.vni}`;
    if (!links.some((l) => l.ifname === vx)) {
      // made in the engine's namespace (its UDP socket stays there, on the data-path address),
      // then moved into the network's: the overlay block never enters the host's routing table
      const tmp = `vx${vethSuffix()}`;
      await ip(
        [
          'link',
          'add',
          tmp,
          'type',
          'vxlan',
          'id',
          String(o.vni),
          'dstport',
          String(o.port),
          'local',
          o.local,
          'nolearning',
          'proxy',
        ],
        'cannot make the VXLAN device',
      );
      try {
        await ip(['link', 'set', tmp, 'netns', ns], 'VXLAN device');
      } catch (err) {
        await ip(['link', 'del', tmp], 'VXLAN device', GONE).catch(() => undefined);
        throw err;
      }
      await ip(['-n', ns, 'link', 'set', tmp, 'name', vx], 'VXLAN device');
      await ip(['-n', ns, 'link', 'set', vx, 'mtu', String(o.mtu), 'master', 'br0', 'up'], 'VXLAN device');
    }
  }

  async deleteNamespace(ns: string): Promise<void> {
    await ip(['netns', 'del', ns], 'cannot remove the overlay namespace', GONE);
  }

  async setPeers(
    ns: string,
    vni: number,
    peers: Array<{ ip: string; mac: string; node: string }>,
  ): Promise<void> {
    const dev = `vxlan${vni}`;
    const neigh = JSON.parse(
      (await ip(['-n', ns, '-j', 'neigh', 'show', 'dev', dev], 'neighbours')) || '[]',
    ) as NeighJson[];
    const fdb = JSON.parse(
      (await run('bridge', ['-n', ns, '-j', 'fdb', 'show', 'dev', dev], 'FDB')) || '[]',
    ) as FdbJson[];
    const want = new Map(peers.map((p) => [p.ip, p]));
    for (const n of neigh) {
      const p = n.dst ? want.get(n.dst) : undefined;
      if (n.dst && (!p || p.mac !== n.lladdr))
        await ip(['-n', ns, 'neigh', 'del', n.dst, 'dev', dev], 'neighbour', GONE);
    }
    const macs = new Map(peers.map((p) => [p.mac, p.node]));
    for (const f of fdb) {
      if (!f.mac || !f.dst) continue;
      if (macs.get(f.mac) !== f.dst)
        await run('bridge', ['-n', ns, 'fdb', 'del', f.mac, 'dev', dev, 'dst', f.dst, 'self'], 'FDB', GONE);
    }
    // only what is missing or different: a picture changes with every task, most peers stay
    const haveNeigh = new Set(neigh.map((n) => `${n.dst}/${n.lladdr}`));
    const haveFdb = new Set(fdb.map((f) => `${f.mac}/${f.dst}`));
    for (const p of peers) {
      if (!haveNeigh.has(`${p.ip}/${p.mac}`)) {
        await ip(
          ['-n', ns, 'neigh', 'replace', p.ip, 'lladdr', p.mac, 'dev', dev, 'nud', 'permanent'],
          'neighbour',
        );
      }
      if (!haveFdb.has(`${p.mac}/${p.node}`)) {
        await run(
          'bridge',
          ['-n', ns, 'fdb', 'replace', p.mac, 'dev', dev, 'dst', p.node, 'self', 'permanent'],
          'FDB',
        );
      }
    }
  }

  async plugContainer(
    ns: string,
    netns: string,
    o: { ifname: string; address: string; mac: string; mtu: number },
  ): Promise<void> {
    const s = vethSuffix();
    const host = `ov${s}`;
    const inner = `ct${s}`;
    // made inside the container's namespace, its peer straight into the network's
    await this.inNamespace(netns, [
      'link',
      'add',
      inner,
      'mtu',
      String(o.mtu),
      'type',
      'veth',
      'peer',
      'name',
      host,
      'mtu',
      String(o.mtu),
      'netns',
      ns,
    ]);
    try {
      await ip(['-n', ns, 'link', 'set', host, 'master', 'br0', 'up'], 'veth');
      await this.inNamespace(netns, ['link', 'set', inner, 'name', o.ifname, 'address', o.mac]);
      await this.inNamespace(netns, ['addr', 'add', o.address, 'dev', o.ifname]);
      await this.inNamespace(netns, ['link', 'set', o.ifname, 'up']);
    } catch (err) {
      await ip(['-n', ns, 'link', 'del', host], 'veth', GONE).catch(() => undefined);
      throw err;
    }
  }

  async ensureGwBridge(
    name: string,
    o: { gateway: string; prefixLen: number; subnet: string },
  ): Promise<void> {
    if (!(await this.hasLink(name))) {
      // a MAC of its own: one taken from a task's port would change when that task goes (randomMac)
      await ip(['link', 'add', name, 'address', randomMac(), 'type', 'bridge'], 'gateway bridge', EXISTS);
      await ip(['addr', 'add', `${o.gateway}/${o.prefixLen}`, 'dev', name], 'gateway bridge', EXISTS);
      await ip(['link', 'set', name, 'up'], 'gateway bridge');
    }
    const rule = ['POSTROUTING', '-s', o.subnet, '!', '-o', name, '-j', 'MASQUERADE'];
    const check = await runTool('iptables', ['-w', '-t', 'nat', '-C', ...rule]);
    if (check.code !== 0) await run('iptables', ['-w', '-t', 'nat', '-A', ...rule], 'gateway bridge NAT');
  }

  async deleteGwBridge(name: string, subnet: string): Promise<void> {
    await ip(['link', 'del', name], 'gateway bridge', GONE);
    if (!subnet) return;
    for (let i = 0; i < 4; i++) {
      const r = await runTool('iptables', [
        '-w',
        '-t',
        'nat',
        '-D',
        'POSTROUTING',
        '-s',
        subnet,
        '!',
        '-o',
        name,
        '-j',
        'MASQUERADE',
      ]);
      if (r.code !== 0) break;
    }
  }

  async plugGateway(
    bridge: string,
    netns: string,
    o: { ifname: string; address: string; gateway: string; defaultRoute?: boolean },
  ): Promise<void> {
    const s = vethSuffix();
    const host = `gw${s}`;
    const inner = `cg${s}`;
    // the peer into the engine's own namespace (by its process)
    await this.inNamespace(netns, [
      'link',
      'add',
      inner,
      'type',
      'veth',
      'peer',
      'name',
      host,
      'netns',
      String(process.pid),
    ]);
    try {
      await ip(['link', 'set', host, 'master', bridge, 'up'], 'veth');
      await this.inNamespace(netns, ['link', 'set', inner, 'name', o.ifname]);
      await this.inNamespace(netns, ['addr', 'add', o.address, 'dev', o.ifname]);
      await this.inNamespace(netns, ['link', 'set', o.ifname, 'up']);
      if (o.defaultRoute !== false) {
        await this.inNamespace(netns, ['route', 'replace', 'default', 'via', o.gateway, 'dev', o.ifname]);
      }
    } catch (err) {
      await ip(['link', 'del', host], 'veth', GONE).catch(() => undefined);
      throw err;
    }
  }

  async hasLink(name: string): Promise<boolean> {
    const r = await runTool('ip', ['link', 'show', name]);
    return r.code === 0;
  }

  async bridgeBlock(name: string): Promise<string | undefined> {
    const out = await ip(['-j', '-4', 'addr', 'show', 'dev', name], 'gateway bridge', GONE);
    const links = JSON.parse(out || '[]') as Array<{
      addr_info?: Array<{ local?: string; prefixlen?: number }>;
    }>;
    const a = links[0]?.addr_info?.[0];
    if (!a?.local || a.prefixlen === undefined) return undefined;
    const block = parseCidr(`${a.local}/${a.prefixlen}`);
    return block ? formatNetwork(block) : undefined;
  }

  async forgetMac(ns: string, vni: number, mac: string): Promise<void> {
    await run('bridge', ['-n', ns, 'fdb', 'del', mac, 'dev', `vxlan${vni}`, 'master'], 'FDB', GONE);
  }

  async unplugContainer(netns: string, ifname: string): Promise<void> {
    await run('nsenter', [`--net=${netns}`, 'ip', 'link', 'del', ifname], 'container interface', GONE);
  }

  private async inNamespace(netns: string, args: string[]): Promise<void> {
    await run('nsenter', [`--net=${netns}`, 'ip', ...args], 'container interface');
  }
}
