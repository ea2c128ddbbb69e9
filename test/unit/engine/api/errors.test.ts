import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../../../src/common/errors.js';
import { engineStatus } from '../../../../src/engine/api/errors.js';

function errno(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

describe('engine error statuses', () => {
  it('maps kinds, a missing file to 404 and a name too long (a path in the request) to 400', () => {
    assert.equal(engineStatus(new BerthError('Conflict', 'x')), 409);
    assert.equal(engineStatus(errno('ENOENT', 'no such file')), 404);
    // found by the fuzzer: GET /containers/x/archive?path=<70,000 x> answered 500 (lstat's ENAMETOOLONG)
    assert.equal(engineStatus(errno('ENAMETOOLONG', 'ENAMETOOLONG: name too long, lstat ...')), 400);
    assert.equal(engineStatus(errno('EIO', 'i/o error')), 500);
    assert.equal(engineStatus(new Error('plain')), 500);
  });
});
