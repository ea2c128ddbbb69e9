import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomId, shortId } from '../../../src/common/ids.js';

describe('random identifiers', () => {
  it('are 64 hex digits, all different, across many refills of the entropy pool', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const id = randomId();
      assert.match(id, /^[0-9a-f]{64}$/);
      assert.ok(!seen.has(id), 'an identifier came twice');
      seen.add(id);
    }
    // every hex digit shows up at every position now and then: the bytes are not a short cycle
    const first = new Set([...seen].map((id) => id[0]));
    assert.equal(first.size, 16);
    assert.equal(shortId(`sha256:${[...seen][0]}`), [...seen][0]?.slice(0, 12));
  });
});
