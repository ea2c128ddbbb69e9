import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildMessageLine, registryConfig } from '../../../../src/engine/api/build.routes.js';

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

describe('POST /build message lines', () => {
  it('are Go JSON: <, > and & escaped, CRLF, a progress with its bar in dockerd order', () => {
    assert.equal(
      buildMessageLine({ stream: 'Step 2/2 : RUN a > b && c <d>' }),
      '{"stream":"Step 2/2 : RUN a \\u003e b \\u0026\\u0026 c \\u003cd\\u003e"}\r\n',
    );
    assert.equal(
      buildMessageLine({
        status: 'http://h/Dockerfile',
        id: 'Downloading context',
        progressDetail: { current: 48 },
      }),
      '{"status":"http://h/Dockerfile","progressDetail":{"current":48},"progress":"     48B","id":"Downloading context"}\r\n',
    );
  });
});
