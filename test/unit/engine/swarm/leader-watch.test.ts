import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaderWatch } from '../../../../src/engine/swarm/runtime/leader-watch.js';
import type { ClusterStore, StoreStatus } from '../../../../src/engine/swarm/store/cluster-store.js';

function fakeStore(answer: () => Promise<Partial<StoreStatus>>): ClusterStore {
  return { status: async () => (await answer()) as StoreStatus } as unknown as ClusterStore;
}

describe('a manager watching its member for a leader', () => {
  it('says lost only once the member has been leaderless longer than an election', async () => {
    let now = 0;
    let leader = '42';
    const watch = new LeaderWatch(
      fakeStore(async () => ({ leader })),
      3000,
      () => now,
    );
    await watch.check();
    assert.equal(watch.lost, false);
    leader = '0';
    await watch.check();
    now = 2000;
    await watch.check();
    assert.equal(watch.lost, false, 'an election may take this long');
    now = 3000;
    assert.equal(watch.lost, true);
    leader = '7';
    await watch.check();
    assert.equal(watch.lost, false, 'a new leader ends it at once');
  });

  it('counts a member that does not answer as leaderless', async () => {
    let now = 0;
    const watch = new LeaderWatch(
      fakeStore(() => new Promise(() => {})),
      3000,
      () => now,
      20,
    );
    await watch.check();
    now = 5000;
    assert.equal(watch.lost, true);
    const failing = new LeaderWatch(
      fakeStore(async () => {
        throw new Error('ECONNREFUSED');
      }),
      0,
      () => now,
    );
    await failing.check();
    assert.equal(failing.lost, true);
  });
});
