import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import { BerthError } from '../../../src/common/errors.js';
import { Logger } from '../../../src/common/log.js';
import { openAccess } from '../../../src/registry/auth/authorizer.js';
import { BasicAuthorizer } from '../../../src/registry/auth/basic.authorizer.js';
import { accessControlFromConfig } from '../../../src/registry/auth/from-config.js';
import { ensureSigningKeyPair } from '../../../src/registry/auth/keys.js';
import { TokenAuthorizer } from '../../../src/registry/auth/token.authorizer.js';
import { configFromObject } from '../../../src/registry/config.js';

const quiet = new Logger('error');

describe('access control from config', () => {
  let dir: string;
  let users: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-authcfg-'));
    users = join(dir, 'htpasswd');
    writeFileSync(users, `alice:${bcrypt.hashSync('pw', 4)}\n`);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('no auth: open access, no rate limiter', () => {
    const ac = accessControlFromConfig(configFromObject({}), quiet);
    assert.equal(ac.authorizer, openAccess);
    assert.equal(ac.rateLimiter, undefined);
    assert.deepEqual(ac.extraRoutes, []);
  });

  it('htpasswd: basic auth; ratelimit by user', () => {
    const ac = accessControlFromConfig(
      configFromObject({
        auth: { htpasswd: { realm: 'r', path: users } },
        berth: { ratelimit: { requestspersecond: 5, burst: 10, by: 'user' } },
      }),
      quiet,
    );
    assert.ok(ac.authorizer instanceof BasicAuthorizer);
    assert.ok(ac.rateLimiter);
  });

  it('token server without auth.token: token auth with a realm taken from the request', async () => {
    const keys = await ensureSigningKeyPair(join(dir, 'keys'));
    const ac = accessControlFromConfig(
      configFromObject({
        auth: { htpasswd: { realm: 'r', path: users } },
        berth: {
          tokenserver: {
            path: '/auth/token',
            key: keys.keyPath,
            certificate: keys.certPath,
            acl: [{ account: '*', name: '*', actions: ['*'] }],
            groups: { admins: ['alice'] },
          },
        },
      }),
      quiet,
    );
    assert.ok(ac.authorizer instanceof TokenAuthorizer);
    assert.equal(ac.extraRoutes[0]?.path, '/auth/token');
    const req = { headers: { host: 'reg.example:5000' }, socket: {} } as unknown as IncomingMessage;
    try {
      await ac.authorizer.authorize(req, [{ type: 'repository', name: 'a', actions: ['pull'] }]);
      assert.fail('expected 401');
    } catch (err) {
      assert.ok(err instanceof BerthError);
      assert.equal(
        (err.detail as { challenge: string }).challenge,
        'Bearer realm="http://reg.example:5000/auth/token",service="berth-registry",scope="repository:a:pull"',
      );
    }
    // A token it issues passes the registry's authorizer.
    const token = ac.tokenServer!.issue('alice', [
      { type: 'repository', name: 'a', actions: ['pull'] },
    ]).token;
    const grant = await ac.authorizer.authorize(
      { headers: { authorization: `Bearer ${token}` }, socket: {} } as unknown as IncomingMessage,
      [{ type: 'repository', name: 'a', actions: ['pull'] }],
    );
    assert.equal(grant.user, 'alice');
  });

  it('refuses bad settings clearly', async () => {
    assert.throws(
      () => accessControlFromConfig(configFromObject({ auth: { silly: { realm: 'x' } } }), quiet),
      /not supported/,
    );
    assert.throws(
      () =>
        accessControlFromConfig(
          configFromObject({ auth: { token: { realm: 'http://x/t', service: 's', issuer: 'i' } } }),
          quiet,
        ),
      /rootcertbundle or jwks/,
    );
    const other = await ensureSigningKeyPair(join(dir, 'other'));
    const mine = await ensureSigningKeyPair(join(dir, 'mine'));
    assert.throws(
      () =>
        accessControlFromConfig(
          configFromObject({ berth: { tokenserver: { key: mine.keyPath, certificate: other.certPath } } }),
          quiet,
        ),
      /not the certificate of its key/,
    );
    assert.throws(
      () =>
        accessControlFromConfig(
          configFromObject({ berth: { tokenserver: { acl: [{ name: 'x', actions: [] }] } } }),
          quiet,
        ),
      /say whom/,
    );
  });
});
