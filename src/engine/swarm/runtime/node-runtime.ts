import { readFile } from 'node:fs/promises';
import { errorMessage, systemError } from '../../../common/errors.js';
import { joinHostPort, parseHostPort } from '../addresses.js';
import type { TrustState } from '../ca/ca-state.js';
import { loadCaState, trustState } from '../ca/ca-state.js';
import { chainsTo } from '../ca/cert-info.js';
import { TaskDispatch } from '../cluster-api/assignments.js';
import type { ManagerAddress } from '../cluster-api/protocol.js';
import { type ClusterApiServer, startClusterApi } from '../cluster-api/server.js';
import { ClusterEvents } from '../cluster-events.js';
import { Dispatcher } from '../dispatcher.js';
import { RAFT_TICK_MS } from '../etcd/etcd-args.js';
import { keys } from '../keys.js';
import type { LocalState } from '../local-state.js';
import { LogBroker } from '../logs/log-broker.js';
import { LogRelay } from '../logs/log-relay.js';
import type { SwarmServiceOptions } from '../options.js';
import type { StoredCluster } from '../records.js';
import type { ManagerAccess, NodeAccess, RoleLoops } from '../role-loops.js';
import { ObjectEvents } from '../services/object-events.js';
import type { SwarmSession } from '../session.js';
import { defaultSpec, effectiveHeartbeatMs, effectiveRaft } from '../spec.js';
import type { ClusterStore } from '../store/cluster-store.js';
import type { NodeRole, SwarmSpec } from '../swarm.types.js';
import { WorkerLink } from '../worker-link.js';
import { CertRenewal } from './cert-renewal.js';
import { LeaderWatch } from './leader-watch.js';
import { OwnLiveness } from './liveness.js';
import { RoleWatch } from './role-watch.js';
import { RootWatch } from './root-watch.js';

/** What the runtime asks of the membership rooms (SwarmService sets them). */
export interface RuntimeHooks {
  /** etcd says the node's role is now `role`: promote or demote this node. */
  roleChanged(role: NodeRole): void;
  /** Get and install a new node certificate (CertRenewal's schedule). */
  renew(): Promise<void>;
  /** The swarm's roots differ from what this node trusts or holds (a root rotation): follow them. */
  rootsChanged(trust: TrustState): void;
}

/**
 * What runs while the node is in a swarm. On a manager: its etcd member (through
 * `opts.member`), the store on it, the swarm-scope events from its watch, its own liveness key
 * and the cluster API it serves. On a worker: the link of heartbeats to the managers. On both,
 * the other rooms' loops (RoleLoops). The membership rooms start and end these; nothing here
 * decides who the node is.
 */
export class NodeRuntime {
  private liveness?: OwnLiveness;
  private clusterApi?: ClusterApiServer;
  private link?: WorkerLink;
  private events?: { stop(): void; start(): Promise<void> }[];
  /** The other rooms' loops (the orchestrator, the agent); a part may be added once the engine has what it needs. */
  private readonly loops: RoleLoops[] = [];
  /** What the loops were started with, while they run (a part added late starts with it). */
  private started?: { manager?: ManagerAccess; node: NodeAccess };
  /** The node's TLS material as the loops see it (renewal replaces it). */
  private tls?: { ca: string; cert: string; key: string };
  private rootPem = '';
  private roleWatch?: RoleWatch;
  private renewal?: CertRenewal;
  private rootWatch?: RootWatch;
  private leaderWatch?: LeaderWatch;
  hooks: RuntimeHooks = { roleChanged: () => {}, renew: async () => {}, rootsChanged: () => {} };
  /** This manager's log subscriptions and the agents' streams that carry them (service logs). */
  readonly logBroker = new LogBroker();

  constructor(
    private readonly opts: SwarmServiceOptions,
    private readonly session: SwarmSession,
  ) {
    if (opts.loops) this.loops.push(opts.loops);
  }

  private get files() {
    return this.session.files;
  }

