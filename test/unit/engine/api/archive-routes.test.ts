import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import { isKind } from '../../../../src/common/errors.js';
import { type ArchiveBackend, registerArchiveRoutes } from '../../../../src/engine/api/archive.routes.js';
import type { ApiContext, ApiHandler } from '../../../../src/engine/api/context.js';
import { Router } from '../../../../src/http/router.js';

describe('archive routes', () => {
  it('a docker cp upload the client gave up is its error, not a 500 (found by the fuzzer)', async () => {
    const router = new Router<ApiHandler>();
    const backend = {
      async extractTo() {
        throw Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
      },
    } as unknown as ArchiveBackend;
    registerArchiveRoutes(router, backend);
    const found = router.match('PUT', '/containers/x/archive').found;
    assert.ok(found);
    const ctx = {
      req: { aborted: true, headers: {} } as unknown as IncomingMessage,
      res: {} as ServerResponse,
      params: found.params,
      query: new URLSearchParams('path=/tmp'),
      version: '1.41',
    } as unknown as ApiContext;
    await assert.rejects(
      (found.handler as ApiHandler)(ctx) as Promise<void>,
      (err: Error) => isKind(err, 'InvalidParameter') && /closed the connection/.test(err.message),
    );
  });
});
