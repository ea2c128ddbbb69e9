import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError, errorMessage, forbidden, isKind, unavailable } from '../../../common/errors.js';
import { randomId } from '../../../common/ids.js';
import type { Logger } from '../../../common/log.js';
import type { SwarmAttachRequest, SwarmNetworkPort } from '../../containers/net/swarm-networks.port.js';
import { macFromIpv4 } from '../../network/ipam.allocations.js';
import type { ServiceLb } from '../../network/lb/lb.types.js';
import type { Endpoint } from '../../network/network.types.js';
import type { AttachAnswer, NodeAttachment } from '../networks/attachment-tasks.js';
import type { OverlayPort } from './overlay-port.js';

/**
 * A node's plain containers on attachable swarm networks (issue 14 §9 step 2), as dockerd's
 * AttachNetwork: for each network the container joins, a manager writes a network-attachment
 * task holding its address (networks/attachment-tasks.ts); once the managers' picture of the
 * node carries the network (its definition, peers and names come with the task), the sandbox is
 * plugged into it exactly as a task container is (a veth into the network's namespace bridge, one
 * on docker_gwbridge, the embedded DNS on the gateway address, the VIP table of the network's
 * services). When the container leaves (stop, failed start, removal), the plumbing goes and the
 * node deletes its tasks. At each full picture (an engine start, a new manager), the node's tasks
 * of containers that no longer hold them are released: nothing leaks past a `kill -9`.
 */

/** The agent's way to its manager, while the node is in a swarm. */
export interface ManagerLink {
  call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T>;
}

export interface AttachmentsOptions {
  overlay: OverlayPort;
  lb?: ServiceLb;
  log: Logger;
  /** How long an attachment waits for the managers' picture to carry its network (ms). */
  pictureWaitMs?: number;
}

interface Held {
  sandboxKey: string;
  sandboxId: string;
  endpoints: Endpoint[];
  firstIndex: number;
  defaultRoute: boolean;
}

const PICTURE_WAIT_MS = 15_000;

export class NetworkAttachments implements SwarmNetworkPort {
  private link?: ManagerLink;
  /** Containers holding swarm endpoints on this node (plugged, or to plug again after a restart). */
  private readonly held = new Map<string, Held>();
  /** Containers whose attachments are being made (not yet held: a reconcile must not drop them). */
  private readonly joining = new Set<string>();
  /** Releases a manager did not take (unreachable): tried again at the next picture. */
  private readonly unreleased = new Set<string>();
  private waiters: Array<() => void> = [];
  /** Each container's operation under way (attach, detach), the next one waits for it. */
  private readonly turns = new Map<string, Promise<void>>();

  constructor(private readonly o: AttachmentsOptions) {}

  /** The agent started (a swarm member): calls go through its manager. */
  useLink(link: ManagerLink | undefined): void {
    this.link = link;
  }

  active(): boolean {
    return this.link !== undefined;
  }

  dnsAddress(): Promise<string> {
    return this.o.overlay.gatewayAddress();
  }

  /**
   * One operation at a time per container: a restart's attach waits for its stop's release (else
   * the manager would hand back the task the release is about to delete).
   */
  private inTurn<T>(containerId: string, fn: () => Promise<T>): Promise<T> {
    const before = this.turns.get(containerId) ?? Promise.resolve();
    const next = before.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.turns.set(containerId, settled);
    void settled.then(() => {
      if (this.turns.get(containerId) === settled) this.turns.delete(containerId);
    });
    return next;
  }

  attach(req: SwarmAttachRequest): Promise<Endpoint[]> {
    return this.inTurn(req.containerId, () => this.join(req));
  }

