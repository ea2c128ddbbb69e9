import type { Logger } from '../../common/log.js';
import type { ManagerAddress } from './cluster-api/protocol.js';
import type { ClusterStore } from './store/cluster-store.js';

/**
 * The hook where other rooms' loops start and stop with the node's role: the orchestrator on
 * managers (startManager), the agent on every node, managers included (startNode). The swarm
 * runtime calls startManager once its member votes and its store answers, startNode once the node
 * holds its certificate, and stop before the node leaves, changes role or the engine stops.
 */

/** What a manager's loops get: the cluster's store (on this manager's member) and its DEK. */
export interface ManagerAccess {
  nodeId: string;
  /** This manager's cluster API address (host:port). */
  addr: string;
  store: ClusterStore;
  dek: Buffer;
  log: Logger;
}

/** What every node's loops get: who it is and how to reach the managers' cluster API. */
export interface NodeAccess {
  nodeId: string;
  role: 'manager' | 'worker';
  /** The managers' cluster API addresses, as last heard. */
  managers(): ManagerAddress[];
  /** The node's current certificate, key and the swarm's root (they change on renewal). */
  tls(): { ca: string; cert: string; key: string };
  log: Logger;
}

export interface RoleLoops {
  startManager(access: ManagerAccess): Promise<void>;
  startNode(access: NodeAccess): Promise<void>;
  /** Stops whatever was started (both parts). */
  stop(): Promise<void>;
  /** The node leaves the swarm: what the loops left on it goes (after stop or instead of it). */
  leave?(): Promise<void>;
}
