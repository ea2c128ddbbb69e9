import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BerthError,
  conflict,
  errorMessage,
  invalidParameter,
  notFound,
  notImplemented,
  systemError,
  unauthorized,
  unavailable,
} from '../../common/errors.js';
import type { Filters } from '../../common/filters.js';
import type { Logger } from '../../common/log.js';
import { type InterfaceLister, joinHostPort, parseHostPort, resolveAddresses } from './addresses.js';
import type { AgentContext, SwarmAgent } from './agent/node-agent.js';
import { newKeyPair, privateKeyPem } from './ca/certificates.js';
import { createCsr } from './ca/csr.js';
import { RootCa } from './ca/root-ca.js';
import {
  caDigest,
  newJoinToken,
  newSwarmId,
  newUnlockKey,
  parseJoinToken,
  parseUnlockKey,
} from './ca/tokens.js';
import { TaskDispatch } from './cluster-api/assignments.js';
import { clusterCall, fetchRootCa } from './cluster-api/client.js';
import type { JoinAnswer, JoinCall } from './cluster-api/protocol.js';
import { type ClusterApiServer, startClusterApi } from './cluster-api/server.js';
import { ClusterEvents, type SwarmPublish } from './cluster-events.js';
import { Dispatcher } from './dispatcher.js';
import { ETCD_PEER_CN, type EtcdMemberSpec, type RaftSettings } from './etcd/etcd-args.js';
import { keys } from './keys.js';
import { type LocalState, LocalSwarmFiles } from './local-state.js';
import { filterNodes } from './node-filters.js';
import { newDek, seal, unseal } from './seal.js';
import {
  defaultSpec,
  effectiveCertExpiryMs,
  effectiveHeartbeatMs,
  effectiveRaft,
  mergeSpec,
  specFromUpdate,
  validateSpec,
} from './spec.js';
import type { ClusterStore, KeyValue, Lease } from './store/cluster-store.js';
import {
  type ClusterInfo,
  type InitRequest,
  inactiveSwarmInfo,
  type JoinRequest,
  type LocalNodeState,
  type NodeAvailability,
  type NodeSpecUpdate,
  type SpecUpdate,
  type Swarm,
  type SwarmInfo,
  type SwarmNode,
  type SwarmSpec,
  type UpdateFlags,
} from './swarm.types.js';
import { WorkerLink } from './worker-link.js';

/** dockerd's words for the states a swarm endpoint may find the node in. */
export const NOT_IN_SWARM = 'This node is not part of a swarm';
export const NOT_A_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
export const WORKER_NOT_MANAGER =
  "This node is not a swarm manager. Worker nodes can't be used to view or modify cluster state. Please run this command on a manager node or promote the current node to a manager.";
export const ALREADY_IN_SWARM =
  'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';
export const NO_LEADER =
  "The swarm does not have a leader. It's possible that too few managers are online. Make sure more than half of the managers are online.";
const LAST_MANAGER =
  'You are attempting to leave the swarm on a node that is participating as a manager. Removing the last manager erases all current state of the swarm. Use `--force` to ignore this message.';

/** The one etcd member a manager runs (EtcdSupervisor; a fake in unit tests). */
export interface MemberRunner {
  readonly socketPath: string;
  start(spec: EtcdMemberSpec, timeoutMs?: number): Promise<void>;
  stop(graceMs?: number): Promise<void>;
}

export interface HostDescription {
  hostname: string;
  nanoCpus: number;
  memoryBytes: number;
}

export interface SwarmServiceOptions {
  dataRoot: string;
  engineVersion: string;
  /** `--swarm-etcd-peer-port`: where this manager's member listens for its peers (2380). */
  peerPort: number;
  member: MemberRunner;
  /** A store client on the member's socket. */
  openStore: (socketPath: string) => ClusterStore;
  interfaces: InterfaceLister;
  describeHost: () => HostDescription;
  plugins: () => { Type: string; Name: string }[];
  log: Logger;
  now?: () => Date;
  /** Where a manager's swarm-scope events go (the engine's event bus). */
  publish?: SwarmPublish;
}

/** The Swarm object as stored in `P/cluster` (no Version: that is the key's mod revision). */
interface StoredCluster {
  ID: string;
  CreatedAt: string;
  UpdatedAt: string;
  Spec: SwarmSpec;
  RootRotationInProgress: boolean;
  DefaultAddrPool: string[];
  SubnetSize: number;
  DataPathPort: number;
  JoinTokens: { Worker: string; Manager: string };
  /** Private: never shown by the API. The unlock key, sealed with the DEK, while autolock is on. */
  _?: { unlockKey?: string };
}

interface StoredCa {
  cert: string;
  /** The root key, sealed with the DEK. */
  key: string;
}

/** `P/managers/<id>`: how to reach a manager. */
interface StoredManager {
  memberId: string;
  peerUrl: string;
  addr: string;
}

type StoredNode = Omit<SwarmNode, 'Version' | 'Status' | 'ManagerStatus'> & {
  Status: { State: SwarmNode['Status']['State']; Message?: string; Addr: string };
};

/** The etcd peer certificate's lifetime: as long as the root's, re-issued with the node's later. */
const PEER_CERT_MS = 10 * 365 * 24 * 3600 * 1000;

function raftOf(spec: SwarmSpec): RaftSettings {
  return effectiveRaft(spec);
}

function validatePool(pool: string[], subnetSize: number): void {
  for (const cidr of pool) {
    const [ip, bits] = cidr.split('/');
    const family = isIP(ip ?? '');
    const max = family === 6 ? 128 : 32;
    if (!family || bits === undefined || !/^\d+$/.test(bits) || Number(bits) > max) {
      throw invalidParameter(`invalid default address pool ${JSON.stringify(cidr)}: not a CIDR`);
    }
    if (subnetSize < Number(bits) || subnetSize > max) {
      throw invalidParameter(`invalid subnet size ${subnetSize} for the address pool ${cidr}`);
    }
  }
}

