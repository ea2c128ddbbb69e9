import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { BerthError, forbidden, unauthorized } from '../../../src/common/errors.js';
import type { Access, Authorizer } from '../../../src/registry/auth/authorizer.js';
import { errorCodes, http, pushBlob, startTestRegistry, type TestRegistry } from '../../helpers/registry.js';

/** An authorizer that records what it is asked and answers by header. */
class RecordingAuthorizer implements Authorizer {
  calls: Array<{ method: string; url: string; access: Access[] }> = [];
  async authorize(req: IncomingMessage, access: Access[]) {
    this.calls.push({ method: req.method ?? '', url: req.url ?? '', access });
    const mode = req.headers['x-test-auth'];
    if (mode === 'none')
      throw unauthorized('authentication required', {
        challenge: 'Bearer realm="http://x/token",service="t"',
      });
    if (mode === 'deny') throw forbidden('no access');
    return { user: 'alice' };
  }
}

let reg: TestRegistry;
const authz = new RecordingAuthorizer();
let limited = false;
let lines: string[] = [];

before(async () => {
  reg = await startTestRegistry(
    {},
    {
      authorizer: authz,
      rateLimiter: {
        check() {
          if (limited) throw new BerthError('TooManyRequests', 'slow down', { retryAfter: 3 });
        },
      },
      extraRoutes: [
        {
          method: ['GET', 'POST'],
          path: '/auth/token',
          handler: async (_req, res) => {
            res.setHeader('Content-Type', 'application/json');
            res.end('{"token":"t"}');
          },
        },
      ],
      accessLog: (line) => lines.push(line),
    },
  );
  // The helper disables the access log by config; check the hook through a second registry.
});
after(async () => {
  await reg.stop();
});

function last(): { method: string; url: string; access: Access[] } {
  const call = authz.calls[authz.calls.length - 1];
  assert.ok(call);
  return call;
}

describe('the dispatcher asks the authorizer for the right accesses', () => {
  it('GET /v2/ asks with no access (authentication only)', async () => {
    await http('GET', `${reg.url}/v2/`);
    assert.deepEqual(last().access, []);
  });
  it('pull for GET/HEAD, pull+push for POST/PUT/PATCH, delete for DELETE, catalog scope', async () => {
    await http('GET', `${reg.url}/v2/a/b/tags/list`);
    assert.deepEqual(last().access, [{ type: 'repository', name: 'a/b', actions: ['pull'] }]);
    await http('HEAD', `${reg.url}/v2/a/b/manifests/v1`);
    assert.deepEqual(last().access, [{ type: 'repository', name: 'a/b', actions: ['pull'] }]);
    await http('POST', `${reg.url}/v2/a/b/blobs/uploads/`);
    assert.deepEqual(last().access, [{ type: 'repository', name: 'a/b', actions: ['pull', 'push'] }]);
    await http('DELETE', `${reg.url}/v2/a/b/manifests/sha256:${'0'.repeat(64)}`);
    assert.deepEqual(last().access, [{ type: 'repository', name: 'a/b', actions: ['delete'] }]);
    await http('GET', `${reg.url}/v2/_catalog`);
    assert.deepEqual(last().access, [{ type: 'registry', name: 'catalog', actions: ['*'] }]);
  });
  it('a mount also asks for pull on the source repository', async () => {
    const digest = await pushBlob(reg.url, 'src/repo', 'x');
    const res = await http('POST', `${reg.url}/v2/dst/repo/blobs/uploads/?mount=${digest}&from=src/repo`);
    assert.equal(res.status, 201);
    assert.deepEqual(last().access, [
      { type: 'repository', name: 'dst/repo', actions: ['pull', 'push'] },
      { type: 'repository', name: 'src/repo', actions: ['pull'] },
    ]);
  });
  it('Unauthorized → 401 UNAUTHORIZED with WWW-Authenticate; Forbidden → 403 DENIED', async () => {
    const r401 = await http('GET', `${reg.url}/v2/`, { headers: { 'x-test-auth': 'none' } });
    assert.equal(r401.status, 401);
    assert.equal(r401.headers.get('www-authenticate'), 'Bearer realm="http://x/token",service="t"');
    assert.equal(r401.headers.get('docker-distribution-api-version'), 'registry/2.0');
    assert.deepEqual(errorCodes(r401), ['UNAUTHORIZED']);
    const r403 = await http('GET', `${reg.url}/v2/a/tags/list`, { headers: { 'x-test-auth': 'deny' } });
    assert.equal(r403.status, 403);
    assert.deepEqual(errorCodes(r403), ['DENIED']);
  });
  it('invalid names are refused before the authorizer is asked', async () => {
    const before = authz.calls.length;
    const res = await http('GET', `${reg.url}/v2/BAD/tags/list`);
    assert.equal(res.status, 400);
    assert.equal(authz.calls.length, before);
  });
  it('the rate limiter answers 429 TOOMANYREQUESTS with Retry-After', async () => {
    limited = true;
    try {
      const res = await http('GET', `${reg.url}/v2/`);
      assert.equal(res.status, 429);
      assert.equal(res.headers.get('retry-after'), '3');
      assert.deepEqual(errorCodes(res), ['TOOMANYREQUESTS']);
    } finally {
      limited = false;
    }
  });
  it('extra routes are served without the authorizer', async () => {
    const before = authz.calls.length;
    const res = await http('GET', `${reg.url}/auth/token?service=x`, { headers: { 'x-test-auth': 'none' } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { token: 't' });
    assert.equal(authz.calls.length, before);
    assert.equal((await http('DELETE', `${reg.url}/auth/token`)).status, 405);
  });
  it('the access log hook gets one combined-format line per request with the user', async () => {
    const logged = await startTestRegistry(
      { log: { accesslog: { disabled: false } } },
      {
        authorizer: authz,
        accessLog: (line) => lines.push(line),
      },
    );
    try {
      lines = [];
      await http('GET', `${logged.url}/v2/`, { headers: { 'User-Agent': 'test-agent' } });
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(lines.length, 1);
      assert.match(
        lines[0] ?? '',
        /^127\.0\.0\.1 - alice \[.+\] "GET \/v2\/ HTTP\/1\.1" 200 2 "" "test-agent"/,
      );
    } finally {
      await logged.stop();
    }
  });
});
