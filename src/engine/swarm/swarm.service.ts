import { errorMessage } from '../../common/errors.js';
import type { Filters } from '../../common/filters.js';
import { keys } from './keys.js';
import { LocalSwarmFiles } from './local-state.js';
import type { LogBroker } from './logs/log-broker.js';
import { unlockSwarm } from './membership/autolock.js';
import { clusterInfo, inspectSwarm, unlockKeyOf, updateSwarm } from './membership/cluster-settings.js';
import { initSwarm } from './membership/init.js';
import { joinSwarm } from './membership/join.js';
import { leaveSwarm } from './membership/leave.js';
import { renewCertificate } from './membership/renewal.js';
import { becomeManager, becomeWorker } from './membership/role-change.js';
import { Nodes } from './nodes/nodes.js';
import type { SwarmServiceOptions } from './options.js';
import type { StoredManager } from './records.js';
import type { RoleLoops } from './role-loops.js';
import { NodeRuntime } from './runtime/node-runtime.js';
import { SwarmSession } from './session.js';
import type { ClusterStore } from './store/cluster-store.js';
import {
  type InitRequest,
  inactiveSwarmInfo,
  type JoinRequest,
  type NodeSpecUpdate,
  type SpecUpdate,
  type Swarm,
  type SwarmInfo,
  type SwarmNode,
  type UpdateFlags,
} from './swarm.types.js';
import type { SwarmContext } from './swarm-context.js';

export { ALREADY_IN_SWARM, NO_LEADER, NOT_A_MANAGER, NOT_IN_SWARM, WORKER_NOT_MANAGER } from './messages.js';
export type { HostDescription, MemberRunner, SwarmServiceOptions } from './options.js';

/**
 * Swarm mode on this engine, as the routes see it: a facade over its rooms. membership/ (init,
 * join, leave, unlock, the cluster's settings), nodes/ (list, inspect, update, remove), runtime/
 * (what runs while the node is in a swarm: a manager's etcd member, store, events, liveness and
 * cluster API, a worker's heartbeats, and the other rooms' loops through RoleLoops). Membership
 * changes run one at a time. docs/swarm.md says what exists and what does not yet.
 */
export class SwarmService {
  private readonly ctx: SwarmContext;
  private readonly nodes: Nodes;
  /** One membership change at a time (init, join, leave, update, node changes). */
  private busy: Promise<unknown> = Promise.resolve();

  constructor(opts: SwarmServiceOptions) {
    const session = new SwarmSession(new LocalSwarmFiles(opts.dataRoot), opts.log);
    this.ctx = {
      opts,
      session,
      runtime: new NodeRuntime(opts, session),
      now: opts.now ?? (() => new Date()),
    };
    this.nodes = new Nodes(this.ctx);
    let changing = false;
    this.ctx.runtime.hooks = {
      roleChanged: (role) => {
        if (changing) return;
        changing = true;
        void this.serialize(() => (role === 'manager' ? becomeManager(this.ctx) : becomeWorker(this.ctx)))
          .catch((err: unknown) =>
            opts.log.warn('role change failed; trying again', { role, error: errorMessage(err) }),
          )
          .finally(() => {
            changing = false;
          });
      },
      renew: async () => {
        await this.serialize(() => renewCertificate(this.ctx));
      },
    };
  }

  /** At engine start: a node that was in a swarm takes its place again (its member restarted or adopted). */
  async start(): Promise<void> {
    const { session, runtime, opts } = this.ctx;
    const local = await session.files.load();
    if (!local) return;
    session.local = local;
    if (local.Role !== 'manager') {
      await runtime.startWorker(local);
      session.activate();
      await runtime.startLoops();
      return;
    }
    if (local.Autolock) {
      // its keys are sealed under the unlock key: nothing starts until `docker swarm unlock`
      session.nodeState = 'locked';
      return;
    }
    try {
      await runtime.startManager(local, 'new');
      await runtime.openClusterApi(local);
      session.activate();
      await runtime.startLoops();
    } catch (err) {
      session.nodeState = 'error';
      session.error = errorMessage(err);
      opts.log.error('cannot take up the swarm again', { error: session.error });
    }
  }

  /** Loops that need the engine's other services (the agent, once containers exist); started at once on an active node. */
  addLoops(part: RoleLoops): Promise<void> {
    return this.ctx.runtime.addLoops(part);
  }

