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
  /** A manager join: a CSR for the etcd peer key, and the peer port its member will listen on. */
  PeerCSR?: string;
  PeerPort?: number;
}

/** What a manager join gets besides a worker's: its etcd membership (as a learner) and the DEK. */
export interface ManagerJoinAnswer {
  /** The new member's etcd ID. */
  MemberID: string;
  /** Every member's `name=peerURL` for `--initial-cluster` (the newcomer's name is its node ID). */
  InitialCluster: { name: string; peerUrl: string }[];
  PeerCertificate: string;
  /** The cluster's data-encryption key, base64. */
  DEK: string;
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
  Manager?: ManagerJoinAnswer;
}

export interface HeartbeatAnswer {
  HeartbeatPeriodMs: number;
  Managers: ManagerAddress[];
  /** The node's role as etcd holds it: a change is a promotion or demotion to carry out. */
  Role: 'worker' | 'manager';
  /** Whether the node has an etcd member of the cluster (its `P/managers/` record). */
  Member: boolean;
  /** The roots the node is to trust (two during a root rotation). */
  TrustRoots?: string;
  /** The root its certificate should come from (the new one during a rotation): else it renews. */
  Issuer?: string;
}

/** `POST /v1/renew`: a new certificate for a new key; the role (its OU) is the one in etcd. */
export interface RenewCall {
  CSR: string;
  /** A manager's new etcd peer key (a root rotation reissues its peer certificate too). */
  PeerCSR?: string;
  /** The roots the node trusts now (shown as its TLSInfo.TrustRoot). */
  TrustRoot?: string;
}

export interface RenewAnswer {
  /** The certificate, with the cross-signed root after it during a rotation. */
  Certificate: string;
  Role: 'worker' | 'manager';
  TrustRoots?: string;
  Issuer?: string;
  /** For a PeerCSR of a manager with a member: its new etcd peer certificate. */
  PeerCertificate?: string;
}

/** `POST /v1/manager`: a promoted node (with its manager certificate) asks for its etcd member. */
export interface ManagerCall {
  PeerCSR: string;
  PeerPort: number;
  AdvertiseHost: string;
}

/** What the cluster API's server calls (the swarm service on a manager). */
export interface ClusterApiHandlers {
  rootCa(): Promise<string>;
  join(call: JoinCall, remoteAddress: string): Promise<JoinAnswer>;
  /** A heartbeat of the node whose certificate is `nodeId`'s. */
  heartbeat(nodeId: string): Promise<HeartbeatAnswer>;
  /** A joining manager's member has started as a learner: promote it once it has caught up. */
  promote(nodeId: string, memberId: string): Promise<void>;
  /** A certificate for the CSR's key with the node's role from etcd (a removed node gets none). */
  renew(nodeId: string, call: RenewCall): Promise<RenewAnswer>;
  /** A promoted node's etcd member, added as a learner, as a manager join adds it. */
  addManager(nodeId: string, call: ManagerCall): Promise<ManagerJoinAnswer>;
}
