import { readFile } from 'node:fs/promises';
import { conflict, unauthorized, unavailable } from '../../../common/errors.js';
import { parseUnlockKey } from '../ca/tokens.js';
import { NOT_IN_SWARM } from '../messages.js';
import { seal, unseal } from '../seal.js';
import type { SwarmContext } from '../swarm-context.js';

/**
 * Autolock on a manager's disk: the DEK and the node key sealed under the unlock key, and
 * `docker swarm unlock`, which opens them on a node that came up `locked`.
 */

/**
 * POST /swarm/unlock: the key opens the DEK and the node key sealed on disk (a wrong one fails
 * AES-GCM's check: 401); then the member starts and the node is active.
 */
export async function unlockSwarm(ctx: SwarmContext, key: string): Promise<void> {
  const { session, runtime } = ctx;
  const local = session.local;
  if (!local || session.nodeState === 'inactive') throw unavailable(NOT_IN_SWARM);
  if (session.nodeState !== 'locked') throw conflict('swarm is not locked');
  const kek = parseUnlockKey(key.trim());
  const invalid = unauthorized('swarm could not be unlocked: invalid key provided');
  if (!kek) throw invalid;
  try {
    session.dek = Buffer.from(unseal(kek, await readFile(session.files.certs.dek, 'utf8')), 'base64');
    session.nodeKeyPem = unseal(kek, await readFile(session.files.certs.nodeKey, 'utf8'));
  } catch {
    session.dek = undefined;
    session.nodeKeyPem = undefined;
    throw invalid;
  }
  await runtime.startManager(local, 'new');
  await runtime.openClusterApi(local);
  session.activate();
  await runtime.startLoops();
  ctx.opts.log.info('swarm unlocked', { nodeId: local.NodeID });
}

/**
 * The DEK and the node key on this manager's disk sealed under the unlock key (its 32 bytes as an
 * AES-256-GCM key), or, with no key, written plain again. The plain values come from memory: the
 * node is active, so it has them.
 */
export async function protectKeys(ctx: SwarmContext, unlockKey: string | undefined): Promise<void> {
  const { session } = ctx;
  const local = session.local;
  if (!local) return;
  const files = session.files;
  const dek = await session.clusterDek();
  const nodeKey = session.nodeKeyPem ?? (await readFile(files.certs.nodeKey, 'utf8'));
  const kek = unlockKey ? parseUnlockKey(unlockKey) : undefined;
  if (kek) {
    await files.writeSecret(files.certs.dek, seal(kek, dek.toString('base64')));
    await files.writeSecret(files.certs.nodeKey, seal(kek, nodeKey));
    session.nodeKeyPem = nodeKey;
  } else {
    await files.writeSecret(files.certs.dek, dek);
    await files.writeSecret(files.certs.nodeKey, nodeKey);
  }
  local.Autolock = kek !== undefined;
  await files.save(local);
}
