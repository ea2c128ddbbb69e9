import { isIP } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage, forbidden, invalidParameter, unavailable } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { joinHostPort } from './addresses.js';
import { type CaState, type CertSigner, loadCaState, signerFor, trustState } from './ca/ca-state.js';
import { csrPublicKey } from './ca/csr.js';
import type { CfsslTransport } from './ca/external-ca.js';
import { type TlsInfo, tlsInfoOf } from './ca/root-ca.js';
import { caDigest, newSwarmId, parseJoinToken, tokenMatches } from './ca/tokens.js';
import type {
  ClusterApiHandlers,
  HeartbeatAnswer,
  JoinAnswer,
  JoinCall,
  ManagerAddress,
  ManagerCall,
  ManagerJoinAnswer,
  RenewAnswer,
  RenewCall,
} from './cluster-api/protocol.js';
import { keys } from './keys.js';
import { PEER_CERT_MS, type StoredCluster, type StoredManager, type StoredNode } from './records.js';
import { effectiveCertExpiryMs, effectiveHeartbeatMs } from './spec.js';
import type { ClusterStore } from './store/cluster-store.js';
import type { SwarmNode, SwarmSpec } from './swarm.types.js';

/**
 * A manager's side of the cluster API: it admits joining nodes (token, CSR, a Node in etcd, a
 * certificate) and keeps each node's liveness key alive on its heartbeats, under one lease per
 * node of 3 × the heartbeat period.
 */

type NodeRecord = Pick<SwarmNode, 'ID' | 'Spec'>;

export const BAD_TOKEN = 'A valid join token is necessary to join this cluster';

export class Dispatcher implements ClusterApiHandlers {
  private readonly leases = new Map<string, string>();

  constructor(
    private readonly store: ClusterStore,
    private readonly dek: Buffer,
    private readonly log: Logger,
    private readonly now: () => Date,
    /** How an external CA is asked (a fake in unit tests). */
    private readonly cfssl?: CfsslTransport,
  ) {}

  /** What signs now; a root without key and without external CA, or an external CA's failure, is a 503. */
  private signer(state: CaState, cluster: StoredCluster): CertSigner {
    try {
      return signerFor(state, this.dek, cluster.Spec.CAConfig.ExternalCAs, this.cfssl);
    } catch (err) {
      throw unavailable(errorMessage(err));
    }
  }

  /** The current root (a joining node pins it to its token's digest). */
  async rootCa(): Promise<string> {
    return (await loadCaState(this.store)).root.cert;
  }

  async join(call: JoinCall): Promise<JoinAnswer> {
    const token = parseJoinToken(call.Token);
    const cluster = await this.cluster();
    const caState = await loadCaState(this.store);
    if (!token || token.caDigest !== caDigest(caState.root.cert)) throw invalidParameter(BAD_TOKEN);
    const role = tokenMatches(call.Token, cluster.JoinTokens.Worker)
      ? 'worker'
      : tokenMatches(call.Token, cluster.JoinTokens.Manager)
        ? 'manager'
        : undefined;
    if (!role) throw invalidParameter(BAD_TOKEN);
    if (role === 'manager' && (!call.PeerCSR || !call.PeerPort)) {
      throw invalidParameter('a manager join needs an etcd peer certificate request and port');
    }
    let publicKey: ReturnType<typeof csrPublicKey>;
    try {
      publicKey = csrPublicKey(call.CSR);
    } catch (err) {
      throw invalidParameter(`invalid certificate request: ${errorMessage(err)}`);
    }
    if (call.DataPathAddr && !isIP(call.DataPathAddr)) {
      throw invalidParameter(`invalid DataPathAddr ${JSON.stringify(call.DataPathAddr)}: not an IP address`);
    }
    const availability = call.Availability || 'active';
    if (availability !== 'active' && availability !== 'pause' && availability !== 'drain') {
      throw invalidParameter('invalid Availability');
    }
    const nodeId = newSwarmId();
    const ca = this.signer(caState, cluster);
    const trust = trustState(caState);
    const expiryMs = effectiveCertExpiryMs(cluster.Spec);
    const cert = await signed(
      ca.issueNode({ pem: call.CSR, key: publicKey }, nodeId, role, cluster.ID, expiryMs, this.now()),
    );
    const now = this.now().toISOString();
    const node = {
      ID: nodeId,
      CreatedAt: now,
      UpdatedAt: now,
      Spec: { Labels: {}, Role: role, Availability: availability },
      Description: { ...call.Description, TLSInfo: nodeTlsInfo(trust.TrustRoots, ca) },
      Status: { State: 'ready', Addr: call.AdvertiseHost },
      _: { dataPathAddr: call.DataPathAddr || call.AdvertiseHost },
    } satisfies StoredNode;
    const created = await this.store.txn(
      [{ key: keys.node(nodeId), target: 'create', op: 'equal', value: 0 }],
      [{ put: { key: keys.node(nodeId), value: JSON.stringify(node) } }],
    );
    if (!created.succeeded) throw unavailable('node ID collision; try again');
    let manager: ManagerJoinAnswer | undefined;
    if (role === 'manager') {
      try {
        manager = await this.addMember(
          nodeId,
          call.PeerCSR ?? '',
          call.AdvertiseHost,
          call.PeerPort ?? 2380,
          ca,
        );
      } catch (err) {
        await this.store.delete(keys.node(nodeId)).catch(() => {});
        throw err;
      }
    }
    await this.beat(nodeId, cluster.Spec);
    this.log.info('node joined', { nodeId, role, addr: call.AdvertiseHost });
    return {
      NodeID: nodeId,
      ClusterID: cluster.ID,
      Role: role,
      Certificate: cert,
      RootCA: trust.TrustRoots,
      Managers: await this.managers(),
      HeartbeatPeriodMs: periodMs(cluster.Spec),
      ...(manager ? { Manager: manager } : {}),
    };
  }

