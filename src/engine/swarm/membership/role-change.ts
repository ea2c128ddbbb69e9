import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import { newKeyPair, privateKeyPem } from '../ca/certificates.js';
import { createCsr } from '../ca/csr.js';
import type { HeartbeatAnswer, ManagerJoinAnswer } from '../cluster-api/protocol.js';
import { ETCD_PEER_CN } from '../etcd/etcd-args.js';
import type { LocalState } from '../local-state.js';
import type { SwarmContext } from '../swarm-context.js';
import { startJoiningMember } from './manager-member.js';
import { callManagers, currentTls, renewCertificate } from './renewal.js';

/**
 * A node carries out the role etcd gives it (`docker node promote|demote`, `node update --role`).
 * A promoted worker renews its certificate (now OU=swarm-manager), asks for its etcd member
 * (`POST /v1/manager`, added as a learner as a manager join adds one) and starts it as a manager
 * join does. A demoted manager, whose member the demoting manager already removed, ends its
 * manager parts, renews its certificate (now OU=swarm-worker) with another manager and goes on
 * as a worker. Either runs in the membership queue, and only when another manager confirms it.
 */

export async function becomeManager(ctx: SwarmContext): Promise<void> {
  const { session, runtime, opts } = ctx;
  const local = session.local;
  if (local?.Role !== 'worker' || session.nodeState !== 'active') return;
  const managers = runtime.knownManagers();
  const renewed = await renewCertificate(ctx, managers);
  if (renewed.Role !== 'manager') return;
  const tls = { ...(await currentTls(ctx)), cert: renewed.Certificate, key: renewed.key };
  const peerPair = newKeyPair();
  const { addr, answer } = await callManagers<ManagerJoinAnswer>(
    managers,
    '/v1/manager',
    {
      PeerCSR: createCsr(peerPair.privateKey, ETCD_PEER_CN),
      PeerPort: opts.peerPort,
      AdvertiseHost: local.AdvertiseHost,
    },
    tls,
  );
  const files = session.files;
  await files.writeSecret(files.certs.peerCert, answer.PeerCertificate);
  await files.writeSecret(files.certs.peerKey, privateKeyPem(peerPair.privateKey));
  await files.writeSecret(files.certs.dek, Buffer.from(answer.DEK, 'base64'));
  await runtime.stopLoops();
  runtime.stopLink();
  const asWorker: LocalState = { ...local };
  const next: LocalState = { ...local, Role: 'manager', PeerPort: opts.peerPort };
  delete next.Managers;
  delete next.HeartbeatPeriodMs;
  session.local = next;
  await files.save(next);
  try {
    await startJoiningMember(ctx, next, answer, addr, tls);
  } catch (err) {
    // back to a worker; the next heartbeat tries again
    opts.log.warn('could not become a manager; staying a worker', { error: errorMessage(err) });
    runtime.stopLiveness();
    await runtime.closeManagerParts();
    await opts.member.stop();
    await rm(files.etcdDir, { recursive: true, force: true });
    session.dek = undefined;
    session.local = asWorker;
    await files.save(asWorker);
    await runtime.startWorker(asWorker);
    await runtime.startLoops();
    throw err;
  }
  session.activate();
  await runtime.startLoops();
  opts.log.info('promoted to a manager', { nodeId: next.NodeID });
}

export async function becomeWorker(ctx: SwarmContext): Promise<void> {
  const { session, runtime, opts } = ctx;
  const local = session.local;
  if (local?.Role !== 'manager' || session.nodeState !== 'active') return;
  const managers = runtime.knownManagers().filter((m) => m.NodeID !== local.NodeID);
  // another manager confirms the demotion before anything ends here
  let beat: HeartbeatAnswer;
  try {
    beat = (await callManagers<HeartbeatAnswer>(managers, '/v1/heartbeat', {}, await currentTls(ctx))).answer;
  } catch (err) {
    // no other manager says so (a partition, a lost quorum): this node stays what it is
    opts.log.debug('no manager confirms a demotion', { error: errorMessage(err) });
    return;
  }
  // a worker now; or a manager again whose member is already out of etcd (demoted and promoted
  // in quick succession): it goes on as a worker, and its next heartbeat promotes it anew
  if (beat.Role !== 'worker' && beat.Member) return;
  await runtime.stopLoops();
  runtime.stopLiveness();
  await runtime.closeManagerParts();
  await opts.member.stop();
  const files = session.files;
  await rm(files.etcdDir, { recursive: true, force: true });
  await Promise.all([files.certs.peerCert, files.certs.peerKey].map((f) => rm(f, { force: true })));
  const next: LocalState = {
    ...local,
    Role: 'worker',
    Managers: beat.Managers.filter((m) => m.NodeID !== local.NodeID),
    HeartbeatPeriodMs: beat.HeartbeatPeriodMs,
  };
  delete next.PeerPort;
  delete next.Raft;
  delete next.Autolock;
  session.local = next;
  // right after a demotion the others may be electing a leader: a few tries, then later
  let renewed: Awaited<ReturnType<typeof renewCertificate>> | undefined;
  for (let i = 0; i < 8 && !renewed; i++) {
    if (i > 0) await sleep(1000);
    renewed = await renewCertificate(ctx, next.Managers ?? []).catch((err: unknown) => {
      opts.log.debug('could not renew the certificate as a worker yet', { error: errorMessage(err) });
      return undefined;
    });
    // promoted again meanwhile: the manager certificate is right, and the promotion follows
    if (renewed && renewed.Role !== 'worker') break;
  }
  if (!renewed) await files.writeSecret(files.certs.nodeKey, (await currentTls(ctx)).key);
  await rm(files.certs.dek, { force: true });
  session.dek = undefined;
  session.nodeKeyPem = undefined;
  await files.save(next);
  await runtime.startWorker(next);
  session.activate();
  await runtime.startLoops();
  // the manager certificate still serves for heartbeats; a worker's comes with the next renewal
  if (!renewed) runtime.renewSoon(60_000);
  opts.log.info('demoted to a worker', { nodeId: next.NodeID });
}
