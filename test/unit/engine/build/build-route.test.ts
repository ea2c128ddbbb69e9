import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { registryConfig } from '../../../../src/engine/api/build.routes.js';

describe('POST /build X-Registry-Config', () => {
  it('turns each registry entry into the X-Registry-Auth a pull sends', () => {
    const header = Buffer.from(
      JSON.stringify({
        'localhost:5000': { username: 'u', password: 'p' },
        'https://index.docker.io/v1/': { auth: 'x' },
      }),
    ).toString('base64');
    const auths = registryConfig(header);
    assert.deepEqual([...auths.keys()], ['localhost:5000', 'https://index.docker.io/v1/']);
    assert.deepEqual(JSON.parse(Buffer.from(auths.get('localhost:5000') ?? '', 'base64url').toString()), {
      username: 'u',
      password: 'p',
    });
  });

  it('ignores a header it cannot read, as dockerd', () => {
    assert.equal(registryConfig('not base64 json').size, 0);
    assert.equal(registryConfig(undefined).size, 0);
  });
});
