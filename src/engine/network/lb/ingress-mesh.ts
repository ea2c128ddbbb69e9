import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { errorMessage, invalidParameter } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { HostNetnsOps, type NetnsOps } from '../adapters/netns.ops.js';
import { HostPortSockets, type PortHolder, type PortSocketOps } from '../adapters/port-sockets.js';
import {
  forwardAccepts,
  forwardUpdate,
  hostIngressScript,
  INGRESS_TABLE,
  type IngressLink,
  ingressLink,
  normalizePorts,
  SANDBOX_LINK,
  sandboxIngressScript,
} from './ingress-rules.js';
import type { IngressMesh, IngressPort } from './lb.types.js';
import { HostNftOps, type NftOps } from './nft.ops.js';
import { deleteTable } from './nft-script.js';
import { HostNsLinkOps, type NsLinkOps } from './ns-link.ops.js';

export interface IngressMeshOptions {
  /** Where the ingress sandbox's namespace is bound (`ingressSandboxPath(execRoot)`). */
  sandboxPath: string;
  /** The host's end of the link to the sandbox, and the host's nft table (default `berth-ingress`). */
  hostLink?: string;
  /** The link's block (default 169.254.239.240/30: link-local, never routed off the node). */
  linkSubnet?: string;
  /** The node's namespace (a bound netns path); the engine's own when undefined (tests use one). */
  hostNetns?: string;
  /**
   * Where a published port that cannot be held is told (another process has it: its DNAT still
   * takes the traffic, as dockerd only warns there).
   */
  log?: Pick<Logger, 'warn'>;
  /** Host calls (unit tests: fakes). */
  nft?: NftOps;
  /** Holds published ports in the engine's own namespace (not used with `hostNetns`). */
  sockets?: PortSocketOps;
  links?: NsLinkOps;
  netns?: NetnsOps;
}

export const DEFAULT_INGRESS_LINK_SUBNET = '169.254.239.240/30';
export const DEFAULT_INGRESS_LINK = 'berth-ingress';

/**
 * The link's /30 for a host link name: the default block for the default name; for another name
 * (engines sharing one network namespace, as tests run them) a block of 169.254.200.0–239.255
 * taken from the name's hash, so that two engines' links do not claim one block.
 */
export function ingressLinkSubnet(hostLink: string): string {
  if (hostLink === DEFAULT_INGRESS_LINK) return DEFAULT_INGRESS_LINK_SUBNET;
  const h = createHash('sha256').update(hostLink).digest();
  const n = h.readUInt32BE(0) % (40 * 64);
  return `169.254.${200 + Math.floor(n / 64)}.${(n % 64) * 4}/30`;
}

/**
 * Where an engine binds its ingress sandbox: `<exec-root>/lb/ingress_sbox`. Not under
 * `<exec-root>/netns`, whose files no container owns are swept at engine start (and no process
 * lives in the sandbox to keep it).
 */
export function ingressSandboxPath(execRoot: string): string {
  return join(execRoot, 'lb', 'ingress_sbox');
}

/**
 * A node's ingress routing mesh (ingress-rules.ts for the rules): the sandbox namespace with a
 * veth to the host (`hostLink` ↔ `host0`), its default route through the host, forwarding on in
 * it and route_localnet on the host's end (loopback reaches published ports). Everything is
 * found by name, so a restarted engine adopts a whole sandbox (ensureSandbox) or removes what a
 * crashed one left (remove). Each side's table is written only when it changes; calls run one
 * after the other.
 */
export class NftIngressMesh implements IngressMesh {
  private readonly sandboxPath: string;
  private readonly hostLink: string;
  private readonly hostNetns: string | undefined;
  private readonly link: IngressLink;
  private readonly nft: NftOps;
  private readonly links: NsLinkOps;
  private readonly netns: NetnsOps;
  private ready = false;
  /** The scripts last written on each side ('' unknown). */
  private hostScript = '';
  private sandboxScript = '';
  private queue: Promise<unknown> = Promise.resolve();
  private readonly sockets: PortSocketOps | undefined;
  private readonly log: Pick<Logger, 'warn'> | undefined;
  /** The published ports held, by `port/protocol`. */
  private readonly held = new Map<string, PortHolder>();

