import { errorMessage, unavailable } from '../../../common/errors.js';
import { keys } from '../keys.js';
import { LAST_MANAGER, NOT_IN_SWARM } from '../messages.js';
import type { SwarmContext } from '../swarm-context.js';

/**
 * POST /swarm/leave: a manager is refused when it would take the last manager or the quorum
 * away (unless forced); its member leaves the others' membership first; then everything of the
 * swarm on this node ends and its files go.
 */
export async function leaveSwarm(ctx: SwarmContext, force: boolean): Promise<void> {
  const { session, runtime, opts } = ctx;
  const local = session.local;
  if (!local || session.nodeState === 'inactive') throw unavailable(NOT_IN_SWARM);
  const store = session.store;
  if (local.Role === 'manager' && !force) {
    const members = store ? await store.memberList().catch(() => undefined) : undefined;
    const voters = members?.filter((m) => !m.isLearner).length ?? 1;
    if (voters <= 1) throw unavailable(LAST_MANAGER);
    const remaining = voters - 1;
    if (remaining < Math.floor(voters / 2) + 1) {
      throw unavailable(
        `You are attempting to leave the swarm on a node that is participating as a manager. Removing this node leaves ${remaining} managers out of ${voters}. Without a Raft quorum your swarm will be inaccessible. The only way to restore a swarm that has lost consensus is to reinitialize it with \`--force-new-cluster\`. Use \`--force\` to suppress this message.`,
      );
    }
  }
  if (local.Role === 'manager' && store) {
    // the others keep a swarm: this member goes from their membership first (when reachable)
    try {
      const members = await store.memberList();
      if (members.length > 1) {
        const status = await store.status();
        await store.delete(keys.manager(local.NodeID));
        await store.memberRemove(status.memberId);
      }
    } catch (err) {
      opts.log.warn('could not remove this member from the swarm', { error: errorMessage(err) });
    }
  }
  await runtime.dropLocal();
  opts.log.info('left the swarm', { nodeId: local.NodeID });
}
