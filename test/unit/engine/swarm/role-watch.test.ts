import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keys } from '../../../../src/engine/swarm/keys.js';
import { RoleWatch } from '../../../../src/engine/swarm/runtime/role-watch.js';
import { MemoryStore } from '../../../../src/engine/swarm/store/memory-store.js';

describe("a manager's role watch", () => {
  it('says so when its record turns worker, or its store stops answering while others are known', async () => {
    const store = new MemoryStore(() => 0);
    const record = (role: string) => JSON.stringify({ ID: 'm1', Spec: { Role: role } });
    await store.put(keys.node('m1'), record('manager'));
    let calls = 0;
    const watch = new RoleWatch(store, 'm1', () => calls++);
    await watch.check();
    assert.equal(calls, 0);
    assert.deepEqual(watch.managers, []);
    store.failWith = new Error('etcdserver: request timed out');
    await watch.check();
    assert.equal(calls, 0, 'no other manager known: nobody to ask');
    store.failWith = undefined;
    await store.put(
      keys.manager('m1'),
      JSON.stringify({ memberId: '1', peerUrl: '', addr: '10.0.0.1:2377' }),
    );
    await store.put(
      keys.manager('m2'),
      JSON.stringify({ memberId: '2', peerUrl: '', addr: '10.0.0.2:2377' }),
    );
    await watch.check();
    assert.deepEqual(watch.managers, [{ NodeID: 'm2', Addr: '10.0.0.2:2377' }]);
    assert.equal(calls, 0);
    await store.put(keys.node('m1'), record('worker'));
    await watch.check();
    assert.equal(calls, 1);
    store.failWith = new Error('etcdserver: member removed');
    await watch.check();
    assert.equal(calls, 2);
  });
});