  /**
   * Starts this manager's member (`state` new: its own cluster or data; existing: joining one)
   * and opens the store on it; with no `spec` given, the liveness starts from the stored one.
   */
  async startManager(
    local: LocalState,
    state: 'new' | 'existing',
    spec?: SwarmSpec,
    forceNewCluster = false,
  ): Promise<void> {
    const raft = spec ? effectiveRaft(spec) : (local.Raft ?? effectiveRaft(defaultSpec()));
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
    this.session.local = local;
    await this.files.save(local);
    if (!this.session.dek) this.session.dek = await this.files.readDek();
    const store = this.openStore();
    await this.startEvents(store);
    if (!spec) {
      const cluster = await store.get(keys.cluster);
      if (cluster) await this.startLiveness((JSON.parse(cluster.value) as StoredCluster).Spec);
    }
  }

  /** A store client on this manager's member, and the watch on its leader (a lost quorum). */
  openStore(): ClusterStore {
    const store = this.opts.openStore(this.opts.member.socketPath);
    this.session.store = store;
    this.leaderWatch?.stop();
    // an election takes about one to two election timeouts: three of them (at least 3 s) is a lost quorum
    const electionMs = (this.session.local?.Raft?.ElectionTick ?? 10) * RAFT_TICK_MS;
    const watch = new LeaderWatch(store, Math.max(3000, 3 * electionMs));
    watch.start();
    this.leaderWatch = watch;
    this.session.leaderLost = () => watch.lost;
    return store;
  }

  peerUrl(local: LocalState): string {
    return `https://${joinHostPort(local.AdvertiseHost, local.PeerPort ?? this.opts.peerPort)}`;
  }

  /** The etcd member's peer certificate, key and the swarm's CA, as files. */
  peerTls(): { certFile: string; keyFile: string; caFile: string } {
    const c = this.files.certs;
    return { certFile: c.peerCert, keyFile: c.peerKey, caFile: c.ca };
  }

  /** A manager's swarm-scope events from its watch (nothing when no event bus was given). */
  async startEvents(store: ClusterStore): Promise<void> {
    this.stopEvents();
    if (!this.opts.publish) return;
    // nodes (cluster-events.ts); services, secrets and configs (services/object-events.ts)
    const watches = [
      new ClusterEvents(store, this.opts.publish, this.opts.log),
      new ObjectEvents(store, this.opts.publish, this.opts.log),
    ];
    this.events = watches;
    await Promise.all(watches.map((w) => w.start()));
  }

  private stopEvents(): void {
    for (const w of this.events ?? []) w.stop();
    this.events = undefined;
  }

  /** `P/live/<node>` kept alive by this manager itself, every heartbeat period of `spec`. */
  async startLiveness(spec: SwarmSpec): Promise<void> {
    this.stopLiveness();
    const store = this.session.store;
    const local = this.session.local;
    if (!store || !local) return;
    const liveness = new OwnLiveness(store, local.NodeID, local.AdvertiseHost, this.opts.log);
    const periodMs = effectiveHeartbeatMs(spec);
    await liveness.start(periodMs);
    this.liveness = liveness;
    const watch = new RoleWatch(store, local.NodeID, () => this.hooks.roleChanged('worker'));
    watch.start(periodMs);
    this.roleWatch = watch;
    const roots = new RootWatch(
      store,
      (trust) => this.followTrust(trust),
      this.opts.log,
      this.opts.now ?? (() => new Date()),
    );
    roots.start(periodMs);
    this.rootWatch = roots;
  }

  stopLiveness(): void {
    this.liveness?.stop();
    this.liveness = undefined;
    this.roleWatch?.stop();
    this.roleWatch = undefined;
    this.rootWatch?.stop();
    this.rootWatch = undefined;
  }

  /** A manager looks at the roots now (a rotation it just started). */
  checkRoots(): void {
    void this.rootWatch?.check();
  }

  /**
   * The swarm's roots as a manager read them or a heartbeat answer said: the cluster API trusts
   * them at once; a node whose trust or certificate differs follows (membership, in its queue).
   */
  private followTrust(trust: TrustState): void {
    this.clusterApi?.useTrust(trust.TrustRoots);
    const tls = this.tls;
    if (!tls) return;
    if (tls.ca !== trust.TrustRoots || !chainsTo(tls.cert, trust.Issuer)) this.hooks.rootsChanged(trust);
  }

