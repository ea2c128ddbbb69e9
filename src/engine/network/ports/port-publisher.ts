import { errnoCode, errorMessage, systemError } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { HostPortRuleOps, type PortRuleOps } from '../adapters/port-rules.ops.js';
import { HostPortSockets, type PortHolder, type PortSocketOps } from '../adapters/port-sockets.js';
import { PortAllocator } from './port-allocator.js';
import { hasBridgeRules, type PortRule, removalInput } from './port-rules.js';
import { BridgeRulesWriter } from './port-rules.writer.js';
import type { PortRequest, PublishedPort } from './port-spec.js';

/** Who publishes: a container's endpoint on a bridge. Plain data, whatever the network. */
export interface PublishTarget {
  /** The owner's key (the container ID): one set of published ports per owner. */
  owner: string;
  /** The endpoint's name and ID, for dockerd's error message (`on endpoint NAME (ID)`). */
  endpointName: string;
  endpointId: string;
  /** The Linux bridge the container is plugged into, and its block. */
  bridge: string;
  subnet: string;
  /** The container's IPv4 address on that bridge. */
  ip: string;
}

export interface PortPublisherOptions {
  log: Logger;
  rules?: PortRuleOps;
  sockets?: PortSocketOps;
  allocator?: PortAllocator;
}

/**
 * How long the rules of released ports may wait for the next change (a start following an exit
 * rewrites the chains once for both). The host port itself is free at once.
 */
const RELEASE_WRITE_DELAY_MS = 50;

/** Tries at another port of a range when the host has the one chosen (dockerd's 10). */
const BIND_ATTEMPTS = 10;

interface Owned {
  target: PublishTarget;
  published: PublishedPort[];
  holders: PortHolder[];
}

function publishError(t: PublishTarget, detail: string): Error {
  return systemError(
    `driver failed programming external connectivity on endpoint ${t.endpointName} (${t.endpointId}): ${detail}`,
  );
}

function family(ip: string): string {
  return ip.includes(':') ? '6' : '4';
}

function hostAddress(ip: string, port: number | string): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** dockerd's words for a port the host (not the engine) holds: docker-proxy's listen error. */
function bindError(proto: string, ip: string, port: number, err: unknown): string {
  const code = errnoCode(err);
  // a kernel without SCTP: docker-proxy's words
  if (code === 'EPROTONOSUPPORT') return 'Error starting userland proxy: protocol not supported';
  const why =
    code === 'EADDRINUSE'
      ? 'bind: address already in use'
      : code === 'EADDRNOTAVAIL'
        ? 'bind: cannot assign requested address'
        : code === 'EACCES'
          ? 'bind: permission denied'
          : errorMessage(err);
  return `Error starting userland proxy: listen ${proto}${family(ip)} ${hostAddress(ip, port)}: ${why}`;
}

/** No IPv6 on this host: the `::` twin of an unspecified binding is left out. */
function noIpv6(err: unknown): boolean {
  const code = errnoCode(err);
  return code === 'EAFNOSUPPORT' || code === 'EADDRNOTAVAIL' || code === 'EPROTONOSUPPORT';
}

/**
 * Port publishing for containers on bridges: host ports allocated (fixed, from a range, or
 * ephemeral from the kernel's range) and bound by the engine (reserved while published, relayed
 * for what NAT cannot carry), and the bridges' iptables rules written (port-rules.ts) in one
 * iptables-restore per batch of changes. A publish that fails at any step leaves nothing bound.
 */
export class PortPublisher {
  private readonly log: Logger;
  private readonly rules: PortRuleOps;
  private readonly sockets: PortSocketOps;
  readonly allocator: PortAllocator;
  private readonly owners = new Map<string, Owned>();
  private readonly writer: BridgeRulesWriter;

  constructor(o: PortPublisherOptions) {
    this.log = o.log.child('ports');
    this.rules = o.rules ?? new HostPortRuleOps();
    this.sockets = o.sockets ?? new HostPortSockets();
    this.allocator = o.allocator ?? new PortAllocator();
    this.writer = new BridgeRulesWriter(this.rules, (bridge) => this.rulesOf(bridge));
  }

  /** What `owner` has published (empty when nothing). */
  published(owner: string): PublishedPort[] {
    return [...(this.owners.get(owner)?.published ?? [])];
  }

