/** dockerd's words for the states a swarm endpoint may find the node in. */

export const NOT_IN_SWARM = 'This node is not part of a swarm';
export const NOT_A_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
export const WORKER_NOT_MANAGER =
  "This node is not a swarm manager. Worker nodes can't be used to view or modify cluster state. Please run this command on a manager node or promote the current node to a manager.";
export const ALREADY_IN_SWARM =
  'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';
export const NO_LEADER =
  "The swarm does not have a leader. It's possible that too few managers are online. Make sure more than half of the managers are online.";
export const LAST_MANAGER =
  'You are attempting to leave the swarm on a node that is participating as a manager. Removing the last manager erases all current state of the swarm. Use `--force` to ignore this message.';
export const LOCKED =
  'Swarm is encrypted and needs to be unlocked before it can be used. Please use "docker swarm unlock" to unlock it.';
