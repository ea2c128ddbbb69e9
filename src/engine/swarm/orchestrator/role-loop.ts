import type { RoleLoops } from '../role-loops.js';
import { type Orchestrator, startOrchestrator } from './orchestrator.js';

/**
 * The orchestrator's part of the node's loops: every manager campaigns (its election lease lives
 * 3 × etcd's election timeout), the elected one runs the control loops; stopping resigns.
 */
export function orchestratorLoops(): RoleLoops {
  let running: Orchestrator | undefined;
  return {
    startManager: async (access) => {
      await running?.stop();
      running = startOrchestrator({
        store: access.store,
        nodeId: access.nodeId,
        addr: access.addr,
        ttlSeconds: Math.max(1, Math.ceil((3 * access.electionMs) / 1000)),
        log: access.log.child('orchestrator'),
      });
    },
    startNode: async () => {},
    stop: async () => {
      const o = running;
      running = undefined;
      await o?.stop();
    },
  };
}
