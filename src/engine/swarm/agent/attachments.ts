import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError, errorMessage, isKind, systemError, unavailable } from '../../../common/errors.js';
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
  /** The node is a swarm member (its agent runs, or will once the engine has started). */
  member?: () => boolean;
  /** How long a start waits for the agent of a member node (ms; dockerd's 60 s). */
  agentWaitMs?: number;
}

interface Held {
  sandboxKey: string;
  sandboxId: string;
  /** Each with its interface (`eth<N>`), kept across connects and disconnects of other networks. */
  endpoints: Endpoint[];
  /** The interface on the gateway bridge. */
  gwIfname: string;
  /** Restored after an engine restart: its sandbox may still hold the interfaces of the last run. */
  stale?: boolean;
  defaultRoute: boolean;
}

const PICTURE_WAIT_MS = 15_000;
const AGENT_WAIT_MS = 60_000;

export class NetworkAttachments implements SwarmNetworkPort {
  private link?: ManagerLink;
  /** Containers holding swarm endpoints on this node (plugged, or to plug again after a restart). */
  private readonly held = new Map<string, Held>();
  /** Containers whose attachments are being made (not yet held: a reconcile must not drop them). */
  private readonly joining = new Set<string>();
  /**
   * Containers with a release a manager did not take (unreachable): the next full picture's
   * listing finds their tasks again; leaving the swarm tries them too.
   */
  private readonly unreleased = new Set<string>();
  private waiters: Array<() => void> = [];
  /** Starts waiting for the agent (restart-policy containers at engine start). */
  private linkWaiters: Array<() => void> = [];
  /** Each container's operation under way (attach, detach), the next one waits for it. */
  private readonly turns = new Map<string, Promise<void>>();

  constructor(private readonly o: AttachmentsOptions) {}

  /** The agent started (a swarm member): calls go through its manager. */
  useLink(link: ManagerLink | undefined): void {
    this.link = link;
    if (!link) return;
    const waiters = this.linkWaiters;
    this.linkWaiters = [];
    for (const w of waiters) w();
  }

  active(): boolean {
    return this.link !== undefined;
  }

