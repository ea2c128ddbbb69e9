import { setTimeout as sleep } from 'node:timers/promises';
import { joinHostPort } from '../addresses.js';
import { clusterCall } from '../cluster-api/client.js';
import type { ManagerJoinAnswer } from '../cluster-api/protocol.js';
import { keys } from '../keys.js';
import type { LocalState } from '../local-state.js';
import type { StoredCluster, StoredManager } from '../records.js';
import { unseal } from '../seal.js';
import { defaultSpec, effectiveRaft } from '../spec.js';
import type { SwarmContext } from '../swarm-context.js';
import { protectKeys } from './autolock.js';

/**
 * A new manager's member (a manager join's second half, or a promoted worker's): it starts as a
 * learner of the existing cluster, the manager that admitted it promotes it once it has caught
 * up, and then (a voter, so its store reads are linearizable) it records itself among the
 * managers and serves the cluster API.
 */
export async function startJoiningMember(
  ctx: SwarmContext,
  local: LocalState,
  m: ManagerJoinAnswer,
  acceptedBy: string,
  tls: { ca: string; cert: string; key: string },
): Promise<void> {
  const { session, runtime, opts } = ctx;
  const peerUrl = runtime.peerUrl(local);
  await opts.member.start({
    name: local.NodeID,
    dataDir: session.files.etcdDir,
    peerUrl,
    initialCluster: m.InitialCluster,
    clusterState: 'existing',
    clusterToken: local.ClusterID,
    peerTls: runtime.peerTls(),
    raft: effectiveRaft(defaultSpec()),
  });
  await clusterCall(acceptedBy, 'POST', '/v1/promote', { MemberID: m.MemberID }, tls);
  session.local = local;
  session.dek = Buffer.from(m.DEK, 'base64');
  const store = runtime.openStore();
  // the promotion reaches this member through the Raft log: until it has, it still refuses
  // requests as a learner
  for (let i = 0; (await store.status()).isLearner; i++) {
    if (i >= 100) throw new Error('this member was promoted but still acts as a learner');
    await sleep(100);
  }
  await runtime.startEvents(store);
  const manager: StoredManager = {
    memberId: m.MemberID,
    peerUrl,
    addr: joinHostPort(local.AdvertiseHost, local.AdvertisePort),
  };
  await store.put(keys.manager(local.NodeID), JSON.stringify(manager));
  const cluster = await store.get(keys.cluster);
  if (!cluster) throw new Error('the swarm has no cluster record');
  const stored = JSON.parse(cluster.value) as StoredCluster;
  const spec = stored.Spec;
  local.Raft = effectiveRaft(spec);
  await session.files.save(local);
  // in an autolocked swarm this manager's DEK and key go to disk sealed, as the others' are
  if (spec.EncryptionConfig.AutoLockManagers && stored._?.unlockKey) {
    session.nodeKeyPem = tls.key;
    await protectKeys(ctx, unseal(session.dek, stored._.unlockKey));
  }
  await runtime.startLiveness(spec);
  await runtime.openClusterApi(local);
}
