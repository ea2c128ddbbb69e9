import { readFile } from 'node:fs/promises';
import type { TrustState } from '../ca/ca-state.js';
import { chainsTo } from '../ca/cert-info.js';
import type { SwarmContext } from '../swarm-context.js';
import { currentTls, renewCertificate } from './renewal.js';

/**
 * A node follows a root rotation (`docker swarm ca --rotate`): it trusts the roots the managers
 * name (both while the rotation runs, the new one after), and renews its certificate (a
 * manager: its etcd peer certificate too) when it does not come from the root that signs now
 * or when its trust changed (the renewal reports what it trusts: its TLSInfo.TrustRoot).
 */
export async function followRoots(ctx: SwarmContext, trust: TrustState): Promise<void> {
  const { session, runtime } = ctx;
  const local = session.local;
  if (!local || session.nodeState !== 'active') return;
  const files = session.files;
  const tls = await currentTls(ctx);
  let renew = false;
  if (tls.ca !== trust.TrustRoots) {
    await files.writeSecret(files.certs.ca, trust.TrustRoots);
    runtime.useTrust(trust.TrustRoots);
    renew = true;
  }
  if (!chainsTo(tls.cert, trust.Issuer)) renew = true;
  if (local.Role === 'manager') {
    const peer = await readFile(files.certs.peerCert, 'utf8').catch(() => undefined);
    if (peer !== undefined && !chainsTo(peer, trust.Issuer)) renew = true;
  }
  if (renew) await renewCertificate(ctx);
}
