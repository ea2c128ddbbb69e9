import type { SwarmNode } from '../swarm.types.js';

/** The bodies of berth's cluster API (internal: engines of one swarm talk it over mutual TLS). */

export interface JoinCall {
  Token: string;
  /** PEM PKCS#10 request for the node's new key. */
  CSR: string;
  Availability: string;
  AdvertiseHost: string;
  ListenAddr: string;
  DataPathAddr: string;
  Description: SwarmNode['Description'];
}

export interface ManagerAddress {
  NodeID: string;
  Addr: string;
}

export interface JoinAnswer {
  NodeID: string;
  ClusterID: string;
  Role: 'worker' | 'manager';
  /** The node's certificate (PEM). */
  Certificate: string;
  RootCA: string;
  Managers: ManagerAddress[];
  /** Dispatcher.HeartbeatPeriod in ms. */
  HeartbeatPeriodMs: number;
}

export interface HeartbeatAnswer {
  HeartbeatPeriodMs: number;
  Managers: ManagerAddress[];
}

/** What the cluster API's server calls (the swarm service on a manager). */
export interface ClusterApiHandlers {
  rootCa(): string;
  join(call: JoinCall, remoteAddress: string): Promise<JoinAnswer>;
  /** A heartbeat of the node whose certificate is `nodeId`'s. */
  heartbeat(nodeId: string): Promise<HeartbeatAnswer>;
}