/**
 * Swarm mode on this engine: the node's membership (init, leave), the cluster's settings (update,
 * tokens, unlock key), and what /info and /_ping show. A manager runs one etcd member (through
 * `member`) and keeps the cluster state in it (keys.ts); a liveness key under a lease says the
 * node is up. docs/swarm.md says what exists and what does not yet.
 */
export class SwarmService {
  private readonly files: LocalSwarmFiles;
  private local?: LocalState;
  private store?: ClusterStore;
  private dek?: Buffer;
  private nodeState: LocalNodeState = 'inactive';
  private error = '';
  private liveness?: { lease: Lease; timer: NodeJS.Timeout; periodMs: number };
  private clusterApi?: ClusterApiServer;
  /** The node's key while it is sealed on disk (autolock), once unlocked. */
  private nodeKeyPem?: string;
  private link?: WorkerLink;
  private events?: ClusterEvents;
  /** The node's agent: runs the tasks assigned to it (agent/). */
  private agent?: SwarmAgent;
  /** One membership change at a time (init, leave, update). */
  private busy: Promise<unknown> = Promise.resolve();
  private readonly now: () => Date;

  constructor(private readonly opts: SwarmServiceOptions) {
    this.files = new LocalSwarmFiles(opts.dataRoot);
    this.now = opts.now ?? (() => new Date());
  }

  /** At engine start: a node that was in a swarm takes its place again (its member restarted or adopted). */
  async start(): Promise<void> {
    const local = await this.files.load();
    if (!local) return;
    this.local = local;
    if (local.Role !== 'manager') {
      await this.startWorker(local);
      this.nodeState = 'active';
      return;
    }
    if (local.Autolock) {
      // its keys are sealed under the unlock key: nothing starts until `docker swarm unlock`
      this.nodeState = 'locked';
      return;
    }
    try {
      await this.startManager(local, 'new');
      await this.openClusterApi(local);
      this.nodeState = 'active';
    } catch (err) {
      this.nodeState = 'error';
      this.error = errorMessage(err);
      this.opts.log.error('cannot take up the swarm again', { error: this.error });
    }
  }

  /** The engine stops: the liveness lease is left to expire, the member ends (it restarts with the engine). */
  async close(): Promise<void> {
    await this.busy.catch(() => {});
    await this.agent?.stop();
    this.stopLiveness();
    await this.stopConnections();
  }

  /** The node's agent, once the engine's containers are up: it runs while the node is active. */
  async attachAgent(agent: SwarmAgent): Promise<void> {
    this.agent = agent;
    await this.startAgent();
  }

  private async startAgent(): Promise<void> {
    const local = this.local;
    if (!this.agent || !local || this.nodeState !== 'active') return;
    const ctx: AgentContext = {
      nodeId: local.NodeID,
      tls: async () => {
        const [ca, cert, key] = await Promise.all([
          readFile(this.files.certs.ca, 'utf8'),
          readFile(this.files.certs.nodeCert, 'utf8'),
          this.nodeKeyPem ?? readFile(this.files.certs.nodeKey, 'utf8'),
        ]);
        return { ca, cert, key };
      },
      // a manager's agent talks to its own cluster API first
      managers: () =>
        local.Role === 'manager'
          ? [{ NodeID: local.NodeID, Addr: joinHostPort(local.AdvertiseHost, local.AdvertisePort) }]
          : (local.Managers ?? []),
    };
    await this.agent
      .start(ctx)
      .catch((err: unknown) =>
        this.opts.log.error('cannot start the swarm agent', { error: errorMessage(err) }),
      );
  }

  /** Ends the link to the managers, the cluster API, the watch, the store and a manager's member. */
  private async stopConnections(): Promise<void> {
    this.link?.stop();
    this.link = undefined;
    await this.clusterApi?.close();
    this.clusterApi = undefined;
    this.events?.stop();
    this.events = undefined;
    this.store?.close();
    this.store = undefined;
    if (this.local?.Role === 'manager') await this.opts.member.stop();
  }

  /** `/_ping`'s Swarm header. */
  pingState(): string {
    if (this.nodeState === 'active') return `active/${this.local?.Role === 'manager' ? 'manager' : 'worker'}`;
    return this.nodeState;
  }

  async info(): Promise<SwarmInfo> {
    const local = this.local;
    if (!local || this.nodeState === 'inactive') return inactiveSwarmInfo();
    const base: SwarmInfo = {
      NodeID: local.NodeID,
      NodeAddr: local.AdvertiseHost,
      LocalNodeState: this.nodeState,
      ControlAvailable: this.nodeState === 'active' && local.Role === 'manager',
      Error: this.error,
      RemoteManagers: null,
    };
    if (local.Role === 'worker') {
      base.RemoteManagers = local.Managers ?? [];
      return base;
    }
    if (this.nodeState !== 'active' || !this.store) return base;
    try {
      const [managers, nodes, cluster] = await Promise.all([
        this.store.range(keys.managers),
        this.store.range(keys.nodes),
        this.store.get(keys.cluster),
      ]);
      base.RemoteManagers = managers.kvs.map((kv) => ({
        NodeID: kv.key.slice(keys.managers.length),
        Addr: (JSON.parse(kv.value) as StoredManager).addr,
      }));
      base.Nodes = nodes.kvs.length;
      base.Managers = managers.kvs.length;
      if (cluster) base.Cluster = await this.clusterInfo(cluster);
    } catch (err) {
      base.Error = errorMessage(err);
    }
    return base;
  }

  async inspect(): Promise<Swarm> {
    const store = this.managerStore();
    const kv = await this.read(() => store.get(keys.cluster));
    if (!kv) throw unavailable(NO_LEADER);
    const stored = JSON.parse(kv.value) as StoredCluster;
    return { ...(await this.clusterInfo(kv)), JoinTokens: stored.JoinTokens };
  }