  /**
   * A joining manager's etcd member, added as a learner at its advertise address (the store
   * retries etcd's `unhealthy cluster` right after another change), with its peer certificate.
   */
  private async addMember(
    nodeId: string,
    peerCsr: string,
    advertiseHost: string,
    peerPort: number,
    ca: CertSigner,
  ): Promise<ManagerJoinAnswer> {
    let peerKey: ReturnType<typeof csrPublicKey>;
    try {
      peerKey = csrPublicKey(peerCsr);
    } catch (err) {
      throw invalidParameter(`invalid peer certificate request: ${errorMessage(err)}`);
    }
    const peerUrl = `https://${joinHostPort(advertiseHost, peerPort)}`;
    const peer = await signed(
      ca.issueEtcdPeer({ pem: peerCsr, key: peerKey }, [advertiseHost], PEER_CERT_MS, this.now()),
    );
    // a learner left by an earlier attempt that never started would refuse the same peer URL
    for (const m of await this.store.memberList()) {
      if (m.isLearner && m.peerUrls.includes(peerUrl)) await this.store.memberRemove(m.id);
    }
    const added = await this.store.memberAdd([peerUrl], true);
    const initialCluster = added.members
      .map((m) => ({ name: m.id === added.member.id ? nodeId : m.name, peerUrl: m.peerUrls[0] ?? '' }))
      .filter((m) => m.name !== '' && m.peerUrl !== '');
    return {
      MemberID: added.member.id,
      InitialCluster: initialCluster,
      PeerCertificate: peer,
      DEK: this.dek.toString('base64'),
    };
  }

