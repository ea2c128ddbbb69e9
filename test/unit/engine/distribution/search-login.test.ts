import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loginHost } from '../../../../src/engine/distribution/login.js';
import { searchFilters, searchPlan, splitSearchTerm } from '../../../../src/engine/distribution/search.js';

describe('search terms and filters', () => {
  it('splits a term as moby does: a first part with a dot, a colon or localhost names a registry', () => {
    assert.deepEqual(splitSearchTerm('127.0.0.1:5000/bb'), { index: '127.0.0.1:5000', remote: 'bb' });
    assert.deepEqual(splitSearchTerm('localhost/team/app'), { index: 'localhost', remote: 'team/app' });
    assert.deepEqual(splitSearchTerm('team/app'), { index: 'docker.io', remote: 'team/app' });
    assert.deepEqual(splitSearchTerm('busybox'), { index: 'docker.io', remote: 'busybox' });
  });

  it('asks mirrors and insecure registries named by host for a bare term, the named registry otherwise', () => {
    const opts = {
      mirrors: ['http://127.0.0.1:5001/'],
      insecureRegistries: ['127.0.0.0/8', 'reg.local:5000'],
    };
    assert.deepEqual(searchPlan('BusyBox', opts), {
      registries: [
        { host: '127.0.0.1:5001', mirror: true, base: 'http://127.0.0.1:5001' },
        { host: 'reg.local:5000', mirror: false },
      ],
      term: 'busybox',
    });
    assert.deepEqual(searchPlan('reg.local:5000/App', opts), {
      registries: [{ host: 'reg.local:5000', mirror: false }],
      term: 'app',
    });
  });

  it('reads is-official, is-automated and stars as moby validates them', () => {
    const f = (o: Record<string, string[]>) => searchFilters(new Map(Object.entries(o)));
    assert.deepEqual(f({ 'is-official': ['true'], 'is-automated': ['false'], stars: ['3', '10'] }), {
      isOfficial: true,
      isAutomated: false,
      stars: 10,
    });
    assert.throws(() => f({ 'is-official': ['yes'] }), /Invalid filter 'is-official=\[yes\]'/);
    assert.throws(() => f({ stars: ['many'] }), /Invalid filter 'stars=many'/);
    assert.throws(() => f({ name: ['x'] }), /invalid filter 'name'/);
  });
});

describe('login server address', () => {
  it('keeps host:port, drops scheme and path, takes Hub names as docker.io', () => {
    assert.equal(loginHost('https://127.0.0.1:5000/v2/'), '127.0.0.1:5000');
    assert.equal(loginHost('Reg.Local:5000'), 'reg.local:5000');
    assert.equal(loginHost(''), 'docker.io');
    assert.equal(loginHost('https://index.docker.io/v1/'), 'docker.io');
  });
});