  initSwarm(req: InitRequest): Promise<string> {
    return this.serialize(() => this.doInit(req));
  }

  /** POST /swarm/join: as a worker (a manager join is not there yet: docs/swarm.md). */
  join(req: JoinRequest): Promise<void> {
    return this.serialize(() => this.doJoin(req));
  }

  /** Throws what a swarm endpoint answers on a node that is not an active manager. */
  requireManager(): void {
    this.managerStore();
  }

  /** The cluster's store and DEK on an active manager (secrets, configs); dockerd's 503s otherwise. */
  async managerAccess(): Promise<{ store: ClusterStore; dek: Buffer }> {
    const store = this.managerStore();
    return { store, dek: await this.clusterDek() };
  }

  leave(force: boolean): Promise<void> {
    return this.serialize(() => this.doLeave(force));
  }

  update(version: number, spec: SpecUpdate, flags: UpdateFlags): Promise<void> {
    return this.serialize(() => this.doUpdate(version, spec, flags));
  }

  async unlockKey(): Promise<{ UnlockKey: string }> {
    const store = this.managerStore();
    const kv = await this.read(() => store.get(keys.cluster));
    if (!kv) throw unavailable(NO_LEADER);
    const sealed = (JSON.parse(kv.value) as StoredCluster)._?.unlockKey;
    return { UnlockKey: sealed ? unseal(await this.clusterDek(), sealed) : '' };
  }

  /**
   * POST /swarm/unlock: the key opens the DEK and the node key sealed on disk (a wrong one fails
   * AES-GCM's check: 401); then the member starts and the node is active.
   */
  unlock(key: string): Promise<void> {
    return this.serialize(async () => {
      const local = this.local;
      if (!local || this.nodeState === 'inactive') throw unavailable(NOT_IN_SWARM);
      if (this.nodeState !== 'locked') throw conflict('swarm is not locked');
      const kek = parseUnlockKey(key.trim());
      const invalid = unauthorized('swarm could not be unlocked: invalid key provided');
      if (!kek) throw invalid;
      try {
        this.dek = Buffer.from(unseal(kek, await readFile(this.files.certs.dek, 'utf8')), 'base64');
        this.nodeKeyPem = unseal(kek, await readFile(this.files.certs.nodeKey, 'utf8'));
      } catch {
        this.dek = undefined;
        this.nodeKeyPem = undefined;
        throw invalid;
      }
      await this.startManager(local, 'new');
      await this.openClusterApi(local);
      this.nodeState = 'active';
      this.error = '';
      await this.startAgent();
      this.opts.log.info('swarm unlocked', { nodeId: local.NodeID });
    });
  }

  async listNodes(filters: Filters = new Map()): Promise<SwarmNode[]> {
    const store = this.managerStore();
    const [nodes, live, managers, leader] = await this.read(() =>
      Promise.all([
        store.range(keys.nodes),
        store.range(keys.lives),
        store.range(keys.managers),
        this.leaderMember(),
      ]),
    );
    const alive = new Set(live.kvs.map((kv) => kv.key.slice(keys.lives.length)));
    const managerOf = new Map(
      managers.kvs.map((kv) => [kv.key.slice(keys.managers.length), JSON.parse(kv.value) as StoredManager]),
    );
    return filterNodes(
      nodes.kvs.map((kv) => this.nodeView(kv, alive, managerOf, leader)),
      filters,
    );
  }

  /**
   * POST /nodes/{id}/update?version=: the NodeSpec as given (labels replaced, Role and
   * Availability required), by compare-and-swap on the node's version. A role change is not
   * there yet (501), but demoting the last manager is refused as swarmkit refuses it.
   */
  updateNode(ref: string, version: number, spec: NodeSpecUpdate): Promise<void> {
    return this.serialize(async () => {
      const store = this.managerStore();
      const node = await this.inspectNode(ref);
      const role = spec.Role;
      if (role !== 'manager' && role !== 'worker')
        throw invalidParameter(`invalid Role: ${JSON.stringify(role ?? '')}`);
      const availability = spec.Availability;
      if (availability !== 'active' && availability !== 'pause' && availability !== 'drain') {
        throw invalidParameter(`invalid Availability: ${JSON.stringify(availability ?? '')}`);
      }
      if (role !== node.Spec.Role) {
        const managers = (await store.range(keys.managers)).kvs.length;
        if (role === 'worker' && managers <= 1)
          throw invalidParameter('attempting to demote the last manager of the swarm');
        throw notImplemented('promoting or demoting a node is not supported by this engine yet');
      }
      const kv = await store.get(keys.node(node.ID));
      if (!kv) throw notFound(`node ${ref} not found`);
      const stored = JSON.parse(kv.value) as StoredNode;
      const next: StoredNode = {
        ...stored,
        UpdatedAt: this.now().toISOString(),
        Spec: {
          ...(spec.Name ? { Name: spec.Name } : {}),
          Labels: { ...(spec.Labels ?? {}) },
          Role: role,
          Availability: availability,
        },
      };
      const res = await store.txn(
        [{ key: keys.node(node.ID), target: 'mod', op: 'equal', value: version }],
        [{ put: { key: keys.node(node.ID), value: JSON.stringify(next) } }],
      );
      if (!res.succeeded) throw conflict('update out of sequence');
    });
  }

  /** DELETE /nodes/{id}?force=: a node that is down (or any worker with force); never a manager. */
  removeNode(ref: string, force: boolean): Promise<void> {
    return this.serialize(async () => {
      const store = this.managerStore();
      const node = await this.inspectNode(ref);
      if (node.ManagerStatus || node.Spec.Role === 'manager') {
        throw invalidParameter(
          `node ${node.ID} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`,
        );
      }
      if (node.Status.State !== 'down' && !force) {
        throw invalidParameter(`node ${node.ID} is not down and can't be removed`);
      }
      // from now on its certificate gets it nothing: the dispatcher refuses nodes not in etcd
      await store.txn([], [{ delete: { key: keys.node(node.ID) } }, { delete: { key: keys.live(node.ID) } }]);
    });
  }

