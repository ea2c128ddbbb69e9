import { access, readFile } from 'node:fs/promises';
import { BerthError, errorMessage, unavailable } from '../../../common/errors.js';
import { joinHostPort } from '../addresses.js';
import { newKeyPair, privateKeyPem } from '../ca/certificates.js';
import { createCsr } from '../ca/csr.js';
import { clusterCall } from '../cluster-api/client.js';
import type { ManagerAddress, RenewAnswer } from '../cluster-api/protocol.js';
import { ETCD_PEER_CN } from '../etcd/etcd-args.js';
import { keys } from '../keys.js';
import type { StoredCluster } from '../records.js';
import { unseal } from '../seal.js';
import type { SwarmContext } from '../swarm-context.js';
import { protectKeys } from './autolock.js';

/** The node's certificate, key and the swarm's root as they are on disk now (the key unsealed). */
export async function currentTls(ctx: SwarmContext): Promise<{ ca: string; cert: string; key: string }> {
  const { files } = ctx.session;
  const [ca, cert] = await Promise.all([
    readFile(files.certs.ca, 'utf8'),
    readFile(files.certs.nodeCert, 'utf8'),
  ]);
  const key = ctx.session.nodeKeyPem ?? (await readFile(files.certs.nodeKey, 'utf8'));
  return { ca, cert, key };
}

/** A cluster API call to the first of `managers` that answers; a refusal is the answer. */
export async function callManagers<T>(
  managers: ManagerAddress[],
  path: string,
  body: unknown,
  tls: { ca: string; cert: string; key: string },
): Promise<{ addr: string; answer: T }> {
  let last: unknown = new Error('no manager is known');
  for (const m of managers) {
    try {
      return { addr: m.Addr, answer: await clusterCall<T>(m.Addr, 'POST', path, body, tls) };
    } catch (err) {
      last = err;
      if (err instanceof BerthError && err.kind !== 'Unavailable') throw err;
    }
  }
  throw last instanceof BerthError ? last : unavailable(`no manager answered: ${errorMessage(last)}`);
}

/**
 * `POST /v1/renew` with a CSR for a new key, to a manager (a manager asks itself): the
 * certificate that comes back carries the role etcd holds. Written to disk (the key sealed on an
 * autolocked manager), then used for every connection from now on.
 */
export async function renewCertificate(
  ctx: SwarmContext,
  managers = selfOrKnownManagers(ctx),
): Promise<RenewAnswer & { key: string }> {
  const { session, runtime } = ctx;
  const local = session.local;
  if (!local) throw unavailable('this node is not in a swarm');
  const tls = await currentTls(ctx);
  const pair = newKeyPair();
  const files = session.files;
  // a manager's etcd peer certificate is renewed with it (a root rotation reissues both)
  const peerPair =
    local.Role === 'manager' && (await exists(files.certs.peerCert)) ? newKeyPair() : undefined;
  const { answer } = await callManagers<RenewAnswer>(
    managers,
    '/v1/renew',
    {
      CSR: createCsr(pair.privateKey, 'swarm-renew'),
      TrustRoot: tls.ca,
      ...(peerPair ? { PeerCSR: createCsr(peerPair.privateKey, ETCD_PEER_CN) } : {}),
    },
    tls,
  );
  const key = privateKeyPem(pair.privateKey);
  if (peerPair && answer.PeerCertificate) {
    // etcd reads both files at each new peer connection
    await files.writeSecret(files.certs.peerKey, privateKeyPem(peerPair.privateKey));
    await files.writeSecret(files.certs.peerCert, answer.PeerCertificate);
  }
  await files.writeSecret(files.certs.nodeCert, answer.Certificate);
  if (local.Role === 'manager' && local.Autolock && session.store) {
    // the new key goes to disk sealed under the unlock key, as the old one was
    session.nodeKeyPem = key;
    const cluster = await session.store.get(keys.cluster);
    const sealed = cluster ? (JSON.parse(cluster.value) as StoredCluster)._?.unlockKey : undefined;
    await protectKeys(ctx, sealed ? unseal(await session.clusterDek(), sealed) : undefined);
  } else {
    await files.writeSecret(files.certs.nodeKey, key);
  }
  runtime.useCertificate(answer.Certificate, key);
  ctx.opts.log.info('node certificate renewed', { nodeId: local.NodeID, role: answer.Role });
  if (answer.Role !== local.Role) runtime.hooks.roleChanged(answer.Role);
  return { ...answer, key };
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** A manager renews through its own cluster API; a worker through the managers it heard of. */
function selfOrKnownManagers(ctx: SwarmContext): ManagerAddress[] {
  const local = ctx.session.local;
  if (local?.Role === 'manager') {
    return [{ NodeID: local.NodeID, Addr: joinHostPort(local.AdvertiseHost, local.AdvertisePort) }];
  }
  return ctx.runtime.knownManagers();
}