  /** The roots this node trusts from now on: its heartbeats, its loops and its cluster API. */
  useTrust(roots: string): void {
    if (this.tls) this.tls = { ...this.tls, ca: roots };
    if (this.tls) this.link?.useTls(this.tls);
    this.rootPem = roots;
    this.clusterApi?.useTrust(roots);
  }

  /** Where this node reaches the managers: a worker's as heard, a manager's others as last read. */
  knownManagers(): ManagerAddress[] {
    const local = this.session.local;
    if (local?.Role === 'manager') return this.roleWatch?.managers ?? [];
    return this.link?.addresses ?? local?.Managers ?? [];
  }

  /** A renewed certificate and key: the cluster API, the heartbeats and the loops use them from now on. */
  useCertificate(cert: string, key: string): void {
    const ca = this.tls?.ca ?? this.rootPem;
    this.tls = { ca, cert, key };
    this.link?.useTls(this.tls);
    if (this.rootPem) this.clusterApi?.useCertificate(cert + this.rootPem, key);
  }

  /** Renewal of the node's certificate at 50–80% of its validity, while the node is active. */
  startRenewal(): void {
    this.renewal?.stop();
    this.renewal = new CertRenewal(
      () => this.tls?.cert ?? '',
      () => this.hooks.renew(),
      this.opts.log,
    );
    this.renewal.start();
  }

  /** The next renewal in `ms` (a certificate whose role is no longer the node's). */
  renewSoon(ms: number): void {
    this.renewal?.soon(ms);
  }

  stopRenewal(): void {
    this.renewal?.stop();
    this.renewal = undefined;
  }

  /** A worker's heartbeats stop (it is becoming a manager). */
  stopLink(): void {
    this.link?.stop();
    this.link = undefined;
  }

  /** A manager serves the cluster API on its ListenAddr (mutual TLS with the swarm's CA). */
  async openClusterApi(local: LocalState): Promise<void> {
    const store = this.session.store as ClusterStore;
    const trust = trustState(await loadCaState(store));
    this.rootPem = trust.TrustRoots;
    const listen = parseHostPort(local.ListenAddr, 'ListenAddr', 2377);
    const cert = await readFile(this.files.certs.nodeCert, 'utf8');
    const key = this.session.nodeKeyPem ?? (await readFile(this.files.certs.nodeKey, 'utf8'));
    const now = this.opts.now ?? (() => new Date());
    const dek = await this.session.clusterDek();
    const dispatcher = new Dispatcher(store, dek, this.opts.log, now);
    try {
      this.clusterApi = await startClusterApi({
        host: listen.host,
        port: listen.port,
        certChainPem: cert + trust.TrustRoots,
        keyPem: key,
        caPem: trust.TrustRoots,
        handlers: dispatcher,
        agents: new TaskDispatch(store, dek, this.opts.log, now, () => dispatcher.managers(), this.logBroker),
        log: this.opts.log,
      });
    } catch (err) {
      throw systemError(`cannot listen on ${local.ListenAddr}: ${errorMessage(err)}`);
    }
    // log subscriptions for the nodes whose stream is on another manager go through etcd
    const self = joinHostPort(local.AdvertiseHost, local.AdvertisePort);
    this.logBroker.useRelay(new LogRelay(store, self, this.opts.log));
  }