  /** A node by ID, ID prefix or hostname, as dockerd's lookup finds it. */
  async inspectNode(ref: string): Promise<SwarmNode> {
    const nodes = await this.listNodes();
    const exact = nodes.find((n) => n.ID === ref);
    if (exact) return exact;
    const byName = nodes.filter((n) => n.Description.Hostname === ref);
    if (byName.length === 1 && byName[0]) return byName[0];
    const byPrefix = nodes.filter((n) => ref !== '' && n.ID.startsWith(ref));
    if (byPrefix.length === 1 && byPrefix[0]) return byPrefix[0];
    if (byName.length > 1 || byPrefix.length > 1) {
      throw invalidParameter(
        `node ${ref} is ambiguous (${Math.max(byName.length, byPrefix.length)} matches found)`,
      );
    }
    throw notFound(`node ${ref} not found`);
  }

  // --- init, leave, update -------------------------------------------------------------------

  private async doInit(req: InitRequest): Promise<string> {
    if (this.local && this.nodeState !== 'inactive') {
      if (req.ForceNewCluster && this.local.Role === 'manager') return this.forceNewCluster();
      throw unavailable(ALREADY_IN_SWARM);
    }
    const addrs = await resolveAddresses(req, this.opts.interfaces);
    const dataPathPort = req.DataPathPort || 4789;
    if (dataPathPort < 1024 || dataPathPort > 49151) {
      throw invalidParameter(`data path port ${dataPathPort} is out of range (1024-49151)`);
    }
    const pool = req.DefaultAddrPool && req.DefaultAddrPool.length > 0 ? req.DefaultAddrPool : ['10.0.0.0/8'];
    const subnetSize = req.SubnetSize || 24;
    validatePool(pool, subnetSize);
    const availability = this.availability(req.Availability);
    const spec = mergeSpec(defaultSpec(), {
      ...(req.Spec ?? {}),
      EncryptionConfig: {
        AutoLockManagers:
          req.AutoLockManagers === true || req.Spec?.EncryptionConfig?.AutoLockManagers === true,
      },
    });
    validateSpec(spec);

    const now = this.now().toISOString();
    const nodeId = newSwarmId();
    const clusterId = newSwarmId();
    const ca = RootCa.create(this.now());
    const dek = newDek();
    const expiryMs = effectiveCertExpiryMs(spec);
    const node = ca.issueNode(nodeId, 'manager', clusterId, expiryMs);
    const unlockKey = spec.EncryptionConfig.AutoLockManagers ? newUnlockKey() : undefined;
    const peer = ca.issueEtcdPeer(ETCD_PEER_CN, [addrs.advertiseHost], PEER_CERT_MS);
    const local: LocalState = {
      NodeID: nodeId,
      ClusterID: clusterId,
      Role: 'manager',
      Availability: availability,
      ListenAddr: joinHostPort(addrs.listenHost, addrs.listenPort),
      AdvertiseHost: addrs.advertiseHost,
      AdvertisePort: addrs.advertisePort,
      DataPathAddr: addrs.dataPathAddr,
      PeerPort: this.opts.peerPort,
    };
    await this.files.wipe();
    await this.files.writeSecret(this.files.certs.ca, ca.certPem);
    await this.files.writeSecret(this.files.certs.nodeCert, node.certPem);
    await this.files.writeSecret(this.files.certs.nodeKey, node.keyPem);
    await this.files.writeSecret(this.files.certs.peerCert, peer.certPem);
    await this.files.writeSecret(this.files.certs.peerKey, peer.keyPem);
    await this.files.writeSecret(this.files.certs.dek, dek);
    try {
      await this.startManager(local, 'new', spec);
      const store = this.store as ClusterStore;
      const status = await store.status();
      const cluster: StoredCluster = {
        ID: clusterId,
        CreatedAt: now,
        UpdatedAt: now,
        Spec: spec,
        RootRotationInProgress: false,
        DefaultAddrPool: pool,
        SubnetSize: subnetSize,
        DataPathPort: dataPathPort,
        JoinTokens: { Worker: newJoinToken(ca.certPem), Manager: newJoinToken(ca.certPem) },
        ...(unlockKey ? { _: { unlockKey: seal(dek, unlockKey) } } : {}),
      };
      const stored: StoredNode = {
        ID: nodeId,
        CreatedAt: now,
        UpdatedAt: now,
        Spec: { Labels: {}, Role: 'manager', Availability: availability },
        Description: this.description(ca),
        Status: { State: 'ready', Addr: addrs.advertiseHost },
      };
      const manager: StoredManager = {
        memberId: status.memberId,
        peerUrl: this.peerUrl(local),
        addr: joinHostPort(addrs.advertiseHost, addrs.advertisePort),
      };
      const created = await store.txn(
        [{ key: keys.cluster, target: 'create', op: 'equal', value: 0 }],
        [
          { put: { key: keys.cluster, value: JSON.stringify(cluster) } },
          {
            put: {
              key: keys.caRoot,
              value: JSON.stringify({ cert: ca.certPem, key: seal(dek, ca.material.keyPem) }),
            },
          },
          { put: { key: keys.node(nodeId), value: JSON.stringify(stored) } },
          { put: { key: keys.manager(nodeId), value: JSON.stringify(manager) } },
        ],
      );
      if (!created.succeeded) throw new Error('the new etcd member already holds a swarm');
      if (unlockKey) await this.protectKeys(unlockKey);
      await this.openClusterApi(local);
      await this.startLiveness(spec);
      this.nodeState = 'active';
      this.error = '';
      await this.startAgent();
      this.opts.log.info('swarm initialized', { nodeId, clusterId, advertise: addrs.advertiseHost });
      return nodeId;
    } catch (err) {
      await this.dropLocal();
      throw err instanceof BerthError
        ? err
        : unavailable(`cannot initialize the swarm: ${errorMessage(err)}`);
    }
  }

