import type { SwarmNode, SwarmSpec } from './swarm.types.js';

/** The values this room keeps in etcd (keys.ts): the objects as the API shows them, minus Version. */

/** `P/cluster`: the Swarm object (no Version: that is the key's mod revision). */
export interface StoredCluster {
  ID: string;
  CreatedAt: string;
  UpdatedAt: string;
  Spec: SwarmSpec;
  RootRotationInProgress: boolean;
  DefaultAddrPool: string[];
  SubnetSize: number;
  DataPathPort: number;
  JoinTokens: { Worker: string; Manager: string };
  /** Private: never shown by the API. The unlock key, sealed with the DEK, while autolock is on. */
  _?: { unlockKey?: string };
}

/** `P/ca/root`, and `P/ca/next` while a root rotation runs. */
export interface StoredCa {
  cert: string;
  /** The root key, sealed with the DEK. */
  key: string;
  /** After a rotation: this root's certificate signed by the root before it (what chains its certificates to that one). */
  crossSigned?: string;
}

/** `P/managers/<id>`: how to reach a manager. */
export interface StoredManager {
  memberId: string;
  peerUrl: string;
  addr: string;
}

/**
 * `P/nodes/<id>`: the Node without Version (its key's mod revision) and ManagerStatus (from etcd),
 * with what the API never shows: the node's data-path address (its DataPathAddr, else its advertise
 * address; dockerd keeps it in libnetwork alone, no Node field carries it).
 */
export type StoredNode = Omit<SwarmNode, 'Version' | 'Status' | 'ManagerStatus'> & {
  Status: { State: SwarmNode['Status']['State']; Message?: string; Addr: string };
  _?: NodePrivate;
};

export interface NodePrivate {
  /** Where other nodes send this one's VXLAN traffic (the VXLAN devices' `local` on it). */
  dataPathAddr?: string;
}

/** A node record's data-path address: its own, else its advertise address (older records). */
export function dataPathAddrOf(n: { Status?: { Addr?: string }; _?: NodePrivate }): string {
  return n._?.dataPathAddr || n.Status?.Addr || '';
}

/** The etcd peer certificate's lifetime: as long as the root's, re-issued with the node's later. */
export const PEER_CERT_MS = 10 * 365 * 24 * 3600 * 1000;
