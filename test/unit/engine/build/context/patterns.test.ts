import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  filepathMatch,
  hasWildcards,
  PatternMatcher,
  parseIgnoreFile,
} from '../../../../../src/engine/build/context/patterns.js';

describe('filepath.Match (COPY sources)', () => {
  // Go's own table (path/filepath match_test.go), the Unix rows
  const table: Array<[string, string, boolean | 'error']> = [
    ['abc', 'abc', true],
    ['*', 'abc', true],
    ['*c', 'abc', true],
    ['a*', 'a', true],
    ['a*', 'abc', true],
    ['a*', 'ab/c', false],
    ['a*/b', 'abc/b', true],
    ['a*/b', 'a/c/b', false],
    ['a*b*c*d*e*/f', 'axbxcxdxe/f', true],
    ['a*b*c*d*e*/f', 'axbxcxdxexxx/f', true],
    ['a*b*c*d*e*/f', 'axbxcxdxe/xxx/f', false],
    ['a*b*c*d*e*/f', 'axbxcxdxexxx/fff', false],
    ['a*b?c*x', 'abxbbxdbxebxczzx', true],
    ['a*b?c*x', 'abxbbxdbxebxczzy', false],
    ['ab[c]', 'abc', true],
    ['ab[b-d]', 'abc', true],
    ['ab[e-g]', 'abc', false],
    ['ab[^c]', 'abc', false],
    ['ab[^b-d]', 'abc', false],
    ['ab[^e-g]', 'abc', true],
    ['a\\*b', 'a*b', true],
    ['a\\*b', 'ab', false],
    ['a?b', 'a☺b', true],
    ['a[^a]b', 'a☺b', true],
    ['a???b', 'a☺b', false],
    ['a[^a][^a][^a]b', 'a☺b', false],
    ['[a-ζ]*', 'α', true],
    ['*[a-ζ]', 'A', false],
    ['a?b', 'a/b', false],
    ['a*b', 'a/b', false],
    ['[\\]a]', ']', true],
    ['[\\-]', '-', true],
    ['[x\\-]', 'x', true],
    ['[x\\-]', '-', true],
    ['[x\\-]', 'z', false],
    ['[\\-x]', 'x', true],
    ['[\\-x]', '-', true],
    ['[\\-x]', 'a', false],
    ['[]a]', ']', 'error'],
    ['[-]', '-', 'error'],
    ['[x-]', 'x', 'error'],
    ['[x-]', '-', 'error'],
    ['[-x]', 'x', 'error'],
    ['\\', 'a', 'error'],
    ['[a-b-c]', 'a', 'error'],
    ['[', 'a', 'error'],
    ['[^', 'a', 'error'],
    ['[^bc', 'a', 'error'],
    ['a[', 'a', 'error'],
    ['a[', 'ab', 'error'],
    ['a[', 'x', 'error'],
    ['a/b[', 'x', 'error'],
    ['*x', 'xxx', true],
  ];
  for (const [pattern, name, want] of table) {
    it(`${pattern} ~ ${name}`, () => {
      if (want === 'error') assert.throws(() => filepathMatch(pattern, name), /syntax error in pattern/);
      else assert.equal(filepathMatch(pattern, name), want);
    });
  }
  it('knows a wildcard from an escaped one', () => {
    assert.equal(hasWildcards('a/*.txt'), true);
    assert.equal(hasWildcards('a\\*b'), false);
    assert.equal(hasWildcards('file[1]'), true);
    assert.equal(hasWildcards('plain'), false);
  });
});

describe('.dockerignore (patternmatcher)', () => {
  it('reads comments, blanks, leading / and ./, exceptions', () => {
    assert.deepEqual(parseIgnoreFile('\uFEFF# c\n\n  /a/  \n./b\n! c \n**/x/../y\n'), [
      'a',
      'b',
      '!c',
      '**/y',
    ]);
  });
  it('matches files, their parent directories, ** and exceptions in order', () => {
    const m = new PatternMatcher(['*.log', 'build', '**/tmp', 'docs/**', '!docs/keep.md', 'a?c', '[x-z]1']);
    const cases: Array<[string, boolean]> = [
      ['x.log', true],
      ['d/x.log', false],
      ['build', true],
      ['build/out/o', true],
      ['tmp', true],
      ['q/r/tmp/s', true],
      ['docs/a.md', true],
      ['docs/keep.md', false],
      ['abc', true],
      ['a/c', false],
      ['y1', true],
      ['w1', false],
      ['src/main.c', false],
    ];
    for (const [path, want] of cases) assert.equal(m.matches(path), want, path);
    assert.ok(m.hasExclusions);
  });
  it('refuses a lone ! and bad patterns', () => {
    assert.throws(() => new PatternMatcher(['!']), /illegal exclusion pattern/);
    assert.throws(() => new PatternMatcher(['[']), /syntax error in pattern/);
  });
});