  /** init --force-new-cluster on a manager: its member restarts alone from its data, the others dropped. */
  private async forceNewCluster(): Promise<string> {
    const local = this.local as LocalState;
    this.stopLiveness();
    await this.clusterApi?.close();
    this.clusterApi = undefined;
    this.events?.stop();
    this.events = undefined;
    this.store?.close();
    this.store = undefined;
    await this.opts.member.stop();
    await this.startManager(local, 'new', undefined, true);
    await this.openClusterApi(local);
    const store = this.store as unknown as ClusterStore;
    const managers = await store.range(keys.managers);
    const status = await store.status();
    for (const kv of managers.kvs) {
      const id = kv.key.slice(keys.managers.length);
      if (id !== local.NodeID) await store.delete(kv.key);
      else {
        const m = JSON.parse(kv.value) as StoredManager;
        await store.put(kv.key, JSON.stringify({ ...m, memberId: status.memberId }));
      }
    }
    const cluster = await store.get(keys.cluster);
    if (cluster) await this.startLiveness((JSON.parse(cluster.value) as StoredCluster).Spec);
    this.nodeState = 'active';
    this.error = '';
    await this.startAgent();
    return local.NodeID;
  }

  private async doLeave(force: boolean): Promise<void> {
    const local = this.local;
    if (!local || this.nodeState === 'inactive') throw unavailable(NOT_IN_SWARM);
    if (local.Role === 'manager' && !force) {
      const store = this.store;
      const members = store ? await store.memberList().catch(() => undefined) : undefined;
      const voters = members?.filter((m) => !m.isLearner).length ?? 1;
      if (voters <= 1) throw unavailable(LAST_MANAGER);
      const remaining = voters - 1;
      if (remaining < Math.floor(voters / 2) + 1) {
        throw unavailable(
          `You are attempting to leave the swarm on a node that is participating as a manager. Removing this node leaves ${remaining} managers out of ${voters}. Without a Raft quorum your swarm will be inaccessible. The only way to restore a swarm that has lost consensus is to reinitialize it with \`--force-new-cluster\`. Use \`--force\` to suppress this message.`,
        );
      }
    }
    if (local.Role === 'manager' && this.store) {
      // the others keep a swarm: this member goes from their membership first (when reachable)
      const store = this.store;
      try {
        const members = await store.memberList();
        if (members.length > 1) {
          const status = await store.status();
          await store.delete(keys.manager(local.NodeID));
          await store.memberRemove(status.memberId);
        }
      } catch (err) {
        this.opts.log.warn('could not remove this member from the swarm', { error: errorMessage(err) });
      }
    }
    await this.dropLocal();
    this.opts.log.info('left the swarm', { nodeId: local.NodeID });
  }

  private async doUpdate(version: number, update: SpecUpdate, flags: UpdateFlags): Promise<void> {
    const store = this.managerStore();
    const kv = await this.read(() => store.get(keys.cluster));
    if (!kv) throw unavailable(NO_LEADER);
    const stored = JSON.parse(kv.value) as StoredCluster;
    const spec = specFromUpdate(update);
    validateSpec(spec, stored.Spec);
    const caKv = await store.get(keys.caRoot);
    const root = caKv ? (JSON.parse(caKv.value) as StoredCa).cert : '';
    const next: StoredCluster = {
      ...stored,
      Spec: spec,
      UpdatedAt: this.now().toISOString(),
      JoinTokens: {
        Worker: flags.rotateWorkerToken ? newJoinToken(root) : stored.JoinTokens.Worker,
        Manager: flags.rotateManagerToken ? newJoinToken(root) : stored.JoinTokens.Manager,
      },
    };
    const wasLocked = stored.Spec.EncryptionConfig.AutoLockManagers;
    const locked = spec.EncryptionConfig.AutoLockManagers;
    let newKey: string | undefined;
    if (!locked) delete next._;
    else if (!wasLocked || flags.rotateManagerUnlockKey || !stored._?.unlockKey) {
      newKey = newUnlockKey();
      next._ = { ...stored._, unlockKey: seal(await this.clusterDek(), newKey) };
    }
    const res = await store.txn(
      [{ key: keys.cluster, target: 'mod', op: 'equal', value: version }],
      [{ put: { key: keys.cluster, value: JSON.stringify(next) } }],
    );
    if (!res.succeeded) throw conflict('update out of sequence');
    // this manager's keys on disk follow: sealed under the new unlock key, or plain again
    if (newKey !== undefined) await this.protectKeys(newKey);
    else if (!locked && wasLocked) await this.protectKeys(undefined);
    // the Raft settings reach etcd when the member next starts
    if (this.local) {
      this.local.Raft = raftOf(spec);
      await this.files.save(this.local);
    }
    if (spec.Dispatcher.HeartbeatPeriod !== stored.Spec.Dispatcher.HeartbeatPeriod)
      await this.startLiveness(spec);
  }

  // --- the manager's member, store and liveness ------------------------------------------------

  private async startManager(
    local: LocalState,
    state: 'new' | 'existing',
    spec?: SwarmSpec,
    forceNewCluster = false,
  ): Promise<void> {
    const raft = spec ? raftOf(spec) : (local.Raft ?? raftOf(defaultSpec()));
    local.Raft = raft;
    const peerUrl = this.peerUrl(local);
    await this.opts.member.start({
      name: local.NodeID,
      dataDir: this.files.etcdDir,
      peerUrl,
      initialCluster: [{ name: local.NodeID, peerUrl }],
      clusterState: state,
      clusterToken: local.ClusterID,
      peerTls: this.peerTls(),
      raft,
      forceNewCluster,
    });
    this.local = local;
    await this.files.save(local);
    if (!this.dek) this.dek = await this.files.readDek();
    this.store = this.opts.openStore(this.opts.member.socketPath);
    await this.startEvents(this.store);
    if (!spec) {
      const cluster = await this.store.get(keys.cluster);
      if (cluster) await this.startLiveness((JSON.parse(cluster.value) as StoredCluster).Spec);
    }
  }

