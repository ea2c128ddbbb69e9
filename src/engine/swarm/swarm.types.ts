import type { TlsInfo } from './ca/root-ca.js';

/** The Swarm API's objects (moby's api/types/swarm), as berth stores and returns them. */

export interface Version {
  Index: number;
}

export interface ExternalCa {
  Protocol: string;
  URL: string;
  Options?: Record<string, string>;
  CACert: string;
}

export interface SwarmSpec {
  Name: string;
  Labels: Record<string, string>;
  Orchestration: { TaskHistoryRetentionLimit?: number };
  /** Zero (or absent) fields mean swarmkit's defaults (spec.ts effective*). */
  Raft: {
    SnapshotInterval?: number;
    KeepOldSnapshots?: number;
    LogEntriesForSlowFollowers?: number;
    ElectionTick: number;
    HeartbeatTick: number;
  };
  Dispatcher: { HeartbeatPeriod?: number };
  CAConfig: {
    NodeCertExpiry?: number;
    ExternalCAs?: ExternalCa[];
    SigningCACert?: string;
    SigningCAKey?: string;
    ForceRotate?: number;
  };
  TaskDefaults: { LogDriver?: { Name: string; Options?: Record<string, string> } };
  EncryptionConfig: { AutoLockManagers: boolean };
}

/**
 * A Spec as a request gives it: every part optional; a zero or absent value keeps what is there
 * (moby's MergeSwarmSpecToGRPC), except AutoLockManagers, which is always taken.
 */
export interface SpecUpdate {
  Name?: string;
  Labels?: Record<string, string> | null;
  Orchestration?: { TaskHistoryRetentionLimit?: number | null } | null;
  Raft?: {
    SnapshotInterval?: number;
    KeepOldSnapshots?: number | null;
    LogEntriesForSlowFollowers?: number;
    ElectionTick?: number;
    HeartbeatTick?: number;
  } | null;
  Dispatcher?: { HeartbeatPeriod?: number } | null;
  CAConfig?: {
    NodeCertExpiry?: number;
    ExternalCAs?: ExternalCa[] | null;
    SigningCACert?: string;
    SigningCAKey?: string;
    ForceRotate?: number;
  } | null;
  TaskDefaults?: { LogDriver?: { Name?: string; Options?: Record<string, string> | null } | null } | null;
  EncryptionConfig?: { AutoLockManagers?: boolean } | null;
}

export interface JoinTokens {
  Worker: string;
  Manager: string;
}

/** What GET /info's Swarm.Cluster shows (the Swarm object without the join tokens). */
export interface ClusterInfo {
  ID: string;
  Version: Version;
  CreatedAt: string;
  UpdatedAt: string;
  Spec: SwarmSpec;
  TLSInfo: TlsInfo;
  RootRotationInProgress: boolean;
  DefaultAddrPool: string[];
  SubnetSize: number;
  DataPathPort: number;
}

export interface Swarm extends ClusterInfo {
  JoinTokens: JoinTokens;
}

export type NodeRole = 'manager' | 'worker';
export type NodeAvailability = 'active' | 'pause' | 'drain';

export interface SwarmNode {
  ID: string;
  Version: Version;
  CreatedAt: string;
  UpdatedAt: string;
  Spec: { Name?: string; Labels: Record<string, string>; Role: NodeRole; Availability: NodeAvailability };
  Description: {
    Hostname: string;
    Platform: { Architecture: string; OS: string };
    Resources: { NanoCPUs: number; MemoryBytes: number };
    Engine: {
      EngineVersion: string;
      Labels?: Record<string, string>;
      Plugins: { Type: string; Name: string }[];
    };
    TLSInfo: TlsInfo;
  };
  Status: { State: 'unknown' | 'down' | 'ready' | 'disconnected'; Message?: string; Addr: string };
  ManagerStatus?: { Leader?: boolean; Reachability: 'unknown' | 'unreachable' | 'reachable'; Addr: string };
}

/** POST /nodes/{id}/update's body. */
export interface NodeSpecUpdate {
  Name?: string;
  Labels?: Record<string, string> | null;
  Role?: string;
  Availability?: string;
}

export type LocalNodeState = 'inactive' | 'pending' | 'active' | 'error' | 'locked';

/** GET /info's Swarm. */
export interface SwarmInfo {
  NodeID: string;
  NodeAddr: string;
  LocalNodeState: LocalNodeState;
  ControlAvailable: boolean;
  Error: string;
  RemoteManagers: { NodeID: string; Addr: string }[] | null;
  Nodes?: number;
  Managers?: number;
  Cluster?: ClusterInfo;
}

/** GET /info's Swarm of an engine that is in no swarm. */
export function inactiveSwarmInfo(): SwarmInfo {
  return {
    NodeID: '',
    NodeAddr: '',
    LocalNodeState: 'inactive',
    ControlAvailable: false,
    Error: '',
    RemoteManagers: null,
  };
}

/** POST /swarm/init's body (fields too new for the request's version already dropped). */
export interface InitRequest {
  ListenAddr?: string;
  AdvertiseAddr?: string;
  DataPathAddr?: string;
  DataPathPort?: number;
  DefaultAddrPool?: string[] | null;
  SubnetSize?: number;
  ForceNewCluster?: boolean;
  Spec?: SpecUpdate | null;
  AutoLockManagers?: boolean;
  Availability?: string;
}

/** POST /swarm/join's body. */
export interface JoinRequest {
  ListenAddr?: string;
  AdvertiseAddr?: string;
  DataPathAddr?: string;
  RemoteAddrs?: string[] | null;
  JoinToken?: string;
  Availability?: string;
}

/** POST /swarm/update's flags. */
export interface UpdateFlags {
  rotateWorkerToken: boolean;
  rotateManagerToken: boolean;
  rotateManagerUnlockKey: boolean;
}
