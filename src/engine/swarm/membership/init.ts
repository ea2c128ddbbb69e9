import { isIP } from 'node:net';
import { BerthError, errorMessage, invalidParameter, unavailable } from '../../../common/errors.js';
import { joinHostPort, resolveAddresses } from '../addresses.js';
import { initialRoot, type NewRoot, signerFor } from '../ca/ca-state.js';
import { newKeyPair, privateKeyPem } from '../ca/certificates.js';
import { createCsr } from '../ca/csr.js';
import { tlsInfoOf } from '../ca/root-ca.js';
import { newJoinToken, newSwarmId, newUnlockKey } from '../ca/tokens.js';
import { ETCD_PEER_CN } from '../etcd/etcd-args.js';
import { keys } from '../keys.js';
import type { LocalState } from '../local-state.js';
import { ALREADY_IN_SWARM } from '../messages.js';
import { SwarmNetworks } from '../networks/swarm-networks.js';
import { describeNode, parseAvailability } from '../nodes/node-description.js';
import {
  PEER_CERT_MS,
  type StoredCa,
  type StoredCluster,
  type StoredManager,
  type StoredNode,
} from '../records.js';
import { newDek, seal } from '../seal.js';
import { defaultSpec, effectiveCertExpiryMs, mergeSpec, validateSpec } from '../spec.js';
import type { ClusterStore } from '../store/cluster-store.js';
import type { InitRequest } from '../swarm.types.js';
import type { SwarmContext } from '../swarm-context.js';
import { protectKeys } from './autolock.js';

/**
 * POST /swarm/init: a new swarm with this node its one manager (a root CA, a one-member etcd,
 * the cluster's records), or, with ForceNewCluster on a manager, its member alone again.
 */