  /**
   * A member node whose agent is not up yet (the engine is starting: restart-policy containers
   * start before the agent does): waits for it, bounded, as dockerd holds such containers until
   * the cluster is ready. Not a member: at once.
   */
  async whenActive(): Promise<boolean> {
    if (this.link) return true;
    if (!this.o.member?.()) return false;
    let wake: () => void = () => undefined;
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
      this.linkWaiters.push(resolve);
    });
    await Promise.race([woken, sleep(this.o.agentWaitMs ?? AGENT_WAIT_MS, undefined, { ref: false })]);
    this.linkWaiters = this.linkWaiters.filter((w) => w !== wake);
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
    const had = this.o.overlay.attached(req.containerId) ? this.held.get(req.containerId) : undefined;
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
                ...(n.ipv4Address ? { Address: n.ipv4Address } : {}),
                ...(n.ipv6Address ? { Address6: n.ipv6Address } : {}),
              })
              .catch((err: unknown) => {
                throw attachError(n.network, err);
              }),
          );
        }
        await this.waitForPicture(answers.map((a) => a.NetworkID));
      } catch (err) {
        await this.releaseNew(req.containerId, had, answers);
        throw err;
      }
      if (had) return await this.change(req, had, answers);
      const endpoints = answers.map((a, i) =>
        endpointOf(a, req.networks[i]?.network ?? a.NetworkName, req, `eth${req.firstIndex + i}`),
      );
      const held: Held = {
        sandboxKey: req.sandboxKey,
        sandboxId: req.sandboxId,
        endpoints,
        gwIfname: `eth${req.firstIndex + endpoints.length}`,
        defaultRoute: req.defaultRoute,
        // restored and not plugged yet (a connect before the picture came): its old interfaces may linger
        ...(this.held.get(req.containerId)?.stale ? { stale: true } : {}),
      };
      try {
        await this.plug(req.containerId, held);
      } catch (err) {
        await this.o.overlay.detach(req.containerId, { unplug: true }).catch(() => undefined);
        await this.release(req.containerId);
        throw err;
      }
      // held before its VIP table is set: a picture from now on sets it again
      this.held.set(req.containerId, held);
      await this.balance(held, req.containerId);
      return endpoints;
    } finally {
      this.joining.delete(req.containerId);
    }
  }

  /**
   * A plugged container's set of swarm networks changed (`network connect`, `disconnect`): only
   * the networks that came or went are plugged or unplugged (the others' interfaces, addresses and
   * open connections stay), each new one on the lowest free `eth<N>`, as dockerd adds an interface.
   */
  private async change(req: SwarmAttachRequest, had: Held, answers: AttachAnswer[]): Promise<Endpoint[]> {
    const id = req.containerId;
    const kept = new Map(had.endpoints.map((e) => [e.networkId, e]));
    const used = new Set([...req.usedIfnames, had.gwIfname, ...had.endpoints.map((e) => e.ifname ?? '')]);
    const endpoints: Endpoint[] = [];
    const added: Endpoint[] = [];
    try {
      for (const [i, a] of answers.entries()) {
        const old = kept.get(a.NetworkID);
        if (old) {
          endpoints.push(old);
          continue;
        }
        let n = 0;
        while (used.has(`eth${n}`)) n++;
        used.add(`eth${n}`);
        const e = endpointOf(a, req.networks[i]?.network ?? a.NetworkName, req, `eth${n}`);
        await this.o.overlay.plugOne(
          id,
          { networkId: e.networkId, address: `${e.ipAddress}/${e.prefixLen}` },
          `eth${n}`,
        );
        added.push(e);
        endpoints.push(e);
      }
    } catch (err) {
      for (const e of added) await this.o.overlay.unplugOne(id, e.networkId).catch(() => undefined);
      await this.releaseNew(id, had, answers);
      throw err;
    }
    for (const e of had.endpoints) {
      if (endpoints.some((x) => x.networkId === e.networkId)) continue;
      await this.o.overlay.unplugOne(id, e.networkId);
      // the network it left gives its address back
      await this.release(id, e.networkId);
    }
    const held: Held = { ...had, endpoints };
    this.held.set(id, held);
    await this.balance(held, id);
    return endpoints;
  }

  /** After a failed join: the tasks of the networks the container did not hold before go. */
  private async releaseNew(
    containerId: string,
    had: Held | undefined,
    answers: AttachAnswer[],
  ): Promise<void> {
    if (!had) return this.release(containerId);
    for (const a of answers) {
      if (!had.endpoints.some((e) => e.networkId === a.NetworkID))
        await this.release(containerId, a.NetworkID);
    }
  }

  interfaces(containerId: string): string[] {
    const held = this.held.get(containerId);
    return held ? [...held.endpoints.map((e) => e.ifname ?? 'eth0'), held.gwIfname] : [];
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
    usedIfnames: string[] = [],
  ): void {
    const used = new Set([...usedIfnames, ...endpoints.map((e) => e.ifname ?? 'eth0')]);
    let gw = 0;
    while (used.has(`eth${gw}`)) gw++;
    this.held.set(containerId, {
      sandboxKey: sandbox.sandboxKey,
      sandboxId: sandbox.sandboxId,
      endpoints,
      gwIfname: `eth${gw}`,
      stale: true,
      // the container's main network was a swarm one when a swarm interface is eth0
      defaultRoute: endpoints.some((e) => (e.ifname ?? 'eth0') === 'eth0'),
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
        await this.plug(id, held).catch(async (err: unknown) => {
          this.o.log.warn(
            'cannot plug a container into its swarm networks again (tried at the next picture)',
            {
              container: id,
              error: errorMessage(err),
            },
          );
          held.stale = true;
          await this.o.overlay.detach(id, { unplug: true }).catch(() => undefined);
        });
        if (this.o.overlay.attached(id)) await this.balance(held, id);
      } else await this.balance(held);
    }
  }

  /**
   * A full picture came (engine start, another manager): the node's attachment tasks that no
   * container holds (it stopped or went while the engine was down, or left a network while no
   * manager answered) are released: each in its container's turn, and only if the container does
   * not hold that network there (a container starting meanwhile, a restart-policy one at engine
   * start, may have been handed that very task back). A listing that fails waits for the next
   * picture.
   */
  async reconcile(): Promise<void> {
    const link = this.link;
    if (!link) return;
    let list: NodeAttachment[];
    try {
      list = await link.call<NodeAttachment[]>('GET', '/v1/attachments');
    } catch (err) {
      this.o.log.debug('cannot list the node attachments', { error: errorMessage(err) });
      return;
    }
    const holds = (id: string, networkId: string) =>
      this.joining.has(id) || (this.held.get(id)?.endpoints.some((e) => e.networkId === networkId) ?? false);
    const stale = new Map<string, string[]>();
    for (const a of list) {
      if (a.ContainerID === '' || holds(a.ContainerID, a.NetworkID)) continue;
      const networks = stale.get(a.ContainerID);
      if (networks) networks.push(a.NetworkID);
      else stale.set(a.ContainerID, [a.NetworkID]);
    }
    for (const [id, networks] of stale) {
      await this.inTurn(id, async () => {
        const left = networks.filter((n) => !holds(id, n));
        if (left.length === 0) return;
        // (in its turn no join of the container is under way: held says all)
        if (!this.held.has(id)) {
          this.o.log.info('releasing the swarm network attachments of a container that left', {
            container: id,
          });
          return this.release(id);
        }
        for (const n of left) await this.release(id, n);
      });
    }
    // what the manager no longer has needs no release
    const listed = new Set(list.map((a) => a.ContainerID));
    for (const id of [...this.unreleased]) if (!listed.has(id)) this.unreleased.delete(id);
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

  /**
   * The sandbox joins the gateway bridge and each of its networks, every interface under the name
   * its endpoint has (also when plugged again after an engine restart).
   */
  private async plug(containerId: string, held: Held): Promise<void> {
    await this.o.overlay.attach({
      taskId: containerId,
      netns: held.sandboxKey,
      gateway: true,
      keepsDefaultNetwork: !held.defaultRoute,
      firstIndex: Number(held.gwIfname.slice(3)),
      attachments: [],
      ...(held.stale ? { stale: true } : {}),
    });
    for (const e of held.endpoints) {
      await this.o.overlay.plugOne(
        containerId,
        { networkId: e.networkId, address: `${e.ipAddress}/${e.prefixLen}` },
        e.ifname ?? 'eth0',
        held.stale ? { stale: true } : {},
      );
    }
    held.stale = false;
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
      // (one network's release says nothing of the others')
      if (!networkId) this.unreleased.delete(containerId);
    } catch (err) {
      this.unreleased.add(containerId);
      this.o.log.warn('cannot release a container network attachment (tried again later)', {
        container: containerId,
        error: errorMessage(err),
      });
    }
  }
}

/**
 * dockerd's words and status (500, as dockerd 20.10 answers both): a network that is not
 * attachable `Could not attach to network <n>: rpc error: code = PermissionDenied desc = <message>`
 * (swarmkit refuses the attachment task); an address the manager cannot give (`--ip` taken or out
 * of the block) `attaching to network failed, make sure your network options are correct and check
 * manager logs: <reason>`, where dockerd waits 20 s for an allocation that never comes and says
 * `context deadline exceeded`.
 */
function attachError(network: string, err: unknown): Error {
  if (isKind(err, 'Forbidden'))
    return systemError(
      `Could not attach to network ${network}: rpc error: code = PermissionDenied desc = ${errorMessage(err)}`,
    );
  if (isKind(err, 'NotFound')) return new BerthError('NotFound', errorMessage(err));
  if (isKind(err, 'InvalidParameter') || isKind(err, 'Conflict'))
    return systemError(
      `attaching to network failed, make sure your network options are correct and check manager logs: ${errorMessage(err)}`,
    );
  return err instanceof Error ? err : new Error(String(err));
}

function endpointOf(a: AttachAnswer, name: string, req: SwarmAttachRequest, ifname: string): Endpoint {
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
    ifname,
    swarm: { taskId: a.TaskID },
  };
}
