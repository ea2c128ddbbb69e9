import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NamedFiles, topLevelName } from '../../../../../src/engine/build/context/named-files.js';

describe('NamedFiles', () => {
  it('knows a top-level name only (no directory on the way that could be a link)', () => {
    assert.equal(topLevelName('Dockerfile'), 'Dockerfile');
    assert.equal(topLevelName('./Dockerfile'), 'Dockerfile');
    assert.equal(topLevelName('/Dockerfile'), 'Dockerfile');
    assert.equal(topLevelName('a/../Dockerfile'), 'Dockerfile');
    assert.equal(topLevelName('sub/Dockerfile'), undefined);
    assert.equal(topLevelName('..'), undefined);
    assert.equal(topLevelName('.'), undefined);
    assert.equal(topLevelName(''), undefined);
  });

  it('keeps a wanted regular file, knows one no member had, and leaves the rest to the disk', () => {
    const n = new NamedFiles(['Dockerfile', './.dockerignore', 'sub/x', 'big', 'dir', 'linked']);
    assert.equal(n.member('Dockerfile', 'file', 8), true);
    n.keep('Dockerfile', Buffer.from('FROM a\n'));
    assert.equal(n.member('other', 'file', 1), false);
    assert.equal(n.member('big', 'file', 2 * 1024 * 1024), false);
    assert.equal(n.member('dir/inner', 'file', 1), false);
    assert.equal(n.member('linked', 'symlink', 0), false);
    assert.equal(n.lookup('./Dockerfile')?.toString(), 'FROM a\n');
    // no member had it: there is nothing there
    assert.equal(n.lookup('.dockerignore'), null);
    // a deeper path, a name not asked for, a file too large, a directory, a link: not known
    assert.equal(n.lookup('sub/x'), undefined);
    assert.equal(n.lookup('other'), undefined);
    assert.equal(n.lookup('big'), undefined);
    assert.equal(n.lookup('dir'), undefined);
    assert.equal(n.lookup('linked'), undefined);
    // a later member replaces the kept content
    assert.equal(n.member('Dockerfile', 'link', 0), false);
    assert.equal(n.lookup('Dockerfile'), undefined);
  });
});
