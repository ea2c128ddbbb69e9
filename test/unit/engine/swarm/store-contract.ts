import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ClusterStore, WatchEvent } from '../../../../src/engine/swarm/store/cluster-store.js';

/**
 * What every ClusterStore must do, as etcd does it: run against the in-memory fake (unit) and a
 * real etcd member (integration), so that the fake cannot drift from etcd.
 */
export function storeContract(open: () => ClusterStore, prefix: string): void {
  it('puts, gets, ranges by prefix and deletes, with revisions', async () => {
    const s = open();
    const r1 = await s.put(`${prefix}/a/1`, 'one');
    const r2 = await s.put(`${prefix}/a/2`, 'two ✓');
    await s.put(`${prefix}/b`, 'other');
    assert.ok(r2 > r1);
    const got = await s.get(`${prefix}/a/1`);
    assert.equal(got?.value, 'one');
    assert.equal(got?.createRevision, r1);
    assert.equal(got?.modRevision, r1);
    assert.equal(got?.version, 1);
    const r3 = await s.put(`${prefix}/a/1`, 'uno');
    const again = await s.get(`${prefix}/a/1`);
    assert.equal(again?.modRevision, r3);
    assert.equal(again?.createRevision, r1);
    assert.equal(again?.version, 2);
    const range = await s.range(`${prefix}/a/`);
    assert.deepEqual(
      range.kvs.map((k) => [k.key, k.value]),
      [
        [`${prefix}/a/1`, 'uno'],
        [`${prefix}/a/2`, 'two ✓'],
      ],
    );
    assert.ok(range.revision >= r3);
    assert.equal(await s.get(`${prefix}/none`), undefined);
    assert.equal(await s.delete(`${prefix}/a/`, { prefix: true }), 2);
    assert.equal((await s.range(`${prefix}/a/`)).kvs.length, 0);
    assert.equal(await s.delete(`${prefix}/b`), 1);
    s.close();
  });

  it('compare-and-swaps on the mod revision and creates only when absent', async () => {
    const s = open();
    const key = `${prefix}/cas`;
    const create = await s.txn(
      [{ key, target: 'create', op: 'equal', value: 0 }],
      [{ put: { key, value: 'v1' } }],
    );
    assert.equal(create.succeeded, true);
    const second = await s.txn(
      [{ key, target: 'create', op: 'equal', value: 0 }],
      [{ put: { key, value: 'lost' } }],
      [{ get: { key } }],
    );
    assert.equal(second.succeeded, false);
    assert.equal(second.gets[0]?.[0]?.value, 'v1');
    const mod = second.gets[0]?.[0]?.modRevision ?? 0;
    const ok = await s.txn(
      [{ key, target: 'mod', op: 'equal', value: mod }],
      [{ put: { key, value: 'v2' } }],
    );
    assert.equal(ok.succeeded, true);
    const stale = await s.txn(
      [{ key, target: 'mod', op: 'equal', value: mod }],
      [{ put: { key, value: 'v3' } }],
    );
    assert.equal(stale.succeeded, false);
    assert.equal((await s.get(key))?.value, 'v2');
    const both = await s.txn(
      [{ key, target: 'value', op: 'equal', value: 'v2' }],
      [{ delete: { key } }, { put: { key: `${key}-moved`, value: 'v2' } }],
    );
    assert.equal(both.succeeded, true);
    assert.equal(await s.get(key), undefined);
    assert.equal(await s.delete(`${key}-moved`), 1);
    s.close();
  });

  it('binds keys to leases: keepalive renews, revoke deletes, and a watch sees both', async () => {
    const s = open();
    const events: WatchEvent[] = [];
    const w = s.watch(`${prefix}/live/`, 0, {
      onEvents: (e) => events.push(...e),
      onError: () => {},
    });
    // a real watch is created asynchronously: give it a moment before the first write
    await new Promise((r) => setTimeout(r, 200));
    const lease = await s.grantLease(30);
    assert.equal(lease.ttl, 30);
    await s.put(`${prefix}/live/n1`, 'up', { lease: lease.id });
    assert.equal((await s.get(`${prefix}/live/n1`))?.lease, lease.id);
    assert.ok((await s.keepAlive(lease.id)) > 0);
    await s.revokeLease(lease.id);
    assert.equal(await s.get(`${prefix}/live/n1`), undefined);
    assert.equal(await s.keepAlive(lease.id), 0);
    for (let i = 0; i < 50 && events.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    w.close();
    assert.deepEqual(
      events.map((e) => [e.type, e.kv.key]),
      [
        ['put', `${prefix}/live/n1`],
        ['delete', `${prefix}/live/n1`],
      ],
    );
    assert.equal(events[0]?.kv.value, 'up');
    s.close();
  });

  it('elects one leader at a time by lease', async () => {
    const s = open();
    const name = `${prefix}/election`;
    const l1 = await s.grantLease(30);
    const l2 = await s.grantLease(30);
    const first = await s.campaign(name, l1.id, 'node-1');
    assert.equal((await s.leader(name))?.value, 'node-1');
    let secondWon = false;
    const second = s.campaign(name, l2.id, 'node-2').then((k) => {
      secondWon = true;
      return k;
    });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(secondWon, false);
    await s.revokeLease(l1.id);
    const k2 = await second;
    assert.ok(k2.revision > first.revision);
    assert.equal((await s.leader(name))?.value, 'node-2');
    await s.resign(k2);
    assert.equal(await s.leader(name), undefined);
    await s.revokeLease(l2.id);
    s.close();
  });

  it('lists members and reports its status', async () => {
    const s = open();
    const members = await s.memberList();
    assert.equal(members.length, 1);
    assert.equal(members[0]?.isLearner, false);
    const status = await s.status();
    assert.equal(status.version, '3.4.23');
    assert.ok(status.revision > 0);
    assert.equal(status.leader, status.memberId);
    s.close();
  });
}