  /**
   * Bind the requested ports and write the rules; resolves once the ports are reachable. On any
   * failure whatever was bound is let go and the error is dockerd's (`driver failed programming
   * external connectivity on endpoint ...`).
   */
  async publish(target: PublishTarget, requests: readonly PortRequest[]): Promise<PublishedPort[]> {
    await this.unpublish(target.owner);
    if (!requests.length) return [];
    const owned: Owned = { target, published: [], holders: [] };
    let written = false;
    try {
      for (let i = 0; i < requests.length; i++) {
        const r = requests[i] as PortRequest;
        if (r.twinOf !== undefined) continue;
        const twinIndex = requests.findIndex((x, j) => j > i && x.twinOf === i);
        const twin = twinIndex >= 0 ? requests[twinIndex] : undefined;
        // bindOne adds to owned (so that a failure lets go of everything bound before it)
        await this.bindOne(owned, r, twin);
      }
      this.owners.set(target.owner, owned);
      this.writer.subnet(target.bridge, target.subnet);
      written = true;
      await this.writer.sync(target.bridge);
      return [...owned.published];
    } catch (err) {
      this.owners.delete(target.owner);
      await this.letGo(owned);
      // a write that failed may have left some of its rules: they go again
      if (written) await this.writer.sync(target.bridge).catch(() => undefined);
      if (err instanceof Error && err.message.startsWith('driver failed programming')) throw err;
      throw publishError(target, errorMessage(err));
    }
  }

  /** Bind one request (and its `::` twin on the same port); retries another port of a range. */
  private async bindOne(
    owned: Owned,
    r: PortRequest,
    twin: PortRequest | undefined,
  ): Promise<{ main: PublishedPort; twin: PublishedPort | null }> {
    const t = owned.target;
    const fixed = r.hostPortStart !== 0 && r.hostPortStart === r.hostPortEnd;
    const tried = new Set<number>();
    for (let attempt = 0; ; attempt++) {
      let port: number | undefined;
      if (fixed) {
        port = r.hostPortStart;
        if (this.allocator.isTaken(r.proto, r.hostIp, port)) {
          throw publishError(t, `Bind for ${hostAddress(r.hostIp, port)} failed: port is already allocated`);
        }
      } else {
        port = this.allocator.next(r.proto, r.hostIp, r.hostPortStart, r.hostPortEnd, tried);
        if (port === undefined) {
          const what = r.hostPortStart ? `${r.hostPortStart}-${r.hostPortEnd}` : '0';
          throw publishError(t, `Bind for ${hostAddress(r.hostIp, what)} failed: port is already allocated`);
        }
      }
      tried.add(port);
      const target = { ip: t.ip, port: r.containerPort };
      let holder: PortHolder;
      try {
        holder = await this.sockets.bind(r.proto, r.hostIp, port, target);
      } catch (err) {
        if (!fixed && errnoCode(err) === 'EADDRINUSE' && attempt + 1 < BIND_ATTEMPTS) continue;
        throw publishError(t, bindError(r.proto, r.hostIp, port, err));
      }
      this.allocator.take(r.proto, r.hostIp, port);
      owned.holders.push(holder);
      const main: PublishedPort = {
        containerPort: r.containerPort,
        proto: r.proto,
        hostIp: r.hostIp,
        hostPort: port,
      };
      owned.published.push(main);
      if (!twin) return { main, twin: null };
      if (this.allocator.isTaken(twin.proto, twin.hostIp, port)) {
        if (!fixed && attempt + 1 < BIND_ATTEMPTS) {
          await this.dropLast(owned);
          continue;
        }
        throw publishError(t, `Bind for ${hostAddress(twin.hostIp, port)} failed: port is already allocated`);
      }
      try {
        const h6 = await this.sockets.bind(twin.proto, twin.hostIp, port, target);
        this.allocator.take(twin.proto, twin.hostIp, port);
        owned.holders.push(h6);
        const p6: PublishedPort = { ...main, hostIp: twin.hostIp };
        owned.published.push(p6);
        return { main, twin: p6 };
      } catch (err) {
        if (noIpv6(err)) return { main, twin: null };
        if (!fixed && errnoCode(err) === 'EADDRINUSE' && attempt + 1 < BIND_ATTEMPTS) {
          await this.dropLast(owned);
          continue;
        }
        throw publishError(t, bindError(twin.proto, twin.hostIp, port, err));
      }
    }
  }

  private async dropLast(owned: Owned): Promise<void> {
    const p = owned.published.pop();
    const h = owned.holders.pop();
    if (p) this.allocator.release(p.proto, p.hostIp, p.hostPort);
    await h?.close().catch(() => undefined);
  }

