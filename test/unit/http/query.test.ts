import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../../src/common/errors.js';
import { checkFilterNames } from '../../../src/common/filters.js';
import { parseBool, parseFilters, parseIntParam } from '../../../src/http/query.js';
import { FrameDecoder, frame } from '../../../src/http/stream.js';

describe('query parsing', () => {
  it("reads booleans as dockerd does: '', 0, no, false, none (any case, trimmed) are false", () => {
    for (const v of ['1', 'true', 'True', 'TRUE', 'yes', '2', 'on', ' true '])
      assert.equal(parseBool(v), true, v);
    for (const v of ['0', 'false', 'False', 'FALSE', '', 'no', 'None', ' 0 '])
      assert.equal(parseBool(v), false, v);
    assert.equal(parseBool(null, true), true);
    assert.equal(parseBool(undefined), false);
  });

  it('reads integers strictly', () => {
    assert.equal(parseIntParam('10', 't'), 10);
    assert.equal(parseIntParam('-1', 't'), -1);
    assert.equal(parseIntParam(null, 't', 5), 5);
    assert.throws(() => parseIntParam('1.5', 't'), BerthError);
    assert.throws(() => parseIntParam('ten', 't'), BerthError);
  });

  it('refuses integers a number cannot hold (a stop with t=2^64 waited for ever)', () => {
    for (const v of [
      '18446744073709551616',
      '99999999999999999999',
      '-99999999999999999999',
      '9007199254740993',
    ])
      assert.throws(() => parseIntParam(v, 't'), /value out of range/);
    assert.equal(parseIntParam('9007199254740991', 't'), 9007199254740991);
  });

  it('reads filters as map of arrays and legacy map of bools', () => {
    assert.deepEqual(
      [...parseFilters('{"status":["running","exited"]}')],
      [['status', ['running', 'exited']]],
    );
    // dockerd's matchers use the keys of the map whatever their booleans
    assert.deepEqual(
      [...parseFilters('{"status":{"running":true,"paused":false}}')],
      [['status', ['running', 'paused']]],
    );
    // no values: no filter
    assert.deepEqual([...parseFilters('{"name":[],"status":{},"label":null,"id":["x"]}')], [['id', ['x']]]);
    assert.equal(parseFilters('').size, 0);
    assert.throws(() => parseFilters('{"name":[1]}'), /invalid filter "name"/);
    assert.throws(() => parseFilters('{"name":"x"}'), /invalid filter "name"/);
    assert.throws(() => parseFilters('{bad'), /invalid filter/);
    assert.throws(() => parseFilters('["a"]'), /invalid filter/);
    assert.throws(
      () => checkFilterNames(parseFilters('{"nope":["1"]}'), ['status']),
      /invalid filter 'nope'/,
    );
  });
});

describe('stdio frames', () => {
  it('round-trips multiplexed frames across chunk boundaries', () => {
    const bytes = Buffer.concat([frame(1, Buffer.from('out')), frame(2, Buffer.from('err!'))]);
    const d = new FrameDecoder();
    const got = [
      ...d.push(bytes.subarray(0, 5)),
      ...d.push(bytes.subarray(5, 13)),
      ...d.push(bytes.subarray(13)),
    ];
    assert.deepEqual(
      got.map((f) => [f.stream, f.payload.toString()]),
      [
        [1, 'out'],
        [2, 'err!'],
      ],
    );
  });
});
