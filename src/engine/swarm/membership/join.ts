import { BerthError, errorMessage, invalidParameter, unavailable } from '../../../common/errors.js';
import { joinHostPort, resolveAddresses } from '../addresses.js';
import { newKeyPair, privateKeyPem } from '../ca/certificates.js';
import { createCsr } from '../ca/csr.js';
import { caDigest, parseJoinToken } from '../ca/tokens.js';
import { clusterCall, fetchRootCa } from '../cluster-api/client.js';
import type { JoinAnswer, JoinCall } from '../cluster-api/protocol.js';
import { ETCD_PEER_CN } from '../etcd/etcd-args.js';
import type { LocalState } from '../local-state.js';
import { ALREADY_IN_SWARM } from '../messages.js';
import { describeNode, parseAvailability } from '../nodes/node-description.js';
import type { JoinRequest } from '../swarm.types.js';
import type { SwarmContext } from '../swarm-context.js';
import { startJoiningMember } from './manager-member.js';

/**
 * POST /swarm/join: the CA pinned to the token, a certificate for a CSR from a manager's cluster
 * API, then a worker's heartbeats or, with a manager token, an etcd member of the cluster.
 */
export async function joinSwarm(ctx: SwarmContext, req: JoinRequest): Promise<void> {
  const { session, runtime, opts } = ctx;
  if (session.local && session.nodeState !== 'inactive') throw unavailable(ALREADY_IN_SWARM);
  const remotes = req.RemoteAddrs ?? [];
  if (remotes.length === 0) throw invalidParameter('at least 1 RemoteAddr is required to join');
  const token = parseJoinToken(req.JoinToken ?? '');
  if (!token) throw invalidParameter('invalid join token');
  const availability = parseAvailability(req.Availability);
  const addrs = await resolveAddresses(req, opts.interfaces);
  const pair = newKeyPair();
  const call: JoinCall = {
    Token: req.JoinToken ?? '',
    CSR: createCsr(pair.privateKey, 'swarm-join'),
    Availability: availability,
    AdvertiseHost: addrs.advertiseHost,
    ListenAddr: joinHostPort(addrs.listenHost, addrs.listenPort),
    DataPathAddr: addrs.dataPathAddr,
    Description: describeNode(opts, { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' }),
  };
  // a manager token makes an etcd member too: its peer key's request goes along
  const peerPair = newKeyPair();
  call.PeerCSR = createCsr(peerPair.privateKey, ETCD_PEER_CN);
  call.PeerPort = opts.peerPort;
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
  const files = session.files;
  await files.wipe();
  // during a root rotation the answer names both roots, the pinned one first
  const trustPem = answer.RootCA.startsWith(rootPem) ? answer.RootCA : rootPem;
  await files.writeSecret(files.certs.ca, trustPem);
  await files.writeSecret(files.certs.nodeCert, answer.Certificate);
  await files.writeSecret(files.certs.nodeKey, privateKeyPem(pair.privateKey));
  if (answer.Role === 'manager' && answer.Manager) {
    local.PeerPort = opts.peerPort;
    delete local.Managers;
    delete local.HeartbeatPeriodMs;
    await files.writeSecret(files.certs.peerCert, answer.Manager.PeerCertificate);
    await files.writeSecret(files.certs.peerKey, privateKeyPem(peerPair.privateKey));
    await files.writeSecret(files.certs.dek, Buffer.from(answer.Manager.DEK, 'base64'));
    await files.save(local);
    try {
      await startJoiningMember(ctx, local, answer.Manager, acceptedBy, {
        ca: trustPem,
        cert: answer.Certificate,
        key: privateKeyPem(pair.privateKey),
      });
    } catch (err) {
      await runtime.dropLocal();
      throw err instanceof BerthError ? err : unavailable(`cannot join as a manager: ${errorMessage(err)}`);
    }
  } else {
    await files.save(local);
    await runtime.startWorker(local);
  }
  session.activate();
  await runtime.startLoops();
  opts.log.info('joined a swarm', { nodeId: answer.NodeID, role: answer.Role });
}
