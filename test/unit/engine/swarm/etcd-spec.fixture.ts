import type { EtcdMemberSpec } from '../../../../src/engine/swarm/etcd/etcd-args.js';

/** A member's spec as a manager joining a two-member cluster would have it (unit tests). */
export function memberSpec(over: Partial<EtcdMemberSpec> = {}): EtcdMemberSpec {
  return {
    name: 'node1',
    dataDir: '/var/lib/berth/swarm/etcd',
    peerUrl: 'https://10.0.0.1:2380',
    initialCluster: [
      { name: 'node0', peerUrl: 'https://10.0.0.2:2380' },
      { name: 'node1', peerUrl: 'https://10.0.0.1:2380' },
    ],
    clusterState: 'existing',
    clusterToken: 'cluster-id',
    peerTls: { certFile: '/p.crt', keyFile: '/p.key', caFile: '/ca.crt' },
    raft: {
      SnapshotInterval: 10000,
      KeepOldSnapshots: 0,
      LogEntriesForSlowFollowers: 500,
      HeartbeatTick: 1,
      ElectionTick: 10,
    },
    ...over,
  };
}
