import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '../../../../src/common/log.js';
import { keys } from '../../../../src/engine/swarm/keys.js';
import { OwnLiveness } from '../../../../src/engine/swarm/runtime/liveness.js';
import { MemoryStore } from '../../../../src/engine/swarm/store/memory-store.js';

describe("a manager's own liveness", () => {
  it('takes its key back when another lease holds it (a dispatcher put it while the member was cut off)', async () => {
    const store = new MemoryStore(() => Date.now());
    const liveness = new OwnLiveness(store, 'm1', '10.0.0.1', new Logger('error'));
    await liveness.start(50);
    try {
      const own = (await store.get(keys.live('m1')))?.lease;
      assert.ok(own && own !== '0');
      const other = await store.grantLease(1);
      await store.put(keys.live('m1'), 'up', { lease: other.id });
      let lease = (await store.get(keys.live('m1')))?.lease;
      for (let i = 0; i < 40 && lease !== own; i++) {
        await sleep(25);
        lease = (await store.get(keys.live('m1')))?.lease;
      }
      assert.equal(lease, own);
    } finally {
      await liveness.revoke();
    }
    assert.equal(await store.get(keys.live('m1')), undefined, 'revoked: the key goes at once');
  });
});
