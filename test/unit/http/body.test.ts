import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_JSON_DEPTH, parseJsonBody } from '../../../src/http/body.js';

const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

describe('parseJsonBody', () => {
  it('takes bodies nested up to the limit, brackets inside strings not counted', () => {
    assert.ok(parseJsonBody(Buffer.from(nested(MAX_JSON_DEPTH)), 'application/json'));
    const text = `{"s":"${'{['.repeat(5000)}\\"","t":[[1]]}`;
    assert.deepEqual(parseJsonBody(Buffer.from(text), undefined), { s: `${'{['.repeat(5000)}"`, t: [[1]] });
  });

  it('refuses a body nested deeper than any API body with a 400, not a stack overflow later', () => {
    // 100 000 levels: JSON.parse takes it, JSON.stringify of it overflows the stack
    assert.throws(
      () => parseJsonBody(Buffer.from(nested(100_000)), 'application/json'),
      (err: Error & { kind?: string }) =>
        err.kind === 'InvalidParameter' &&
        err.message === `invalid JSON body: exceeded max depth of ${MAX_JSON_DEPTH}`,
    );
  });
});
