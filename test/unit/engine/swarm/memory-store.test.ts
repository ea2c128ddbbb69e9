import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { prefixEnd } from '../../../../src/engine/swarm/store/cluster-store.js';
import { MemoryStore } from '../../../../src/engine/swarm/store/memory-store.js';
import { storeContract } from './store-contract.js';

describe('MemoryStore', () => {
  storeContract(() => new MemoryStore(), '/t');

  it('expires a lease by its clock and deletes its keys', async () => {
    let now = 1_000_000;
    const s = new MemoryStore(() => now);
    const lease = await s.grantLease(3);
    await s.put('/live/n1', 'x', { lease: lease.id });
    now += 2_000;
    assert.equal(await s.keepAlive(lease.id), 3);
    now += 2_999;
    assert.equal((await s.get('/live/n1'))?.value, 'x');
    now += 1;
    assert.equal(await s.get('/live/n1'), undefined);
    await assert.rejects(s.put('/k', 'v', { lease: lease.id }), /lease not found/);
  });

  it('adds learners, promotes and removes members', async () => {
    const s = new MemoryStore();
    const { member, members } = await s.memberAdd(['https://10.0.0.2:2380'], true);
    assert.equal(member.isLearner, true);
    assert.equal(members.length, 2);
    await assert.rejects(s.memberPromote('99'), /member not found/);
    const promoted = await s.memberPromote(member.id);
    assert.equal(promoted.find((m) => m.id === member.id)?.isLearner, false);
    await assert.rejects(s.memberPromote(member.id), /only promote a learner/);
    assert.equal((await s.memberRemove(member.id)).length, 1);
  });

  it('fails every call while told to (a lost quorum)', async () => {
    const s = new MemoryStore();
    s.failWith = new Error('etcdserver: request timed out');
    await assert.rejects(s.get('/x'), /timed out/);
  });
});

describe('prefixEnd', () => {
  it("is etcd's range end of a prefix", () => {
    assert.equal(prefixEnd(Buffer.from('/a/')).toString(), '/a0');
    assert.deepEqual(prefixEnd(Buffer.from([0x61, 0xff])), Buffer.from([0x62]));
    assert.deepEqual(prefixEnd(Buffer.from([0xff])), Buffer.from([0]));
  });
});
