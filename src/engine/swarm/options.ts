import type { Logger } from '../../common/log.js';
import type { InterfaceLister } from './addresses.js';
import type { SwarmPublish } from './cluster-events.js';
import type { EtcdMemberSpec } from './etcd/etcd-args.js';
import type { RoleLoops } from './role-loops.js';
import type { ClusterStore } from './store/cluster-store.js';

/** The one etcd member a manager runs (EtcdSupervisor; a fake in unit tests). */
export interface MemberRunner {
  readonly socketPath: string;
  start(spec: EtcdMemberSpec, timeoutMs?: number): Promise<void>;
  stop(graceMs?: number): Promise<void>;
}

export interface HostDescription {
  hostname: string;
  nanoCpus: number;
  memoryBytes: number;
}

/** What swarm mode is given by the engine (create.ts: the real parts; unit tests: fakes). */
export interface SwarmServiceOptions {
  dataRoot: string;
  engineVersion: string;
  /** `--swarm-etcd-peer-port`: where this manager's member listens for its peers (2380). */
  peerPort: number;
  member: MemberRunner;
  /** A store client on the member's socket. */
  openStore: (socketPath: string) => ClusterStore;
  interfaces: InterfaceLister;
  describeHost: () => HostDescription;
  plugins: () => { Type: string; Name: string }[];
  log: Logger;
  now?: () => Date;
  /** Where a manager's swarm-scope events go (the engine's event bus). */
  publish?: SwarmPublish;
  /** The other rooms' loops (orchestrator on managers, agent on every node); none by default. */
  loops?: RoleLoops;
}