  /** Promotes a joining manager's learner once etcd says it has caught up (retried up to 20 s). */
  async promote(nodeId: string, memberId: string): Promise<void> {
    const kv = await this.store.get(keys.node(nodeId));
    const role = kv ? (JSON.parse(kv.value) as NodeRecord).Spec.Role : undefined;
    if (role !== 'manager') throw forbidden(`node ${nodeId} is not a manager`);
    const members = await this.store.memberList();
    const member = members.find((m) => m.id === memberId);
    if (!member) throw invalidParameter(`member ${memberId} is not in the cluster`);
    if (!member.isLearner) return;
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await this.store.memberPromote(memberId);
        this.log.info('manager promoted to a voting member', { nodeId, memberId });
        return;
      } catch (err) {
        const message = errorMessage(err);
        if (!message.includes('in sync with leader') || Date.now() > deadline) throw unavailable(message);
        await sleep(200);
      }
    }
  }

  async heartbeat(nodeId: string): Promise<HeartbeatAnswer> {
    const cluster = await this.cluster();
    const node = await this.node(nodeId);
    await this.beat(nodeId, cluster.Spec);
    const managers = await this.managers();
    return {
      HeartbeatPeriodMs: periodMs(cluster.Spec),
      Managers: managers,
      Role: node.Spec.Role,
      Member: managers.some((m) => m.NodeID === nodeId),
      ...trustState(await loadCaState(this.store)),
    };
  }

  /**
   * A node's new certificate: the CSR's key, `OU=swarm-<role>` with the role etcd holds now
   * (so a promotion or demotion changes it), valid NodeCertExpiry.
   */
  async renew(nodeId: string, call: RenewCall): Promise<RenewAnswer> {
    const cluster = await this.cluster();
    const node = await this.node(nodeId);
    let publicKey: ReturnType<typeof csrPublicKey>;
    let peerKey: ReturnType<typeof csrPublicKey> | undefined;
    try {
      publicKey = csrPublicKey(call.CSR);
      if (call.PeerCSR) peerKey = csrPublicKey(call.PeerCSR);
    } catch (err) {
      throw invalidParameter(`invalid certificate request: ${errorMessage(err)}`);
    }
    const role = node.Spec.Role;
    const caState = await loadCaState(this.store);
    const ca = this.signer(caState, cluster);
    const cert = await signed(
      ca.issueNode(
        { pem: call.CSR, key: publicKey },
        nodeId,
        role,
        cluster.ID,
        effectiveCertExpiryMs(cluster.Spec),
        this.now(),
      ),
    );
    // a manager's etcd peer certificate follows its node certificate's root (a rotation)
    let peerCertificate: string | undefined;
    const member = await this.store.get(keys.manager(nodeId));
    if (peerKey && role === 'manager' && member) {
      const host = peerHost((JSON.parse(member.value) as StoredManager).peerUrl);
      peerCertificate = await signed(
        ca.issueEtcdPeer({ pem: call.PeerCSR ?? '', key: peerKey }, [host], PEER_CERT_MS, this.now()),
      );
    }
    const trust = trustState(caState);
    const trustRoot = call.TrustRoot?.includes(caState.root.cert) ? call.TrustRoot : trust.TrustRoots;
    await this.recordTls(nodeId, nodeTlsInfo(trustRoot, ca));
    this.log.info('node certificate renewed', { nodeId, role });
    return {
      Certificate: cert,
      Role: role,
      ...trust,
      ...(peerCertificate ? { PeerCertificate: peerCertificate } : {}),
    };
  }

  /** The node's Description.TLSInfo as its renewal left it (what `docker swarm ca --rotate` watches). */
  private async recordTls(nodeId: string, tls: TlsInfo): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const kv = await this.store.get(keys.node(nodeId));
      if (!kv) return;
      const node = JSON.parse(kv.value) as StoredNode;
      const now = node.Description.TLSInfo;
      if (
        now?.TrustRoot === tls.TrustRoot &&
        now.CertIssuerPublicKey === tls.CertIssuerPublicKey &&
        now.CertIssuerSubject === tls.CertIssuerSubject
      )
        return;
      node.Description = { ...node.Description, TLSInfo: tls };
      const res = await this.store.txn(
        [{ key: kv.key, target: 'mod', op: 'equal', value: kv.modRevision }],
        [{ put: { key: kv.key, value: JSON.stringify(node) } }],
      );
      if (res.succeeded) return;
    }
  }

  /** A promoted node's member: a learner at its advertise address, as a manager join adds one. */
  async addManager(nodeId: string, call: ManagerCall): Promise<ManagerJoinAnswer> {
    const node = await this.node(nodeId);
    if (node.Spec.Role !== 'manager') throw forbidden(`node ${nodeId} is not a manager`);
    if (await this.store.get(keys.manager(nodeId))) {
      throw invalidParameter(`node ${nodeId} is already a member of the raft cluster`);
    }
    if (!call.AdvertiseHost || !Number.isInteger(call.PeerPort) || call.PeerPort <= 0) {
      throw invalidParameter('a manager needs its advertise address and etcd peer port');
    }
    const ca = this.signer(await loadCaState(this.store), await this.cluster());
    return this.addMember(nodeId, call.PeerCSR, call.AdvertiseHost, call.PeerPort, ca);
  }

  /** The node's record; a node that is not in etcd (never joined, or removed) gets nothing. */
  private async node(nodeId: string): Promise<NodeRecord> {
    const kv = await this.store.get(keys.node(nodeId));
    if (!kv) throw forbidden(`node ${nodeId} is not a member of this swarm`);
    return JSON.parse(kv.value) as NodeRecord;
  }

  private async beat(nodeId: string, spec: SwarmSpec): Promise<void> {
    const ttl = Math.max(1, Math.ceil((3 * periodMs(spec)) / 1000));
    const lease = this.leases.get(nodeId);
    if (lease && (await this.store.keepAlive(lease)) > 0) return;
    const fresh = await this.store.grantLease(ttl);
    await this.store.put(keys.live(nodeId), 'up', { lease: fresh.id });
    this.leases.set(nodeId, fresh.id);
  }

  private async cluster(): Promise<StoredCluster> {
    const kv = await this.store.get(keys.cluster);
    if (!kv) throw unavailable('the swarm has no cluster record');
    return JSON.parse(kv.value) as StoredCluster;
  }

  /** The managers' cluster API addresses (`P/managers/`). */
  async managers(): Promise<ManagerAddress[]> {
    const list = await this.store.range(keys.managers);
    return list.kvs.map((kv) => ({
      NodeID: kv.key.slice(keys.managers.length),
      Addr: (JSON.parse(kv.value) as StoredManager).addr,
    }));
  }
}

/** A node's TLSInfo: the roots it trusts, the root that issued its certificate. */
function nodeTlsInfo(trustRoots: string, ca: CertSigner): TlsInfo {
  const issuer = tlsInfoOf(ca.rootPem);
  return { ...issuer, TrustRoot: trustRoots };
}

/** The host of an etcd peer URL (`https://host:port`, IPv6 in brackets). */
function peerHost(peerUrl: string): string {
  return new URL(peerUrl).hostname.replace(/^\[|\]$/g, '');
}

/** A certificate from the signer; an external CA's refusal or silence is a 503 with its words. */
async function signed(pending: Promise<string>): Promise<string> {
  try {
    return await pending;
  } catch (err) {
    throw unavailable(errorMessage(err));
  }
}

export function periodMs(spec: SwarmSpec): number {
  return effectiveHeartbeatMs(spec);
}
