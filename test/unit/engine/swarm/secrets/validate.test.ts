import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeObjectSpec } from '../../../../../src/engine/api/schema/secrets.schema.js';
import { checkName, decodeBase64 } from '../../../../../src/engine/swarm/secrets/validate.js';

describe('secret and config specs', () => {
  it('reads base64 as Go reads a []byte: standard alphabet, padded, newlines skipped', () => {
    assert.equal(decodeBase64('aGk=').toString(), 'hi');
    assert.equal(decodeBase64('aGkK').toString(), 'hi\n');
    assert.equal(decodeBase64('aG\nk=').toString(), 'hi');
    assert.equal(decodeBase64('').length, 0);
    assert.throws(
      () => decodeBase64('!!!'),
      /^Error: illegal base64 data at input byte 0$|illegal base64 data at input byte 0/,
    );
    assert.throws(() => decodeBase64('aGk'), /illegal base64 data at input byte 0/);
    assert.throws(() => decodeBase64('aGk=aGk='), /illegal base64 data at input byte 3/);
    assert.throws(() => decodeBase64('aG-_'), /illegal base64 data at input byte 2/);
  });

  it('allows swarmkit names only', () => {
    for (const ok of ['a', 'a.b-c_d', 'A1', 'x'.repeat(64)]) checkName(ok);
    for (const bad of ['.a', 'a.', 'a b', 'a/b', 'x'.repeat(65), 'é']) {
      assert.throws(() => checkName(bad), /invalid name, only 64 \[a-zA-Z0-9-_.\] characters allowed/);
    }
    assert.throws(() => checkName(''), /name must be provided/);
  });

  it('decodes bodies as Go does: wrong types are 400 in encoding/json words, unknown fields ignored', () => {
    assert.deepEqual(
      decodeObjectSpec('config', { Name: 'c', Data: 'aGk=', Driver: { Name: 'x' }, Other: 1 }),
      {
        Name: 'c',
        Data: 'aGk=',
      },
    );
    assert.deepEqual(decodeObjectSpec('secret', null), {});
    assert.throws(
      () => decodeObjectSpec('secret', { Data: 5 }),
      /json: cannot unmarshal number into Go struct field SecretSpec.Data of type \[\]uint8/,
    );
    assert.throws(
      () => decodeObjectSpec('config', [1]),
      /cannot unmarshal array into Go value of type swarm.ConfigSpec/,
    );
  });
});
