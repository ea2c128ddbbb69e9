import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { MemberHealth } from '../../../../../src/engine/swarm/nodes/member-health.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';

const tls = { certFile: '/c', keyFile: '/k', caFile: '/ca' };

describe('MemberHealth (ManagerStatus.Reachability from the etcd members)', () => {
  it('probes every voting member’s peer URL; a learner is unknown; one that does not answer is unreachable', async () => {
    const store = new MemoryStore();
    const b = (await store.memberAdd(['https://10.0.0.2:2380'], false)).member;
    const c = (await store.memberAdd(['https://10.0.0.3:2380'], true)).member;
    const down = new Set(['https://10.0.0.2:2380']);
    const asked: string[] = [];
    const health = new MemberHealth({
      probe: async (url, files, timeoutMs) => {
        asked.push(url);
        assert.deepEqual(files, tls);
        assert.equal(timeoutMs, 800);
        return !down.has(url);
      },
      tls: () => tls,
    });
    assert.equal(health.reachability('1'), undefined, 'nothing known before a round');
    await health.round(store, 800);
    assert.deepEqual(
      asked.sort(),
      ['http://localhost:2380', 'https://10.0.0.2:2380'],
      'a learner is not probed',
    );
    assert.equal(health.reachability('1'), 'reachable');
    assert.equal(health.reachability(b.id), 'unreachable');
    assert.equal(health.reachability(c.id), 'unknown');

    // the member is back and the learner promoted: the next round says so
    down.clear();
    await store.memberPromote(c.id);
    await health.round(store, 800);
    assert.equal(health.reachability(b.id), 'reachable');
    assert.equal(health.reachability(c.id), 'reachable');
    // a removed member is no longer known
    await store.memberRemove(b.id);
    await health.round(store, 800);
    assert.equal(health.reachability(b.id), undefined);
  });

  it('runs once per heartbeat as a manager loop, and forgets everything when stopped', async () => {
    const store = new MemoryStore();
    let rounds = 0;
    const health = new MemberHealth({
      probe: async () => {
        rounds++;
        return true;
      },
      tls: () => tls,
      defaultPeriodMs: 20,
    });
    await health.startManager({
      nodeId: 'n',
      addr: 'a:1',
      store,
      dek: Buffer.alloc(32),
      log: new Logger('error'),
    });
    for (let i = 0; i < 200 && rounds < 3; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(rounds >= 3, `rounds: ${rounds}`);
    assert.equal(health.reachability('1'), 'reachable');
    await health.stop();
    const after = rounds;
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(rounds, after, 'no round after stop');
    assert.equal(health.reachability('1'), undefined);
  });
});
