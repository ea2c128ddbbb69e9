import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import { ClusterEvents } from '../../../../src/engine/swarm/cluster-events.js';
import { keys } from '../../../../src/engine/swarm/keys.js';
import { MemoryStore } from '../../../../src/engine/swarm/store/memory-store.js';

const node = (id: string, hostname: string, role = 'manager') =>
  JSON.stringify({
    ID: id,
    Spec: { Role: role, Availability: 'active' },
    Description: { Hostname: hostname },
  });

describe('cluster events (memory store)', () => {
  it("publishes moby's leader.old/new pair when etcd's leader moves, once per change", async () => {
    const store = new MemoryStore(() => 0);
    await store.put(keys.node('n1'), node('n1', 'h1'));
    await store.put(keys.node('n2'), node('n2', 'h2'));
    await store.put(keys.manager('n1'), JSON.stringify({ memberId: '1', peerUrl: '', addr: '' }));
    const published: string[] = [];
    const events = new ClusterEvents(
      store,
      (type, action, id, attrs) => published.push(`${type} ${action} ${id} ${JSON.stringify(attrs)}`),
      new Logger('error'),
      3_600_000,
    );
    await events.start();
    try {
      // the second manager's record arrives through the watch
      await store.put(keys.manager('n2'), JSON.stringify({ memberId: '2', peerUrl: '', addr: '' }));
      await new Promise((r) => setImmediate(r));
      await events.checkLeader();
      assert.deepEqual(published, [], 'no change, no event');
      store.raftLeader = '2';
      await events.checkLeader();
      await events.checkLeader();
      assert.deepEqual(published, [
        'node update n1 {"name":"h1","leader.old":"true","leader.new":"false"}',
        'node update n2 {"name":"h2","leader.old":"false","leader.new":"true"}',
      ]);
      store.raftLeader = '0';
      await events.checkLeader();
      assert.equal(published.length, 2, 'no leader (an election under way) is no event');
    } finally {
      events.stop();
      store.close();
    }
  });
});
