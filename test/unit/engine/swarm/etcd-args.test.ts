import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { etcdArgs } from '../../../../src/engine/swarm/etcd/etcd-args.js';
import { memberSpec } from './etcd-spec.fixture.js';

const spec = memberSpec();

describe('etcdArgs', () => {
  it("maps the swarm's Raft settings onto etcd's flags", () => {
    const args = etcdArgs(spec);
    assert.ok(args.includes('--heartbeat-interval=100'));
    assert.ok(args.includes('--election-timeout=1000'));
    assert.ok(args.includes('--snapshot-count=10000'));
    assert.ok(!args.some((a) => a.startsWith('--max-snapshots')), 'etcd keeps its default for 0');
    assert.ok(args.includes('--pre-vote=true'), 'a member back from a partition does not depose the leader');
    const tuned = etcdArgs({
      ...spec,
      raft: { ...spec.raft, HeartbeatTick: 3, ElectionTick: 30, KeepOldSnapshots: 2 },
    });
    assert.ok(tuned.includes('--heartbeat-interval=300'));
    assert.ok(tuned.includes('--election-timeout=3000'));
    assert.ok(tuned.includes('--max-snapshots=2'));
  });

  it('serves clients only on the unix socket and peers only over mutual TLS', () => {
    const args = etcdArgs(spec);
    assert.ok(args.includes('--listen-client-urls=unix://etcd.sock:0'));
    assert.ok(args.includes('--listen-peer-urls=https://10.0.0.1:2380'));
    assert.ok(args.includes('--peer-client-cert-auth=true'));
    assert.ok(args.includes('--peer-cert-allowed-cn=berth-etcd-peer'));
    assert.ok(args.includes('--initial-cluster=node0=https://10.0.0.2:2380,node1=https://10.0.0.1:2380'));
    assert.ok(args.includes('--initial-cluster-state=existing'));
  });

  it('compacts, keeps a quota and takes requests of at least 4 MiB', () => {
    const args = etcdArgs(spec);
    assert.ok(args.includes('--auto-compaction-mode=periodic'));
    assert.ok(args.some((a) => a.startsWith('--quota-backend-bytes=')));
    const max = Number(args.find((a) => a.startsWith('--max-request-bytes='))?.split('=')[1]);
    assert.ok(max >= 4 * 1024 * 1024);
    assert.ok(!args.includes('--force-new-cluster'));
    assert.ok(etcdArgs({ ...spec, forceNewCluster: true }).includes('--force-new-cluster'));
  });
});
