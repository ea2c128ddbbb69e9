import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileTemplate, Router } from '../../../src/http/router.js';

describe('router', () => {
  it('matches one-segment and slash-carrying parameters', () => {
    const r = new Router<string>();
    r.get('/images/{name*}/json', 'inspect');
    r.delete('/images/{name*}', 'delete');
    r.get('/containers/{id}/json', 'container');
    assert.deepEqual(r.match('GET', '/images/localhost:5000/a/b:1/json').found, {
      handler: 'inspect',
      params: { name: 'localhost:5000/a/b:1' },
    });
    assert.deepEqual(r.match('DELETE', '/images/a/b').found?.params, { name: 'a/b' });
    assert.equal(r.match('GET', '/containers/a/b/json').found, undefined);
  });

  it('reports the methods allowed on a path', () => {
    const r = new Router<string>();
    r.get('/x', 'get');
    r.put('/x', 'put');
    const m = r.match('POST', '/x');
    assert.equal(m.found, undefined);
    assert.deepEqual(m.allowed, ['GET', 'PUT']);
  });

  it('escapes literal regex characters', () => {
    const { regex } = compileTemplate('/v2/_catalog');
    assert.ok(regex.test('/v2/_catalog'));
    assert.ok(!compileTemplate('/a.b').regex.test('/axb'));
  });

  it('keeps the order of routes across literal and parameter first segments', () => {
    const r = new Router<string>();
    r.get('/a/x', 'a-literal');
    r.get('/{any}/x', 'wild');
    r.get('/a/{p}', 'a-param');
    r.get('/b/x', 'b-literal');
    assert.equal(r.match('GET', '/a/x').found?.handler, 'a-literal');
    assert.equal(r.match('GET', '/a/y').found?.handler, 'a-param');
    assert.equal(r.match('GET', '/b/x').found?.handler, 'wild');
    assert.equal(r.match('GET', '/c/x').found?.handler, 'wild');
    assert.equal(r.match('GET', '/c/y').found, undefined);
    assert.equal(r.match('GET', '/').found, undefined);
  });
});
