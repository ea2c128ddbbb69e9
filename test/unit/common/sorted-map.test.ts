import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sortedMap } from '../../../src/common/sorted-map.js';

describe('sortedMap', () => {
  it("orders keys as Go's encoding/json writes a map", () => {
    assert.deepEqual(Object.keys(sortedMap({ zz: 1, aa: 2, '80/tcp': 3, '53/udp': 4 })), [
      '53/udp',
      '80/tcp',
      'aa',
      'zz',
    ]);
    const inOrder = { a: 1, b: 2 };
    assert.equal(sortedMap(inOrder), inOrder);
    assert.equal(sortedMap(null), null);
    assert.equal(sortedMap(undefined), undefined);
  });
});