  /** A worker's heartbeats to its managers, with its certificate. */
  async startWorker(local: LocalState): Promise<void> {
    this.session.local = local;
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
      (answer) => {
        if (this.session.local !== local) return;
        if (answer.Role && answer.Role !== local.Role) this.hooks.roleChanged(answer.Role);
        if (answer.TrustRoots && answer.Issuer)
          this.followTrust({ TrustRoots: answer.TrustRoots, Issuer: answer.Issuer });
        const managers = answer.Managers;
        if (managers.length === 0 || JSON.stringify(managers) === JSON.stringify(local.Managers)) return;
        local.Managers = managers;
        void this.files.save(local).catch(() => {});
      },
    );
    this.link.start();
  }

  /**
   * The other rooms' loops for the node's role, once it is active: the manager's (orchestrator)
   * on a manager with its store, every node's (agent) everywhere.
   */
  async startLoops(): Promise<void> {
    const { local, store } = this.session;
    if (!local || this.session.nodeState !== 'active') return;
    const files = this.files;
    const [ca, cert, key] = await Promise.all([
      readFile(files.certs.ca, 'utf8'),
      readFile(files.certs.nodeCert, 'utf8'),
      this.session.nodeKeyPem ?? readFile(files.certs.nodeKey, 'utf8'),
    ]);
    this.tls = { ca, cert, key };
    const log = this.opts.log;
    const manager: ManagerAccess | undefined =
      local.Role === 'manager' && store
        ? {
            nodeId: local.NodeID,
            addr: joinHostPort(local.AdvertiseHost, local.AdvertisePort),
            store,
            dek: await this.session.clusterDek(),
            log,
          }
        : undefined;
    const self = { NodeID: local.NodeID, Addr: joinHostPort(local.AdvertiseHost, local.AdvertisePort) };
    const node: NodeAccess = {
      nodeId: local.NodeID,
      role: local.Role,
      // a manager's agent talks to its own cluster API; a worker's to the managers it heard of
      managers: () => (local.Role === 'manager' ? [self] : (local.Managers ?? [])),
      tls: () => this.tls ?? { ca, cert, key },
      log,
    };
    this.started = { manager, node };
    for (const part of this.loops) await this.startPart(part, manager, node);
    this.startRenewal();
  }

  private async startPart(
    part: RoleLoops,
    manager: ManagerAccess | undefined,
    node: NodeAccess,
  ): Promise<void> {
    try {
      if (manager) await part.startManager(manager);
      await part.startNode(node);
    } catch (err) {
      this.opts.log.error('cannot start a swarm loop', { error: errorMessage(err) });
    }
  }

  /** A part of the loops that needs the engine's other services (the agent): started at once if the node is active. */
  async addLoops(part: RoleLoops): Promise<void> {
    this.loops.push(part);
    if (this.started) await this.startPart(part, this.started.manager, this.started.node);
  }

  async stopLoops(): Promise<void> {
    this.stopRenewal();
    this.started = undefined;
    for (const part of [...this.loops].reverse()) await part.stop();
  }

  /** The engine stops: the liveness lease is left to expire, the member ends (it restarts with the engine). */
  async close(): Promise<void> {
    this.stopLiveness();
    await this.stopConnections();
  }

  /** Ends the link to the managers, the cluster API, the watch, the store and a manager's member. */
  async stopConnections(): Promise<void> {
    await this.stopLoops();
    this.link?.stop();
    this.link = undefined;
    await this.closeManagerParts();
    if (this.session.local?.Role === 'manager') await this.opts.member.stop();
  }

  /** The manager's parts that do not outlive a member restart: cluster API, events, store. */
  async closeManagerParts(): Promise<void> {
    await this.clusterApi?.close();
    this.clusterApi = undefined;
    this.logBroker.stopRelay();
    this.stopEvents();
    this.leaderWatch?.stop();
    this.leaderWatch = undefined;
    this.session.leaderLost = () => false;
    this.session.store?.close();
    this.session.store = undefined;
  }

  /** Ends this node's part: liveness, store, member, and every file of the swarm on this disk. */
  async dropLocal(): Promise<void> {
    // what the loops left on this node (the agent's task containers and files) goes first
    for (const part of this.loops) {
      await part
        .leave?.()
        .catch((err: unknown) =>
          this.opts.log.warn('a swarm loop could not clean up', { error: errorMessage(err) }),
        );
    }
    const liveness = this.liveness;
    this.stopLiveness();
    // the node's liveness goes at once (a worker's node then shows down), when the store answers
    await liveness?.revoke();
    await this.stopConnections();
    await this.files.wipe();
    this.session.clear();
  }
}
