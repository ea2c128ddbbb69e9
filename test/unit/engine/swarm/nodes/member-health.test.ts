import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
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

  it('revokes the liveness and election leases of a manager whose member was silent for lostAfterMs', async () => {
    const store = new MemoryStore();
    const lostMember = (await store.memberAdd(['https://10.0.0.2:2380'], false)).member;
    const okMember = (await store.memberAdd(['https://10.0.0.3:2380'], false)).member;
    const managers: Array<[string, string]> = [
      ['lost', lostMember.id],
      ['ok', okMember.id],
    ];
    const leases = new Map<string, string>();
    for (const [node, memberId] of managers) {
      await store.put(keys.manager(node), JSON.stringify({ memberId, peerUrl: '', addr: '' }));
      const live = await store.grantLease(60);
      await store.put(keys.live(node), `${node}:2377`, { lease: live.id }); // as OwnLiveness writes it
      leases.set(node, live.id);
    }
    // the lost manager leads the control loops; the other campaigns behind it
    const el = await store.grantLease(60);
    await store.campaign(keys.election, el.id, JSON.stringify({ NodeID: 'lost', Addr: 'a' }));
    const el2 = await store.grantLease(60);
    const second = store.campaign(keys.election, el2.id, JSON.stringify({ NodeID: 'ok', Addr: 'b' }));

    let now = 0;
    let silent = false;
    const health = new MemberHealth({
      probe: async (url) => !(silent && url === 'https://10.0.0.2:2380'),
      tls: () => tls,
      now: () => now,
    });
    await health.round(store, 800, undefined, 3000);
    silent = true;
    for (const t of [1000, 2000, 2900]) {
      now = t;
      await health.round(store, 800, undefined, 3000);
    }
    assert.ok(await store.get(keys.live('lost')), 'not yet: silent for less than 3 s');
    now = 3000;
    await health.round(store, 800, undefined, 3000);
    assert.equal(await store.get(keys.live('lost')), undefined, 'its node is down');
    assert.ok(await store.get(keys.live('ok')), 'the other is untouched');
    const leader = await second;
    assert.equal(leader.lease, el2.id, 'the other manager now leads');
    // once only per silence; back, and silent again: once more
    silent = false;
    now = 4000;
    await health.round(store, 800, undefined, 3000);
    assert.equal(health.reachability(lostMember.id), 'reachable');
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

  it('removes a member still a learner after the stale time (a failed manager join), never one promoted in time', async () => {
    const store = new MemoryStore();
    const failed = (await store.memberAdd(['https://10.0.0.4:2380'], true)).member;
    const joining = (await store.memberAdd(['https://10.0.0.5:2380'], true)).member;
    let now = 0;
    const health = new MemberHealth({
      probe: async () => true,
      tls: () => tls,
      now: () => now,
      staleLearnerMs: 60_000,
    });
    await health.round(store, 800);
    now = 30_000;
    await store.memberPromote(joining.id); // its join went through in time
    await health.round(store, 800);
    now = 59_000;
    await health.round(store, 800);
    assert.ok(
      (await store.memberList()).some((m) => m.id === failed.id),
      'kept before the stale time',
    );
    now = 60_000;
    await health.round(store, 800);
    const ids = (await store.memberList()).map((m) => m.id).sort();
    assert.deepEqual(ids, ['1', joining.id].sort(), 'the stale learner is gone, the promoted member stays');
    // a member another manager removed first is no failure
    const again = (await store.memberAdd(['https://10.0.0.6:2380'], true)).member;
    await health.round(store, 800);
    now = 200_000;
    const list = store.memberList.bind(store);
    store.memberList = async () => {
      const members = await list();
      await store.memberRemove(again.id);
      return members;
    };
    await health.round(store, 800);
    assert.equal(
      (await list()).some((m) => m.id === again.id),
      false,
    );
  });
});