  /** The engine stops: the liveness lease is left to expire, the member ends (it restarts with the engine). */
  async close(): Promise<void> {
    await this.busy.catch(() => {});
    await this.ctx.runtime.close();
  }

  /** `/_ping`'s Swarm header. */
  pingState(): string {
    const { session } = this.ctx;
    if (session.nodeState === 'active')
      return `active/${session.local?.Role === 'manager' ? 'manager' : 'worker'}`;
    return session.nodeState;
  }

  async info(): Promise<SwarmInfo> {
    const { session } = this.ctx;
    const local = session.local;
    if (!local || session.nodeState === 'inactive') return inactiveSwarmInfo();
    const base: SwarmInfo = {
      NodeID: local.NodeID,
      NodeAddr: local.AdvertiseHost,
      LocalNodeState: session.nodeState,
      ControlAvailable: session.nodeState === 'active' && local.Role === 'manager',
      Error: session.error,
      RemoteManagers: null,
    };
    if (local.Role === 'worker') {
      base.RemoteManagers = local.Managers ?? [];
      return base;
    }
    const store = session.store;
    if (session.nodeState !== 'active' || !store) return base;
    try {
      const [managers, nodes, cluster] = await Promise.all([
        store.range(keys.managers),
        store.range(keys.nodes),
        store.get(keys.cluster),
      ]);
      base.RemoteManagers = managers.kvs.map((kv) => ({
        NodeID: kv.key.slice(keys.managers.length),
        Addr: (JSON.parse(kv.value) as StoredManager).addr,
      }));
      base.Nodes = nodes.kvs.length;
      base.Managers = managers.kvs.length;
      if (cluster) base.Cluster = await clusterInfo(this.ctx, cluster);
    } catch (err) {
      base.Error = errorMessage(err);
    }
    return base;
  }

  inspect(): Promise<Swarm> {
    return inspectSwarm(this.ctx);
  }

  initSwarm(req: InitRequest): Promise<string> {
    return this.serialize(() => initSwarm(this.ctx, req));
  }

  join(req: JoinRequest): Promise<void> {
    return this.serialize(() => joinSwarm(this.ctx, req));
  }

  leave(force: boolean): Promise<void> {
    return this.serialize(() => leaveSwarm(this.ctx, force));
  }

  update(version: number, spec: SpecUpdate, flags: UpdateFlags): Promise<void> {
    return this.serialize(() => updateSwarm(this.ctx, version, spec, flags));
  }

  unlockKey(): Promise<{ UnlockKey: string }> {
    return unlockKeyOf(this.ctx);
  }

  unlock(key: string): Promise<void> {
    return this.serialize(() => unlockSwarm(this.ctx, key));
  }

  /** Throws what a swarm endpoint answers on a node that is not an active manager. */
  requireManager(): void {
    this.ctx.session.managerStore();
  }

  /** Whether this node is an active manager now (swarm networks are listed only there). */
  isManager(): boolean {
    const { session } = this.ctx;
    return session.nodeState === 'active' && session.local?.Role === 'manager' && session.store !== undefined;
  }

  /** The store of an active manager; dockerd's 503s otherwise. */
  managerStore(): ClusterStore {
    return this.ctx.session.managerStore();
  }

  /** This manager's log broker (service and task logs); dockerd's 503s on a node that is not one. */
  async logBroker(): Promise<LogBroker> {
    this.requireManager();
    return this.ctx.runtime.logBroker;
  }

  /** The cluster's store and DEK on an active manager (secrets, configs); dockerd's 503s otherwise. */
  async managerAccess(): Promise<{ store: ClusterStore; dek: Buffer }> {
    const { session } = this.ctx;
    const store = session.managerStore();
    return { store, dek: await session.clusterDek() };
  }

  listNodes(filters: Filters = new Map()): Promise<SwarmNode[]> {
    return this.nodes.list(filters);
  }

  inspectNode(ref: string): Promise<SwarmNode> {
    return this.nodes.inspect(ref);
  }

  updateNode(ref: string, version: number, spec: NodeSpecUpdate): Promise<void> {
    return this.serialize(() => this.nodes.update(ref, version, spec));
  }

  removeNode(ref: string, force: boolean): Promise<void> {
    return this.serialize(() => this.nodes.remove(ref, force));
  }

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.busy.then(fn, fn);
    this.busy = run.catch(() => {});
    return run;
  }
}
