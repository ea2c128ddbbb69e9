import { conflict, errorMessage, invalidParameter, unavailable } from '../../../common/errors.js';
import { loadCaState, requestedRoot } from '../ca/ca-state.js';
import { RootCa, tlsInfoOf } from '../ca/root-ca.js';
import { newJoinToken, newUnlockKey } from '../ca/tokens.js';
import { keys } from '../keys.js';
import { NO_LEADER } from '../messages.js';
import type { StoredCa, StoredCluster } from '../records.js';
import { seal, unseal } from '../seal.js';
import { effectiveRaft, specFromUpdate, validateSpec } from '../spec.js';
import type { KeyValue } from '../store/cluster-store.js';
import type { ClusterInfo, SpecUpdate, Swarm, UpdateFlags } from '../swarm.types.js';
import type { SwarmContext } from '../swarm-context.js';
import { protectKeys } from './autolock.js';

/** The cluster's settings on a manager: GET /swarm, POST /swarm/update, GET /swarm/unlockkey. */

export async function inspectSwarm(ctx: SwarmContext): Promise<Swarm> {
  const store = ctx.session.managerStore();
  const kv = await ctx.session.read(() => store.get(keys.cluster));
  if (!kv) throw unavailable(NO_LEADER);
  const stored = JSON.parse(kv.value) as StoredCluster;
  return { ...(await clusterInfo(ctx, kv)), JoinTokens: stored.JoinTokens };
}

export async function unlockKeyOf(ctx: SwarmContext): Promise<{ UnlockKey: string }> {
  const store = ctx.session.managerStore();
  const kv = await ctx.session.read(() => store.get(keys.cluster));
  if (!kv) throw unavailable(NO_LEADER);
  const sealed = (JSON.parse(kv.value) as StoredCluster)._?.unlockKey;
  return { UnlockKey: sealed ? unseal(await ctx.session.clusterDek(), sealed) : '' };
}

export async function updateSwarm(
  ctx: SwarmContext,
  version: number,
  update: SpecUpdate,
  flags: UpdateFlags,
): Promise<void> {
  const { session } = ctx;
  const store = session.managerStore();
  const kv = await session.read(() => store.get(keys.cluster));
  if (!kv) throw unavailable(NO_LEADER);
  const stored = JSON.parse(kv.value) as StoredCluster;
  const spec = specFromUpdate(update);
  validateSpec(spec);
  const caState = await loadCaState(store);
  const root = caState.root.cert;
  // a root rotation: the new root and its certificate cross-signed by the current one
  let newRoot: StoredCa | undefined;
  try {
    const target = requestedRoot(
      {
        ...(spec.CAConfig.SigningCACert ? { SigningCACert: spec.CAConfig.SigningCACert } : {}),
        ...(spec.CAConfig.SigningCAKey ? { SigningCAKey: spec.CAConfig.SigningCAKey } : {}),
        ...(spec.CAConfig.ExternalCAs ? { ExternalCAs: spec.CAConfig.ExternalCAs } : {}),
        forced: (spec.CAConfig.ForceRotate ?? 0) !== (stored.Spec.CAConfig.ForceRotate ?? 0),
      },
      caState,
      ctx.now(),
    );
    if (target) {
      const dek = await session.clusterDek();
      // the current root cross-signs the new one: it needs its own key (an external root has none here)
      if (!caState.root.key) {
        throw new Error('cannot rotate away from a root CA whose key is not held by the swarm');
      }
      const current = new RootCa({ certPem: caState.root.cert, keyPem: unseal(dek, caState.root.key) });
      newRoot = {
        cert: target.certPem,
        key: target.keyPem ? seal(dek, target.keyPem) : '',
        crossSigned: current.crossSign(target.certPem, ctx.now()),
      };
    }
  } catch (err) {
    throw invalidParameter(`rpc error: code = InvalidArgument desc = ${errorMessage(err)}`);
  }
  // the signing certificate and key are never kept in the spec (swarmkit redacts them)
  delete spec.CAConfig.SigningCACert;
  delete spec.CAConfig.SigningCAKey;
  const next: StoredCluster = {
    ...stored,
    Spec: spec,
    ...(newRoot ? { RootRotationInProgress: true } : {}),
    UpdatedAt: ctx.now().toISOString(),
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
    next._ = { ...stored._, unlockKey: seal(await session.clusterDek(), newKey) };
  }
  const res = await store.txn(
    [
      { key: keys.cluster, target: 'mod', op: 'equal', value: version },
      { key: keys.caRoot, target: 'mod', op: 'equal', value: caState.rootRevision },
    ],
    [
      { put: { key: keys.cluster, value: JSON.stringify(next) } },
      ...(newRoot ? [{ put: { key: keys.caNext, value: JSON.stringify(newRoot) } }] : []),
    ],
  );
  if (!res.succeeded) throw conflict('update out of sequence');
  // this manager's keys on disk follow: sealed under the new unlock key, or plain again
  if (newKey !== undefined) await protectKeys(ctx, newKey);
  else if (!locked && wasLocked) await protectKeys(ctx, undefined);
  // the Raft settings reach etcd when the member next starts
  if (session.local) {
    session.local.Raft = effectiveRaft(spec);
    await session.files.save(session.local);
  }
  if (spec.Dispatcher.HeartbeatPeriod !== stored.Spec.Dispatcher.HeartbeatPeriod)
    await ctx.runtime.startLiveness(spec);
  // this manager follows the rotation at once (the others, and the workers, within a heartbeat)
  if (newRoot) ctx.runtime.checkRoots();
}

/** The Swarm object as /info and GET /swarm show it (without the join tokens). */
export async function clusterInfo(ctx: SwarmContext, kv: KeyValue): Promise<ClusterInfo> {
  const c = JSON.parse(kv.value) as StoredCluster;
  const caKv = await ctx.session.store?.get(keys.caRoot);
  const root = caKv ? (JSON.parse(caKv.value) as StoredCa) : undefined;
  const tls = root ? tlsInfoOf(root.cert) : { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' };
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