  private peerUrl(local: LocalState): string {
    return `https://${joinHostPort(local.AdvertiseHost, local.PeerPort ?? this.opts.peerPort)}`;
  }

  /**
   * `P/live/<node>` under a lease of 3 × the dispatcher heartbeat, renewed every heartbeat: its
   * expiry is how the cluster learns the node is down.
   */
  private async startLiveness(spec: SwarmSpec): Promise<void> {
    this.stopLiveness();
    const store = this.store;
    const local = this.local;
    if (!store || !local) return;
    const periodMs = effectiveHeartbeatMs(spec);
    const ttl = Math.max(1, Math.ceil((3 * periodMs) / 1000));
    const lease = await store.grantLease(ttl);
    await store.put(keys.live(local.NodeID), local.AdvertiseHost, { lease: lease.id });
    const timer = setInterval(() => {
      void this.renewLiveness(ttl);
    }, periodMs);
    timer.unref();
    this.liveness = { lease, timer, periodMs };
  }

  private async renewLiveness(ttl: number): Promise<void> {
    const l = this.liveness;
    const store = this.store;
    const local = this.local;
    if (!l || !store || !local) return;
    try {
      if ((await store.keepAlive(l.lease.id)) > 0) return;
      // expired (the store was away too long): a new lease, the key again
      const lease = await store.grantLease(ttl);
      await store.put(keys.live(local.NodeID), local.AdvertiseHost, { lease: lease.id });
      if (this.liveness === l) l.lease = lease;
    } catch (err) {
      this.opts.log.debug('liveness renewal failed', { error: errorMessage(err) });
    }
  }

  /** The etcd member's peer certificate, key and the swarm's CA, as files. */
  private peerTls(): { certFile: string; keyFile: string; caFile: string } {
    const c = this.files.certs;
    return { certFile: c.peerCert, keyFile: c.peerKey, caFile: c.ca };
  }

  private stopLiveness(): void {
    if (this.liveness) clearInterval(this.liveness.timer);
    this.liveness = undefined;
  }

  /** Ends this node's part: liveness, store, member, and every file of the swarm on this disk. */
  private async dropLocal(): Promise<void> {
    await this.agent
      ?.leave()
      .catch((err: unknown) =>
        this.opts.log.warn('the agent could not clean up', { error: errorMessage(err) }),
      );
    const lease = this.liveness?.lease;
    this.stopLiveness();
    // the node's liveness goes at once (a worker's node then shows down), when the store answers
    if (lease) await this.store?.revokeLease(lease.id).catch(() => {});
    await this.stopConnections();
    await this.files.wipe();
    this.local = undefined;
    this.dek = undefined;
    this.nodeKeyPem = undefined;
    this.nodeState = 'inactive';
    this.error = '';
  }

  /**
   * Autolock on this manager's disk: the DEK and the node key sealed under the unlock key (its 32
   * bytes as an AES-256-GCM key), or, with no key, written plain again. The plain values come
   * from memory: the node is active, so it has them.
   */
  private async protectKeys(unlockKey: string | undefined): Promise<void> {
    const local = this.local;
    if (!local) return;
    const dek = await this.clusterDek();
    const nodeKey = this.nodeKeyPem ?? (await readFile(this.files.certs.nodeKey, 'utf8'));
    const kek = unlockKey ? parseUnlockKey(unlockKey) : undefined;
    if (kek) {
      await this.files.writeSecret(this.files.certs.dek, seal(kek, dek.toString('base64')));
      await this.files.writeSecret(this.files.certs.nodeKey, seal(kek, nodeKey));
      this.nodeKeyPem = nodeKey;
    } else {
      await this.files.writeSecret(this.files.certs.dek, dek);
      await this.files.writeSecret(this.files.certs.nodeKey, nodeKey);
    }
    local.Autolock = kek !== undefined;
    await this.files.save(local);
  }

  // --- the cluster API and joining ---------------------------------------------------------------

  /** A manager serves the cluster API on its ListenAddr (mutual TLS with the swarm's CA). */
  private async openClusterApi(local: LocalState): Promise<void> {
    const store = this.store as ClusterStore;
    const rootKv = await store.get(keys.caRoot);
    if (!rootKv) throw new Error('the swarm has no root CA');
    const root = JSON.parse(rootKv.value) as StoredCa;
    const listen = parseHostPort(local.ListenAddr, 'ListenAddr', 2377);
    const cert = await readFile(this.files.certs.nodeCert, 'utf8');
    const key = this.nodeKeyPem ?? (await readFile(this.files.certs.nodeKey, 'utf8'));
    const dispatcher = new Dispatcher(
      store,
      { certPem: root.cert, sealedKey: root.key },
      await this.clusterDek(),
      this.opts.log,
      this.now,
    );
    try {
      this.clusterApi = await startClusterApi({
        host: listen.host,
        port: listen.port,
        certChainPem: cert + root.cert,
        keyPem: key,
        caPem: root.cert,
        handlers: dispatcher,
        agents: new TaskDispatch(store, await this.clusterDek(), this.opts.log, this.now, () =>
          dispatcher.managers(),
        ),
        log: this.opts.log,
      });
    } catch (err) {
      throw systemError(`cannot listen on ${local.ListenAddr}: ${errorMessage(err)}`);
    }
  }

