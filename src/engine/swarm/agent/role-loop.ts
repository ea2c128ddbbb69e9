import type { RoleLoops } from '../role-loops.js';
import type { SwarmAgent } from './node-agent.js';

/**
 * The agent's part of the node's loops, on every node (managers too): it starts once the node is
 * active, stops with the engine (task containers keep running) and cleans up when the node leaves.
 */
export function agentLoops(agent: SwarmAgent): RoleLoops {
  return {
    startManager: async () => {},
    startNode: (access) =>
      agent.start({
        nodeId: access.nodeId,
        tls: async () => access.tls(),
        managers: () => access.managers(),
      }),
    stop: () => agent.stop(),
    leave: () => agent.leave(),
  };
}
