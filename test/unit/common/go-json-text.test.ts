import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { goJsonText } from '../../../src/common/go-json-text.js';

describe('goJsonText', () => {
  it("writes integers beyond 2^53 as Go's int64/uint64 read them, the rest as JSON.stringify", () => {
    assert.equal(
      goJsonText({ a: 2 ** 63, b: -(2 ** 63), c: 2 ** 64, d: 2 ** 53 + 2, e: 1.5, f: 'x', g: [1e19] }),
      '{"a":9223372036854775807,"b":-9223372036854775808,"c":18446744073709551615,"d":9007199254740994,"e":1.5,"f":"x","g":[10000000000000000000]}',
    );
    assert.equal(goJsonText({ s: '__go_int_0_1__' }), '{"s":"__go_int_0_1__"}');
    assert.equal(goJsonText(undefined), 'null');
    assert.equal(
      goJsonText({ k: -1 }, (key, v) => (key === 'k' && v === -1 ? '42' : undefined)),
      '{"k":42}',
    );
  });
});