  constructor(opts: IngressMeshOptions) {
    this.sandboxPath = opts.sandboxPath;
    this.hostLink = opts.hostLink ?? INGRESS_TABLE;
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(this.hostLink))
      throw invalidParameter(`invalid ingress link name ${JSON.stringify(this.hostLink)}`);
    this.hostNetns = opts.hostNetns;
    this.link = ingressLink(opts.linkSubnet ?? DEFAULT_INGRESS_LINK_SUBNET);
    this.nft = opts.nft ?? new HostNftOps();
    this.links = opts.links ?? new HostNsLinkOps();
    this.netns = opts.netns ?? new HostNetnsOps();
    // a socket binds in the engine's namespace: ports of another namespace are not held
    this.sockets = opts.hostNetns === undefined ? (opts.sockets ?? new HostPortSockets()) : undefined;
    this.log = opts.log;
  }

  /** The host's table name (the same as its link's). */
  get table(): string {
    return this.hostLink;
  }

  ensureSandbox(): Promise<{ sandboxKey: string }> {
    return this.serial(async () => {
      await this.ensure();
      return { sandboxKey: this.sandboxPath };
    });
  }

  async apply(ports: IngressPort[]): Promise<void> {
    const wanted = normalizePorts(ports); // bad input fails before anything is queued
    return this.serial(async () => {
      const host = hostIngressScript(this.table, this.hostLink, this.link, wanted);
      const sandbox = sandboxIngressScript(wanted);
      if (wanted.length) await this.ensure();
      // the sandbox first: the host never sends a connection to a sandbox without its rules
      if (this.ready && sandbox !== this.sandboxScript) {
        this.sandboxScript = '';
        await this.nft.run(this.sandboxPath, sandbox);
        this.sandboxScript = sandbox;
      }
      if (host !== this.hostScript) {
        this.hostScript = '';
        await this.nft.run(this.hostNetns, host);
        this.hostScript = host;
      }
      await this.hold(wanted);
    });
  }

  /**
   * Hold each published port with a socket of the engine's (dockerd's ingress listeners), so
   * that a local `-p` of the same port, or another program, cannot take it; what reaches the
   * socket (nothing over IPv4: the DNAT takes it first) is relayed to the sandbox.
   */
  private async hold(ports: IngressPort[]): Promise<void> {
    const sockets = this.sockets;
    if (!sockets) return;
    const wanted = new Set(ports.map((p) => `${p.publishedPort}/${p.protocol}`));
    for (const [key, holder] of [...this.held]) {
      if (wanted.has(key)) continue;
      this.held.delete(key);
      await holder.close().catch(() => undefined);
    }
    for (const p of ports) {
      const key = `${p.publishedPort}/${p.protocol}`;
      if (this.held.has(key)) continue;
      try {
        const target = { ip: this.link.sandboxIp, port: p.publishedPort };
        this.held.set(key, await sockets.bind(p.protocol, '0.0.0.0', p.publishedPort, target));
      } catch (err) {
        this.log?.warn('cannot hold an ingress-published port (its rules still carry it)', {
          port: key,
          error: errorMessage(err),
        });
      }
    }
  }

  remove(): Promise<void> {
    return this.serial(async () => {
      this.ready = false;
      this.hostScript = '';
      this.sandboxScript = '';
      // every step is tried (what one leaves, the next remove() takes); the first failure is told
      const failures: unknown[] = [];
      for (const step of [
        () => this.hold([]),
        () => this.nft.run(this.hostNetns, deleteTable(this.table)),
        () => this.forward([]),
        () => this.links.deleteLink(this.hostNetns, this.hostLink),
        () => this.netns.remove(this.sandboxPath),
      ]) {
        await step().catch((err: unknown) => failures.push(err));
      }
      if (failures.length) throw failures[0];
    });
  }

  /** The sandbox as it should be: kept when whole (an engine restart), else made again. */
  private async ensure(): Promise<void> {
    if (this.ready) return;
    const whole =
      (await this.links.isNamespace(this.sandboxPath)) &&
      (await this.links.linkExists(this.hostNetns, this.hostLink)) &&
      (await this.links.linkExists(this.sandboxPath, SANDBOX_LINK));
    if (!whole) {
      await this.nft.run(this.hostNetns, deleteTable(this.table));
      await this.links.deleteLink(this.hostNetns, this.hostLink);
      await this.netns.remove(this.sandboxPath);
      await this.create();
    }
    await this.forward(forwardAccepts(this.hostLink));
    this.ready = true;
  }

  /** Make the link's FORWARD rules on the host `want` (none: removed). */
  private async forward(want: string[]): Promise<void> {
    const input = forwardUpdate(await this.links.forwardRules(this.hostNetns), this.hostLink, want);
    if (input) await this.links.restore(this.hostNetns, input);
  }

  private async create(): Promise<void> {
    const { hostIp, sandboxIp, prefixLen } = this.link;
    await this.netns.create(this.sandboxPath);
    try {
      await this.links.ipBatch(this.hostNetns, [
        `link add ${this.hostLink} type veth peer name ${SANDBOX_LINK} netns ${this.sandboxPath}`,
        `addr add ${hostIp}/${prefixLen} dev ${this.hostLink}`,
        `link set ${this.hostLink} up`,
      ]);
      await this.links.ipBatch(this.sandboxPath, [
        `addr add ${sandboxIp}/${prefixLen} dev ${SANDBOX_LINK}`,
        `link set ${SANDBOX_LINK} up`,
        `route add default via ${hostIp} dev ${SANDBOX_LINK}`,
      ]);
      await this.links.sysctl(this.hostNetns, `net/ipv4/conf/${this.hostLink}/route_localnet`, '1');
      await this.links.sysctl(this.sandboxPath, 'net/ipv4/ip_forward', '1');
      // the sandbox forwards nothing until apply() says what
      await this.nft.run(this.sandboxPath, sandboxIngressScript([]));
      this.sandboxScript = sandboxIngressScript([]);
    } catch (err) {
      await this.links.deleteLink(this.hostNetns, this.hostLink).catch(() => undefined);
      await this.netns.remove(this.sandboxPath).catch(() => undefined);
      throw err;
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }
}