  private async join(req: SwarmAttachRequest): Promise<Endpoint[]> {
    const link = this.link;
    if (!link) throw unavailable('This node is not part of a swarm');
    this.joining.add(req.containerId);
    try {
      const answers: AttachAnswer[] = [];
      try {
        for (const n of req.networks) {
          answers.push(
            await link
              .call<AttachAnswer>('POST', '/v1/attachments', {
                ContainerID: req.containerId,
                Network: n.network,
                Names: n.names,
              })
              .catch((err: unknown) => {
                throw attachError(n.network, err);
              }),
          );
        }
        await this.waitForPicture(answers.map((a) => a.NetworkID));
      } catch (err) {
        await this.release(req.containerId);
        throw err;
      }
      const endpoints = answers.map((a, i) =>
        endpointOf(a, req.networks[i]?.network ?? a.NetworkName, req, req.firstIndex + i),
      );
      const held: Held = {
        sandboxKey: req.sandboxKey,
        sandboxId: req.sandboxId,
        endpoints,
        firstIndex: req.firstIndex,
        defaultRoute: req.defaultRoute,
      };
      try {
        // a second call (network connect, disconnect) plugs the whole set again
        if (this.o.overlay.attached(req.containerId))
          await this.o.overlay.detach(req.containerId, { unplug: true });
        await this.plug(req.containerId, held);
      } catch (err) {
        await this.o.overlay.detach(req.containerId).catch(() => undefined);
        await this.release(req.containerId);
        throw err;
      }
      // the networks it left since the last call give their addresses back
      const before = this.held.get(req.containerId)?.endpoints ?? [];
      this.held.set(req.containerId, held);
      for (const e of before) {
        if (endpoints.some((x) => x.networkId === e.networkId)) continue;
        await this.release(req.containerId, e.networkId);
      }
      return endpoints;
    } finally {
      this.joining.delete(req.containerId);
    }
  }

  detach(containerId: string): Promise<void> {
    return this.inTurn(containerId, () => this.leaveNetworks(containerId));
  }

  private async leaveNetworks(containerId: string): Promise<void> {
    const held = this.held.get(containerId);
    this.held.delete(containerId);
    if (held && this.o.lb) await this.o.lb.clear(held.sandboxKey).catch(() => undefined);
    await this.o.overlay.detach(containerId, { unplug: true }).catch((err: unknown) =>
      this.o.log.warn('cannot unplug a container from its swarm networks', {
        container: containerId,
        error: errorMessage(err),
      }),
    );
    if (held || this.link) await this.release(containerId);
  }

  restore(
    containerId: string,
    sandbox: { sandboxId: string; sandboxKey: string },
    endpoints: Endpoint[],
  ): void {
    const first = Math.min(...endpoints.map((e) => Number((e.ifname ?? 'eth0').slice(3)) || 0));
    this.held.set(containerId, {
      sandboxKey: sandbox.sandboxKey,
      sandboxId: sandbox.sandboxId,
      endpoints,
      firstIndex: Number.isFinite(first) ? first : 0,
      // the container's main network was a swarm one when its first interface is eth0
      defaultRoute: first === 0,
    });
  }

  /**
   * The managers' picture came or changed: waiting attachments go on, containers restored with
   * swarm endpoints are plugged again (an engine start swept the overlay plumbing), and each
   * plugged container's VIP table is set again.
   */
  async overlayChanged(): Promise<void> {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
    for (const [id, held] of this.held) {
      if (!this.o.overlay.attached(id)) {
        if (!held.endpoints.every((e) => this.o.overlay.knows(e.networkId))) continue;
        await this.plug(id, held).catch((err: unknown) =>
          this.o.log.warn('cannot plug a container into its swarm networks again', {
            container: id,
            error: errorMessage(err),
          }),
        );
      } else await this.balance(held);
    }
  }

  /**
   * A full picture came (engine start, another manager): the node's attachment tasks whose
   * container holds them no more (it stopped or went while the engine was down) are released,
   * and releases a manager missed are tried again.
   */
  async reconcile(): Promise<void> {
    const link = this.link;
    if (!link) return;
    for (const id of [...this.unreleased]) await this.release(id);
    const list = await link.call<NodeAttachment[]>('GET', '/v1/attachments').catch((err: unknown) => {
      this.o.log.debug('cannot list the node attachments', { error: errorMessage(err) });
      return [];
    });
    const stale = new Set(
      list.map((a) => a.ContainerID).filter((id) => !this.held.has(id) && !this.joining.has(id) && id !== ''),
    );
    for (const id of stale) {
      this.o.log.info('releasing the swarm network attachments of a container that left', { container: id });
      await this.release(id);
    }
  }

