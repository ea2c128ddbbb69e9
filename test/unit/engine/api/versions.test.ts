import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../../../src/common/errors.js';
import { negotiateVersion } from '../../../../src/engine/api/server.js';
import {
  compareDotted,
  compareVersions,
  MAX_API_VERSION,
  versionAtLeast,
} from '../../../../src/engine/api/versions.js';

describe('API versions', () => {
  it('compares numerically, not lexically', () => {
    assert.ok(compareVersions('1.9', '1.24') < 0);
    assert.ok(compareVersions('1.44', '1.41') > 0);
    assert.ok(versionAtLeast('1.40', '1.40'));
    assert.equal(compareDotted('1.41.0', '1.41'), 0);
    assert.ok(compareDotted('1.44.1', '1.44') > 0);
    assert.ok(compareDotted('2', '1.44') > 0);
  });

  it('negotiates the URL prefix', () => {
    assert.deepEqual(negotiateVersion('/v1.41/containers/json'), {
      version: '1.41',
      path: '/containers/json',
    });
    assert.deepEqual(negotiateVersion('/containers/json'), {
      version: MAX_API_VERSION,
      path: '/containers/json',
    });
    assert.throws(
      () => negotiateVersion('/v1.12/info'),
      (e) => e instanceof BerthError && e.kind === 'InvalidParameter',
    );
    assert.throws(() => negotiateVersion('/v2.0/info'), /too new/);
    // dockerd's /v{version:[0-9.]+}: any digits and dots
    assert.throws(() => negotiateVersion('/v1/info'), /client version 1 is too old/);
    assert.throws(() => negotiateVersion('/v2/info'), /client version 2 is too new/);
    assert.deepEqual(negotiateVersion('/v1.41.0/info'), { version: '1.41', path: '/info' });
    // not a version: an unversioned path (which no route has)
    assert.deepEqual(negotiateVersion('/vx/info'), { version: MAX_API_VERSION, path: '/vx/info' });
  });
});

describe('request targets', () => {
  it('splits path and query, normalising dot segments only', async () => {
    const { splitUrl } = await import('../../../../src/engine/api/server.js');
    const a = splitUrl('/v1.41/containers/json?all=1&filters=%7B%7D');
    assert.equal(a.pathname, '/v1.41/containers/json');
    assert.equal(a.query.get('all'), '1');
    assert.equal(a.query.get('filters'), '{}');
    assert.equal(splitUrl('/images/a/../b/json').pathname, '/images/b/json');
    assert.equal(splitUrl('/_ping').query.toString(), '');
  });

  it('reads `//x/y` as a path, never an authority; routes absolute-form by its path; refuses what is no URL', async () => {
    const { splitUrl } = await import('../../../../src/engine/api/server.js');
    assert.equal(splitUrl("//~*;='~@!@/./x").pathname, "//~*;='~@!@/x");
    assert.equal(splitUrl('//evil/./v1.41/info').pathname, '//evil/v1.41/info');
    assert.equal(splitUrl('http://127.0.0.1:2375/v1.41/info?x=1').pathname, '/v1.41/info');
    assert.equal(splitUrl('info/./x').pathname, '/info/x');
    assert.throws(() => splitUrl('http://[bad/x'), { kind: 'InvalidParameter' });
  });
});
