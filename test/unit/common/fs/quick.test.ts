import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm as rmAsync } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeFileAtomic } from '../../../../src/common/fs/atomic.js';
import { rm, rmSmallTree } from '../../../../src/common/fs/quick.js';

describe('quick file operations', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-quick-'));
  });
  after(async () => {
    await rmAsync(dir, { recursive: true, force: true });
  });

  it('rmSmallTree removes a tree of files, directories and symlinks without following links', async () => {
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'keep'), 'x');
    const tree = join(dir, 'tree');
    mkdirSync(join(tree, 'a/b/c'), { recursive: true });
    mkdirSync(join(tree, 'empty'));
    writeFileSync(join(tree, 'f'), '1');
    writeFileSync(join(tree, 'a/b/g'), '2');
    symlinkSync(outside, join(tree, 'a/link-to-dir'));
    symlinkSync('/nonexistent', join(tree, 'dangling'));
    await rmSmallTree(tree);
    assert.equal(existsSync(tree), false);
    assert.equal(readFileSync(join(outside, 'keep'), 'utf8'), 'x');
  });

  it('rmSmallTree of a missing path does nothing, of a file removes it', async () => {
    await rmSmallTree(join(dir, 'missing'));
    const file = join(dir, 'file');
    writeFileSync(file, 'x');
    await rmSmallTree(file);
    assert.equal(existsSync(file), false);
  });

  it('rm removes a file, ignores a missing one only with force, refuses a directory', async () => {
    const file = join(dir, 'rm-file');
    writeFileSync(file, 'x');
    await rm(file);
    assert.equal(existsSync(file), false);
    await rm(file, { force: true });
    await assert.rejects(rm(file), { code: 'ENOENT' });
    const sub = join(dir, 'rm-dir');
    mkdirSync(sub);
    await assert.rejects(rm(sub, { force: true }));
    assert.equal(existsSync(sub), true);
    await rm(sub, { recursive: true, force: true });
    assert.equal(existsSync(sub), false);
  });

  it('writeFileAtomic makes a missing directory with the mode asked', async () => {
    const path = join(dir, 'made/deeper/file.json');
    await writeFileAtomic(path, '{}', 0o644, 'none', 0o710);
    assert.equal(readFileSync(path, 'utf8'), '{}');
    assert.equal(statSync(join(dir, 'made/deeper')).mode & 0o777, 0o710 & ~process.umask());
    await writeFileAtomic(path, '{"a":1}', 0o644, 'file');
    assert.equal(readFileSync(path, 'utf8'), '{"a":1}');
  });
});
