import { allocateNetworks, releaseAddresses } from '../networks/allocator.js';
import type { ClusterSnapshot } from './cluster-view.js';
import { reconcileGlobal } from './global.js';
import { reconcileJob } from './jobs.js';
import { Plan } from './plan.js';
import { reap } from './reaper.js';
import { reconcileReplicated } from './replicated.js';
import type { RestartHistory } from './restart-history.js';
import { schedule } from './scheduler.js';
import { modeOf } from './task-life.js';
import { type UpdaterMemory, updateService } from './updater.js';

/**
 * One pass of the control loops over the leader's view: per service its orchestrator (replicated,
 * global, jobs; restarts and evictions within), then the rolling updater; then the scheduler
 * over every task waiting for a node, then the reaper. Returns the plan: its changes are what the
 * writer commits, its wake time when to pass again without a change.
 */
export interface LoopMemory {
  updates: UpdaterMemory;
  restarts: RestartHistory;
}

export function reconcile(snap: ClusterSnapshot, now: number, newId: () => string, memory: LoopMemory): Plan {
  const plan = new Plan(snap, now, newId, memory.restarts);
  const mem = memory.updates;
  mem.observe(plan);
  memory.restarts.keepServices((id) => plan.services.has(id));
  for (const [id, service] of plan.services) {
    const revision = snap.services.get(id)?.modRevision ?? 0;
    switch (modeOf(service.Spec.Mode)) {
      case 'replicated':
        reconcileReplicated(plan, id, service);
        break;
      case 'global':
        reconcileGlobal(plan, id, service);
        break;
      default:
        reconcileJob(plan, id, service, revision);
    }
    updateService(plan, mem, id, service);
  }
  // addresses before placement: a task runs nowhere before it has them
  allocateNetworks(plan);
  schedule(plan);
  reap(plan);
  // the reaped tasks' and gone VIPs' addresses go back
  releaseAddresses(plan);
  return plan;
}
