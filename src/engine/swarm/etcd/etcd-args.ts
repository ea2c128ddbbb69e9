/**
 * The command line of a manager's etcd member: client endpoint only a unix socket (relative to
 * the member's working directory, `<exec-root>/swarm/`, which etcd 3.4 names `etcd.sock:0`),
 * peers over https with client certificates whose CN must be `berth-etcd-peer`, the swarm's Raft
 * settings mapped onto etcd's, periodic compaction, a backend quota and requests large enough for
 * a config of 999 KiB (base64 inside JSON).
 */

/** The socket etcd makes in its working directory for `unix://etcd.sock:0`. */
export const ETCD_SOCKET_NAME = 'etcd.sock:0';
/** The CN etcd's peer port accepts (`--peer-cert-allowed-cn`); node certificates never carry it. */
export const ETCD_PEER_CN = 'berth-etcd-peer';
/** At least 4 MiB: a 1000 KiB config is ~1.33 MiB of base64, inside a JSON object, inside a txn. */
export const ETCD_MAX_REQUEST_BYTES = 8 * 1024 * 1024;
/** etcd's recommended ceiling is 8 GiB; 2 GiB is its default and far above what a swarm holds. */
export const ETCD_QUOTA_BACKEND_BYTES = 2 * 1024 * 1024 * 1024;

/** Swarm's Spec.Raft, as the API holds it. */
export interface RaftSettings {
  SnapshotInterval: number;
  KeepOldSnapshots: number;
  LogEntriesForSlowFollowers: number;
  HeartbeatTick: number;
  ElectionTick: number;
}

/** swarmkit's tick is 1 s; berth's is 100 ms, so that the defaults (1 and 10) give etcd's own. */
export const RAFT_TICK_MS = 100;

export interface EtcdMemberSpec {
  /** The member's name: the node ID. */
  name: string;
  dataDir: string;
  /** `https://<advertise address>:<peer port>`. */
  peerUrl: string;
  /** Every voting member at start, `name=url` (this one included). */
  initialCluster: { name: string; peerUrl: string }[];
  /** `new` for swarm init, `existing` for a manager joining. */
  clusterState: 'new' | 'existing';
  /** The cluster's token: the swarm's ID, so members of different swarms never mix. */
  clusterToken: string;
  peerTls: { certFile: string; keyFile: string; caFile: string };
  raft: RaftSettings;
  /** `swarm init --force-new-cluster`: restart from the data as a one-member cluster. */
  forceNewCluster?: boolean;
}

export function etcdArgs(spec: EtcdMemberSpec): string[] {
  const socket = `unix://${ETCD_SOCKET_NAME}`;
  const args = [
    `--name=${spec.name}`,
    `--data-dir=${spec.dataDir}`,
    `--listen-client-urls=${socket}`,
    `--advertise-client-urls=${socket}`,
    `--listen-peer-urls=${spec.peerUrl}`,
    `--initial-advertise-peer-urls=${spec.peerUrl}`,
    `--initial-cluster=${spec.initialCluster.map((m) => `${m.name}=${m.peerUrl}`).join(',')}`,
    `--initial-cluster-state=${spec.clusterState}`,
    `--initial-cluster-token=${spec.clusterToken}`,
    `--peer-cert-file=${spec.peerTls.certFile}`,
    `--peer-key-file=${spec.peerTls.keyFile}`,
    `--peer-trusted-ca-file=${spec.peerTls.caFile}`,
    '--peer-client-cert-auth=true',
    `--peer-cert-allowed-cn=${ETCD_PEER_CN}`,
    `--heartbeat-interval=${spec.raft.HeartbeatTick * RAFT_TICK_MS}`,
    `--election-timeout=${spec.raft.ElectionTick * RAFT_TICK_MS}`,
    `--snapshot-count=${spec.raft.SnapshotInterval}`,
    // a member cut off and back again asks before it campaigns (etcd 3.5's default): its higher
    // term no longer deposes a healthy leader, which left the swarm without one for an election
    '--pre-vote=true',
    '--auto-compaction-mode=periodic',
    '--auto-compaction-retention=1h',
    `--quota-backend-bytes=${ETCD_QUOTA_BACKEND_BYTES}`,
    `--max-request-bytes=${ETCD_MAX_REQUEST_BYTES}`,
    '--enable-v2=false',
    '--logger=zap',
    '--log-outputs=stderr',
  ];
  // 0 keeps etcd's own default (5)
  if (spec.raft.KeepOldSnapshots > 0) args.push(`--max-snapshots=${spec.raft.KeepOldSnapshots}`);
  if (spec.forceNewCluster) args.push('--force-new-cluster');
  return args;
}