  private async letGo(owned: Owned): Promise<void> {
    for (const p of owned.published) this.allocator.release(p.proto, p.hostIp, p.hostPort);
    await Promise.all(owned.holders.map((h) => h.close().catch(() => undefined)));
    owned.holders = [];
  }

  /**
   * Let `owner`'s ports go: the sockets closed and the ports free at once, the rules removed
   * (the promise resolves when they are).
   */
  async unpublish(owner: string): Promise<void> {
    const owned = this.owners.get(owner);
    if (!owned) return;
    this.owners.delete(owner);
    // the ports are free at once (letGo's first step); the rules' write is asked for before the
    // sockets are closed, so that a start meanwhile makes one write of both
    const written = this.writer.sync(owned.target.bridge, RELEASE_WRITE_DELAY_MS);
    await this.letGo(owned);
    await written.catch((err) =>
      this.log.warn('cannot remove the rules of published ports (removed at the next engine start)', {
        bridge: owned.target.bridge,
        error: errorMessage(err),
      }),
    );
  }

  /**
   * Engine start: a running container keeps what it published. Its ports are taken and bound
   * again (a port the host took meanwhile is logged: its DNAT rules still carry the traffic);
   * the rules are written by reconcile().
   */
  async restore(target: PublishTarget, published: readonly PublishedPort[]): Promise<void> {
    if (!published.length) return;
    const owned: Owned = { target, published: [...published], holders: [] };
    this.owners.set(target.owner, owned);
    this.writer.subnet(target.bridge, target.subnet);
    for (const p of published) {
      this.allocator.take(p.proto, p.hostIp, p.hostPort);
      try {
        owned.holders.push(
          await this.sockets.bind(p.proto, p.hostIp, p.hostPort, { ip: target.ip, port: p.containerPort }),
        );
      } catch (err) {
        this.log.warn('cannot bind a published port again', {
          container: target.owner,
          port: hostAddress(p.hostIp, p.hostPort),
          error: errorMessage(err),
        });
      }
    }
  }

  /**
   * Engine start, after restore(): the bridges' rules are made what the running containers
   * published (what a crashed engine left for containers gone since is removed).
   */
  async reconcile(bridges: ReadonlyArray<{ bridge: string; subnet: string }>): Promise<void> {
    if (!bridges.length) return;
    const save = await this.rules.save();
    for (const b of bridges) {
      this.writer.subnet(b.bridge, b.subnet);
      if (hasBridgeRules(save, b.bridge)) this.writer.unknown(b.bridge);
    }
    await Promise.all(bridges.map((b) => this.writer.sync(b.bridge)));
  }

  /** A bridge goes away (network removed): its rules go (its containers' ports were let go). */
  async removeBridge(bridge: string): Promise<void> {
    for (const [owner, o] of this.owners) if (o.target.bridge === bridge) await this.unpublish(owner);
    this.writer.forget(bridge);
    await removeBridgePorts(bridge, this.rules);
  }

  /**
   * Engine shutdown: a release's delayed write is made, the sockets close (the rules stay:
   * running containers keep their ports).
   */
  async close(): Promise<void> {
    await this.writer.flush();
    await Promise.all(
      [...this.owners.values()].flatMap((o) =>
        o.holders.splice(0).map((h) => h.close().catch(() => undefined)),
      ),
    );
  }

  private rulesOf(bridge: string): PortRule[] {
    const out: PortRule[] = [];
    for (const o of this.owners.values()) {
      if (o.target.bridge !== bridge) continue;
      for (const p of o.published) {
        // IPv6 host addresses: the relay (a container's IPv4 address is not reachable by ip6tables DNAT)
        if (p.hostIp.includes(':')) continue;
        out.push({
          proto: p.proto,
          hostIp: p.hostIp,
          hostPort: p.hostPort,
          ip: o.target.ip,
          containerPort: p.containerPort,
        });
      }
    }
    return out;
  }
}

/**
 * Remove every port rule of `bridge` from the host (iptables-save tells what is there); for
 * tearing a bridge down for good (network removal, tests, uninstall).
 */
export async function removeBridgePorts(
  bridge: string,
  rules: PortRuleOps = new HostPortRuleOps(),
): Promise<void> {
  const input = removalInput(await rules.save(), bridge);
  if (input) await rules.restore(input);
  await rules.routeLocalnet(bridge, false).catch(() => undefined);
}
