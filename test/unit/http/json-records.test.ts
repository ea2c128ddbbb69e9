import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JSON_RECORD_TYPES, NDJSON, negotiate } from '../../../src/http/json-records.js';

describe('JSON record streams: negotiation', () => {
  it('takes the best named type, a wildcard only after an exact name, the fallback otherwise', () => {
    assert.equal(negotiate(undefined, JSON_RECORD_TYPES, NDJSON), NDJSON);
    assert.equal(negotiate(['application/json-seq'], JSON_RECORD_TYPES, NDJSON), 'application/json-seq');
    assert.equal(negotiate(['*/*'], JSON_RECORD_TYPES, NDJSON), 'application/jsonl', 'the first offer');
    assert.equal(
      negotiate(['application/*;q=0.5, application/x-ndjson'], JSON_RECORD_TYPES, 'x/y'),
      'application/x-ndjson',
    );
    assert.equal(negotiate(['text/plain'], JSON_RECORD_TYPES, NDJSON), NDJSON);
    assert.equal(negotiate(['application/jsonl;q=0'], JSON_RECORD_TYPES, NDJSON), NDJSON);
  });
});