  private async doJoin(req: JoinRequest): Promise<void> {
    if (this.local && this.nodeState !== 'inactive') throw unavailable(ALREADY_IN_SWARM);
    const remotes = req.RemoteAddrs ?? [];
    if (remotes.length === 0) throw invalidParameter('at least 1 RemoteAddr is required to join');
    const token = parseJoinToken(req.JoinToken ?? '');
    if (!token) throw invalidParameter('invalid join token');
    const availability = this.availability(req.Availability);
    const addrs = await resolveAddresses(req, this.opts.interfaces);
    const pair = newKeyPair();
    const host = this.opts.describeHost();
    const call: JoinCall = {
      Token: req.JoinToken ?? '',
      CSR: createCsr(pair.privateKey, 'swarm-join'),
      Availability: availability,
      AdvertiseHost: addrs.advertiseHost,
      ListenAddr: joinHostPort(addrs.listenHost, addrs.listenPort),
      DataPathAddr: addrs.dataPathAddr,
      Description: {
        Hostname: host.hostname,
        Platform: { Architecture: process.arch === 'x64' ? 'x86_64' : process.arch, OS: 'linux' },
        Resources: { NanoCPUs: host.nanoCpus, MemoryBytes: host.memoryBytes },
        Engine: { EngineVersion: this.opts.engineVersion, Plugins: this.opts.plugins() },
        TLSInfo: { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' },
      },
    };
    // a manager token makes an etcd member too: its peer key's request goes along
    const peerPair = newKeyPair();
    call.PeerCSR = createCsr(peerPair.privateKey, ETCD_PEER_CN);
    call.PeerPort = this.opts.peerPort;
    let answer: JoinAnswer | undefined;
    let acceptedBy = '';
    let rootPem = '';
    let lastError: unknown;
    for (const remote of remotes) {
      const addr = remote.includes(':') ? remote : joinHostPort(remote, 2377);
      try {
        // pin the root to the token before trusting anything the manager says
        rootPem = await fetchRootCa(addr);
        if (caDigest(rootPem) !== token.caDigest) {
          throw invalidParameter(`remote CA does not match fingerprint. Expected: ${token.caDigest}`);
        }
        answer = await clusterCall<JoinAnswer>(addr, 'POST', '/v1/join', call, { ca: rootPem });
        acceptedBy = addr;
        break;
      } catch (err) {
        lastError = err;
        // a refusal (bad token, fingerprint) is the answer; an unreachable manager is not
        if (err instanceof BerthError && err.kind !== 'Unavailable') throw err;
      }
    }
    if (!answer)
      throw lastError instanceof BerthError
        ? lastError
        : unavailable(`cannot join: ${errorMessage(lastError)}`);
    const local: LocalState = {
      NodeID: answer.NodeID,
      ClusterID: answer.ClusterID,
      Role: answer.Role,
      Availability: availability,
      ListenAddr: joinHostPort(addrs.listenHost, addrs.listenPort),
      AdvertiseHost: addrs.advertiseHost,
      AdvertisePort: addrs.advertisePort,
      DataPathAddr: addrs.dataPathAddr,
      Managers: answer.Managers,
      HeartbeatPeriodMs: answer.HeartbeatPeriodMs,
    };
    await this.files.wipe();
    await this.files.writeSecret(this.files.certs.ca, rootPem);
    await this.files.writeSecret(this.files.certs.nodeCert, answer.Certificate);
    await this.files.writeSecret(this.files.certs.nodeKey, privateKeyPem(pair.privateKey));
    if (answer.Role === 'manager' && answer.Manager) {
      local.PeerPort = this.opts.peerPort;
      delete local.Managers;
      delete local.HeartbeatPeriodMs;
      await this.files.writeSecret(this.files.certs.peerCert, answer.Manager.PeerCertificate);
      await this.files.writeSecret(this.files.certs.peerKey, privateKeyPem(peerPair.privateKey));
      await this.files.writeSecret(this.files.certs.dek, Buffer.from(answer.Manager.DEK, 'base64'));
      await this.files.save(local);
      try {
        await this.joinAsManager(
          local,
          answer.Manager,
          acceptedBy,
          rootPem,
          answer.Certificate,
          privateKeyPem(pair.privateKey),
        );
      } catch (err) {
        await this.dropLocal();
        throw err instanceof BerthError ? err : unavailable(`cannot join as a manager: ${errorMessage(err)}`);
      }
    } else {
      await this.files.save(local);
      await this.startWorker(local);
    }
    this.nodeState = 'active';
    this.error = '';
    await this.startAgent();
    this.opts.log.info('joined a swarm', { nodeId: answer.NodeID, role: answer.Role });
  }

  /**
   * A manager join's second half: this member starts as a learner of the existing cluster, the
   * manager that admitted it promotes it once it has caught up, and then (a voter, so its store
   * reads are linearizable) it records itself among the managers and serves the cluster API.
   */
  private async joinAsManager(
    local: LocalState,
    m: NonNullable<JoinAnswer['Manager']>,
    acceptedBy: string,
    ca: string,
    cert: string,
    key: string,
  ): Promise<void> {
    const raft = raftOf(defaultSpec());
    const peerUrl = this.peerUrl(local);
    await this.opts.member.start({
      name: local.NodeID,
      dataDir: this.files.etcdDir,
      peerUrl,
      initialCluster: m.InitialCluster,
      clusterState: 'existing',
      clusterToken: local.ClusterID,
      peerTls: this.peerTls(),
      raft,
    });
    await clusterCall(acceptedBy, 'POST', '/v1/promote', { MemberID: m.MemberID }, { ca, cert, key });
    this.local = local;
    this.dek = Buffer.from(m.DEK, 'base64');
    this.store = this.opts.openStore(this.opts.member.socketPath);
    const store = this.store;
    // the promotion reaches this member through the Raft log: until it has, it still refuses
    // requests as a learner
    for (let i = 0; (await store.status()).isLearner; i++) {
      if (i >= 100) throw new Error('this member was promoted but still acts as a learner');
      await sleep(100);
    }
    await this.startEvents(store);
    const manager: StoredManager = {
      memberId: m.MemberID,
      peerUrl,
      addr: joinHostPort(local.AdvertiseHost, local.AdvertisePort),
    };
    await store.put(keys.manager(local.NodeID), JSON.stringify(manager));
    const cluster = await store.get(keys.cluster);
    if (!cluster) throw new Error('the swarm has no cluster record');
    const spec = (JSON.parse(cluster.value) as StoredCluster).Spec;
    local.Raft = raftOf(spec);
    await this.files.save(local);
    await this.startLiveness(spec);
    await this.openClusterApi(local);
  }

  /** A manager's swarm-scope events from its watch (nothing when no event bus was given). */
  private async startEvents(store: ClusterStore): Promise<void> {
    this.events?.stop();
    this.events = undefined;
    if (!this.opts.publish) return;
    const events = new ClusterEvents(store, this.opts.publish, this.opts.log);
    await events.start();
    this.events = events;
  }

  /** A worker's heartbeats to its managers, with its certificate. */
  private async startWorker(local: LocalState): Promise<void> {
    this.local = local;
    const [ca, cert, key] = await Promise.all([
      readFile(this.files.certs.ca, 'utf8'),
      readFile(this.files.certs.nodeCert, 'utf8'),
      readFile(this.files.certs.nodeKey, 'utf8'),
    ]);
    this.link?.stop();
    this.link = new WorkerLink(
      local.Managers ?? [],
      local.HeartbeatPeriodMs ?? 5000,
      { ca, cert, key },
      this.opts.log,
      (managers) => {
        if (this.local !== local) return;
        if (JSON.stringify(managers) === JSON.stringify(local.Managers)) return;
        local.Managers = managers;
        void this.files.save(local).catch(() => {});
      },
    );
    this.link.start();
  }

  // --- helpers -----------------------------------------------------------------------------------

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.busy.then(fn, fn);
    this.busy = run.catch(() => {});
    return run;
  }