export async function initSwarm(ctx: SwarmContext, req: InitRequest): Promise<string> {
  const { session, runtime, opts } = ctx;
  if (session.local && session.nodeState !== 'inactive') {
    if (req.ForceNewCluster && session.local.Role === 'manager') return forceNewCluster(ctx);
    throw unavailable(ALREADY_IN_SWARM);
  }
  const addrs = await resolveAddresses(req, opts.interfaces);
  const dataPathPort = req.DataPathPort || 4789;
  if (dataPathPort < 1024 || dataPathPort > 49151) {
    throw invalidParameter(`data path port ${dataPathPort} is out of range (1024-49151)`);
  }
  const pool = req.DefaultAddrPool && req.DefaultAddrPool.length > 0 ? req.DefaultAddrPool : ['10.0.0.0/8'];
  const subnetSize = req.SubnetSize || 24;
  validatePool(pool, subnetSize);
  const availability = parseAvailability(req.Availability);
  const spec = mergeSpec(defaultSpec(), {
    ...(req.Spec ?? {}),
    EncryptionConfig: {
      AutoLockManagers:
        req.AutoLockManagers === true || req.Spec?.EncryptionConfig?.AutoLockManagers === true,
    },
  });
  validateSpec(spec);

  const now = ctx.now().toISOString();
  const nodeId = newSwarmId();
  const clusterId = newSwarmId();
  // a root given in the spec (SigningCACert, with SigningCAKey or an external CA for it) is the
  // swarm's root; neither is ever kept in the spec
  let root: NewRoot;
  try {
    root = initialRoot(spec.CAConfig, ctx.now());
  } catch (err) {
    throw invalidParameter(`rpc error: code = InvalidArgument desc = ${errorMessage(err)}`);
  }
  delete spec.CAConfig.SigningCACert;
  delete spec.CAConfig.SigningCAKey;
  const dek = newDek();
  const caRecord: StoredCa = { cert: root.certPem, key: root.keyPem ? seal(dek, root.keyPem) : '' };
  // this node's certificates: with the root's key, or from the external CA when the swarm has none
  const signer = signerFor(
    { root: caRecord, rootRevision: 0 },
    dek,
    root.keyPem ? undefined : spec.CAConfig.ExternalCAs,
  );
  const nodePair = newKeyPair();
  const peerPair = newKeyPair();
  let node: { certPem: string; keyPem: string };
  let peer: { certPem: string; keyPem: string };
  try {
    node = {
      certPem: await signer.issueNode(
        { pem: createCsr(nodePair.privateKey, 'swarm-init'), key: nodePair.publicKey },
        nodeId,
        'manager',
        clusterId,
        effectiveCertExpiryMs(spec),
        ctx.now(),
      ),
      keyPem: privateKeyPem(nodePair.privateKey),
    };
    peer = {
      certPem: await signer.issueEtcdPeer(
        { pem: createCsr(peerPair.privateKey, ETCD_PEER_CN), key: peerPair.publicKey },
        [addrs.advertiseHost],
        PEER_CERT_MS,
        ctx.now(),
      ),
      keyPem: privateKeyPem(peerPair.privateKey),
    };
  } catch (err) {
    throw unavailable(errorMessage(err));
  }
  const unlockKey = spec.EncryptionConfig.AutoLockManagers ? newUnlockKey() : undefined;
  const local: LocalState = {
    NodeID: nodeId,
    ClusterID: clusterId,
    Role: 'manager',
    Availability: availability,
    ListenAddr: joinHostPort(addrs.listenHost, addrs.listenPort),
    AdvertiseHost: addrs.advertiseHost,
    AdvertisePort: addrs.advertisePort,
    DataPathAddr: addrs.dataPathAddr,
    PeerPort: opts.peerPort,
  };
  const files = session.files;
  await files.wipe();
  await files.writeSecret(files.certs.ca, root.certPem);
  await files.writeSecret(files.certs.nodeCert, node.certPem);
  await files.writeSecret(files.certs.nodeKey, node.keyPem);
  await files.writeSecret(files.certs.peerCert, peer.certPem);
  await files.writeSecret(files.certs.peerKey, peer.keyPem);
  await files.writeSecret(files.certs.dek, dek);
  try {
    await runtime.startManager(local, 'new', spec);
    const store = session.store as ClusterStore;
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
      JoinTokens: { Worker: newJoinToken(root.certPem), Manager: newJoinToken(root.certPem) },
      ...(unlockKey ? { _: { unlockKey: seal(dek, unlockKey) } } : {}),
    };
    const stored: StoredNode = {
      ID: nodeId,
      CreatedAt: now,
      UpdatedAt: now,
      Spec: { Labels: {}, Role: 'manager', Availability: availability },
      Description: describeNode(opts, tlsInfoOf(root.certPem)),
      Status: { State: 'ready', Addr: addrs.advertiseHost },
      _: { dataPathAddr: addrs.dataPathAddr },
    };
    const manager: StoredManager = {
      memberId: status.memberId,
      peerUrl: runtime.peerUrl(local),
      addr: joinHostPort(addrs.advertiseHost, addrs.advertisePort),
    };
    const created = await store.txn(
      [{ key: keys.cluster, target: 'create', op: 'equal', value: 0 }],
      [
        { put: { key: keys.cluster, value: JSON.stringify(cluster) } },
        {
          put: {
            key: keys.caRoot,
            value: JSON.stringify(caRecord),
          },
        },
        { put: { key: keys.node(nodeId), value: JSON.stringify(stored) } },
        { put: { key: keys.manager(nodeId), value: JSON.stringify(manager) } },
      ],
    );
    if (!created.succeeded) throw new Error('the new etcd member already holds a swarm');
    // dockerd's init makes the ingress network (Ingress, 10.0.0.0/24, VNI 4096)
    await new SwarmNetworks({
      swarm: { managerStore: () => store, isManager: () => true },
      log: opts.log,
      esp: async () => false,
    }).createIngress();
    if (unlockKey) await protectKeys(ctx, unlockKey);
    await runtime.openClusterApi(local);
    await runtime.startLiveness(spec);
    session.activate();
    await runtime.startLoops();
    opts.log.info('swarm initialized', { nodeId, clusterId, advertise: addrs.advertiseHost });
    return nodeId;
  } catch (err) {
    await runtime.dropLocal();
    throw err instanceof BerthError ? err : unavailable(`cannot initialize the swarm: ${errorMessage(err)}`);
  }
}

/** init --force-new-cluster on a manager: its member restarts alone from its data, the others dropped. */
async function forceNewCluster(ctx: SwarmContext): Promise<string> {
  const { session, runtime, opts } = ctx;
  const local = session.local as LocalState;
  runtime.stopLiveness();
  await runtime.stopLoops();
  await runtime.closeManagerParts();
  await opts.member.stop();
  await runtime.startManager(local, 'new', undefined, true);
  await runtime.openClusterApi(local);
  const store = session.store as ClusterStore;
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
  if (cluster) await runtime.startLiveness((JSON.parse(cluster.value) as StoredCluster).Spec);
  session.activate();
  await runtime.startLoops();
  return local.NodeID;
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
