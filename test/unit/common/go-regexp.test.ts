import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileGoRegExp, filterMatch } from '../../../src/common/go-regexp.js';
import { pathMatch } from '../../../src/common/reference.js';

describe('Go regular expressions (RE2)', () => {
  it('take Go syntax and match anywhere', () => {
    assert.equal(compileGoRegExp('(?P<x>ab)(?i)C').test('zzabc'), true);
    assert.equal(compileGoRegExp('^web$').test('web2'), false);
    assert.throws(() => compileGoRegExp('('), { message: 'error parsing regexp: missing closing ): `(`' });
  });

  it('stay linear where a backtracking engine is exponential', () => {
    const t0 = Date.now();
    assert.equal(filterMatch('([0-9a-f]+)+x', 'a'.repeat(64)), false);
    assert.equal(filterMatch('^/fzd(a+)+b', `/fzd${'a'.repeat(5000)}`), false);
    assert.equal(pathMatch('*a*a*a*a*a*a*b', `fzd:${'a'.repeat(120)}`), false);
    assert.ok(Date.now() - t0 < 1000, `${Date.now() - t0} ms`);
  });

  it('take a pattern that is not a valid expression as a plain substring (dockerd filters.Match)', () => {
    assert.equal(filterMatch('a(b', 'xa(bx'), true);
    assert.equal(filterMatch('a(b', 'ab'), false);
  });
});
