import type { StoredService } from '../services/service.types.js';
import type { StoredTask } from '../tasks/task.types.js';
import type { StoredNode } from './cluster-view.js';
import { constraintsFit, platformFits } from './filters.js';
import type { Plan } from './plan.js';
import { settleSlot } from './slots.js';
import { isLive, iterationOf } from './task-life.js';

/**
 * A global service (or one iteration of a global job): one task on each node that is up, not
 * drained and meets the constraints and platforms. A node that joins, turns `active` or starts to
 * meet the constraints gets one; `pause` only stops new ones; drain, a constraint that stops
 * matching, or the node's removal takes it away. Tasks on a node that is down are left alone
 * (there is nowhere else for them).
 */
export function reconcileGlobal(
  plan: Plan,
  serviceId: string,
  service: StoredService,
  job?: { iteration: { Index: number } },
): void {
  const placement = service.Spec.TaskTemplate?.Placement;
  const tasks = plan
    .tasksOf(serviceId)
    .filter(
      (t) =>
        t.DesiredState !== 'remove' && (!job || iterationOf(t.JobIteration) === iterationOf(job.iteration)),
    );
  const byNode = new Map<string, StoredTask[]>();
  for (const t of tasks) if (t.NodeID) byNode.set(t.NodeID, [...(byNode.get(t.NodeID) ?? []), t]);
  for (const [nodeId, mine] of byNode) {
    if (!plan.snap.nodes.has(nodeId)) for (const t of mine) plan.setDesired(t, 'remove');
  }
  for (const [nodeId, n] of plan.snap.nodes) {
    if (!plan.nodeUp(nodeId)) continue;
    const node: StoredNode = n.value;
    const mine = byNode.get(nodeId) ?? [];
    const availability = node.Spec?.Availability ?? 'active';
    const eligible =
      availability !== 'drain' && constraintsFit(placement, node) && platformFits(placement, node);
    if (!eligible) {
      for (const t of mine) if (isLive(t)) plan.setDesired(t, 'shutdown');
      continue;
    }
    const outcome = settleSlot({ plan, service, isJob: !!job, fits: () => true }, mine);
    if (outcome === 'vacant' && availability === 'active')
      plan.createTask(serviceId, service, {
        NodeID: nodeId,
        ...(job ? { JobIteration: job.iteration } : {}),
      });
  }
}