  /** The node is about to leave the swarm: its containers' attachment tasks go while a manager listens. */
  async releaseAll(): Promise<void> {
    for (const id of new Set([...this.held.keys(), ...this.unreleased])) {
      await this.release(id);
      // no manager answers: leaving does not wait on each (the node's removal reaps them)
      if (this.unreleased.has(id)) break;
    }
  }

  /** The node left the swarm: what is plugged goes (the overlay sweep follows), nothing is held. */
  async leave(): Promise<void> {
    for (const [id, held] of this.held) {
      if (this.o.lb) await this.o.lb.clear(held.sandboxKey).catch(() => undefined);
      await this.o.overlay.detach(id).catch(() => undefined);
    }
    this.held.clear();
    this.unreleased.clear();
    this.link = undefined;
  }

  private async plug(containerId: string, held: Held): Promise<void> {
    await this.o.overlay.attach({
      taskId: containerId,
      netns: held.sandboxKey,
      gateway: true,
      keepsDefaultNetwork: !held.defaultRoute,
      firstIndex: held.firstIndex,
      attachments: held.endpoints.map((e) => ({
        networkId: e.networkId,
        address: `${e.ipAddress}/${e.prefixLen}`,
      })),
    });
    await this.balance(held, containerId);
  }

  private async balance(held: Held, containerId?: string): Promise<void> {
    const lb = this.o.lb;
    const id = containerId ?? [...this.held].find(([, h]) => h === held)?.[0];
    if (!lb || !id) return;
    const vips = this.o.overlay
      .vipsFor(id)
      .filter((v) => v.backends.length > 0)
      .map((v) => ({ vip: v.vip, backends: v.backends }));
    await lb
      .apply(held.sandboxKey, vips)
      .catch((err: unknown) =>
        this.o.log.warn('cannot set a container VIP table', { container: id, error: errorMessage(err) }),
      );
  }

  /** The node's picture carries every network (bounded: the manager's watch brings it). */
  private async waitForPicture(networkIds: string[]): Promise<void> {
    const deadline = Date.now() + (this.o.pictureWaitMs ?? PICTURE_WAIT_MS);
    while (!networkIds.every((id) => this.o.overlay.knows(id))) {
      const left = deadline - Date.now();
      if (left <= 0) throw unavailable('timed out waiting for the swarm network to reach this node');
      await Promise.race([
        new Promise<void>((resolve) => this.waiters.push(resolve)),
        sleep(Math.min(left, 500), undefined, { ref: false }),
      ]);
    }
  }

  /** The container's attachment tasks (on one network, or all) go on the manager. */
  private async release(containerId: string, networkId?: string): Promise<void> {
    const link = this.link;
    if (!link) return;
    try {
      await link.call('POST', '/v1/attachments/release', {
        ContainerID: containerId,
        ...(networkId ? { NetworkID: networkId } : {}),
      });
      this.unreleased.delete(containerId);
    } catch (err) {
      this.unreleased.add(containerId);
      this.o.log.warn('cannot release a container network attachment (tried again later)', {
        container: containerId,
        error: errorMessage(err),
      });
    }
  }
}

/** dockerd's words: `Could not attach to network <n>: rpc error: code = <Code> desc = <message>`. */
function attachError(network: string, err: unknown): Error {
  if (isKind(err, 'Forbidden'))
    return forbidden(
      `Could not attach to network ${network}: rpc error: code = PermissionDenied desc = ${errorMessage(err)}`,
    );
  if (isKind(err, 'NotFound')) return new BerthError('NotFound', errorMessage(err));
  return err instanceof Error ? err : new Error(String(err));
}

function endpointOf(a: AttachAnswer, name: string, req: SwarmAttachRequest, index: number): Endpoint {
  const [ip = '', prefix = '0'] = a.Address.split('/');
  return {
    // the network as the container's settings name it
    network: name,
    networkId: a.NetworkID,
    endpointId: randomId(),
    sandboxId: req.sandboxId,
    sandboxKey: req.sandboxKey,
    ipAddress: ip,
    prefixLen: Number(prefix),
    // as dockerd: the overlay endpoint has no gateway (egress is docker_gwbridge's)
    gateway: '',
    macAddress: macFromIpv4(ip) ?? '',
    ifname: `eth${index}`,
    swarm: { taskId: a.TaskID },
  };
}