  private managerStore(): ClusterStore {
    if (!this.local || this.nodeState === 'inactive') throw unavailable(NOT_A_MANAGER);
    if (this.local.Role !== 'manager') throw unavailable(WORKER_NOT_MANAGER);
    if (this.nodeState === 'locked') {
      throw unavailable(
        'Swarm is encrypted and needs to be unlocked before it can be used. Please use "docker swarm unlock" to unlock it.',
      );
    }
    if (!this.store) throw unavailable(this.error || NO_LEADER);
    return this.store;
  }

  /** A store read; a store that cannot answer is the swarm without a leader (dockerd's 503). */
  private async read<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BerthError) throw err;
      this.opts.log.warn('cluster store read failed', { error: errorMessage(err) });
      throw unavailable(NO_LEADER);
    }
  }

  private async clusterDek(): Promise<Buffer> {
    if (!this.dek) this.dek = await this.files.readDek();
    return this.dek;
  }

  private async clusterInfo(kv: KeyValue): Promise<ClusterInfo> {
    const c = JSON.parse(kv.value) as StoredCluster;
    const caKv = await this.store?.get(keys.caRoot);
    const root = caKv ? (JSON.parse(caKv.value) as StoredCa) : undefined;
    const tls = root
      ? this.tlsInfoOf(root)
      : { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' };
    return {
      ID: c.ID,
      Version: { Index: kv.modRevision },
      CreatedAt: c.CreatedAt,
      UpdatedAt: c.UpdatedAt,
      Spec: c.Spec,
      TLSInfo: tls,
      RootRotationInProgress: c.RootRotationInProgress,
      DefaultAddrPool: c.DefaultAddrPool,
      SubnetSize: c.SubnetSize,
      DataPathPort: c.DataPathPort,
    };
  }

  private tlsInfoOf(root: StoredCa) {
    const dek = this.dek;
    if (!dek) return { TrustRoot: root.cert, CertIssuerSubject: '', CertIssuerPublicKey: '' };
    return new RootCa({ certPem: root.cert, keyPem: unseal(dek, root.key) }).tlsInfo();
  }

  private description(ca: RootCa): StoredNode['Description'] {
    const host = this.opts.describeHost();
    return {
      Hostname: host.hostname,
      Platform: { Architecture: process.arch === 'x64' ? 'x86_64' : process.arch, OS: 'linux' },
      Resources: { NanoCPUs: host.nanoCpus, MemoryBytes: host.memoryBytes },
      Engine: { EngineVersion: this.opts.engineVersion, Plugins: this.opts.plugins() },
      TLSInfo: ca.tlsInfo(),
    };
  }

  private availability(value: string | undefined): NodeAvailability {
    if (value === undefined || value === '') return 'active';
    if (value === 'active' || value === 'pause' || value === 'drain') return value;
    // dockerd's words (its %q of the value)
    throw invalidParameter(`invalid Availability: ${JSON.stringify(value)}`);
  }

  /** The etcd member ID of the current Raft leader, as this member sees it. */
  private async leaderMember(): Promise<string> {
    return (await (this.store as ClusterStore).status()).leader;
  }

  private nodeView(
    kv: KeyValue,
    alive: Set<string>,
    managers: Map<string, StoredManager>,
    leader: string,
  ): SwarmNode {
    const n = JSON.parse(kv.value) as StoredNode;
    const up = alive.has(n.ID);
    const view: SwarmNode = {
      ...n,
      Version: { Index: kv.modRevision },
      Status: { ...n.Status, State: up ? 'ready' : 'down' },
    };
    const m = managers.get(n.ID);
    if (m) {
      view.ManagerStatus = {
        ...(m.memberId === leader ? { Leader: true } : {}),
        Reachability: up ? 'reachable' : 'unreachable',
        Addr: m.addr,
      };
    }
    return view;
  }
}
