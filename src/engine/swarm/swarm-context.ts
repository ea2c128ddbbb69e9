import type { SwarmServiceOptions } from './options.js';
import type { NodeRuntime } from './runtime/node-runtime.js';
import type { SwarmSession } from './session.js';

/** What each room of swarm mode works with: the engine's options, who the node is, what runs. */
export interface SwarmContext {
  opts: SwarmServiceOptions;
  session: SwarmSession;
  runtime: NodeRuntime;
  now: () => Date;
}
