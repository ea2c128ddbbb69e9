import assert from 'node:assert/strict';
import { readFileSync, renameSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { StatCachedFile } from '../../../../src/common/fs/stat-cached.js';

describe('StatCachedFile', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-statcached-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A cache over `path` that counts its reads of the file. */
  const counted = (path: string) => {
    const reads = { n: 0 };
    const file = new StatCachedFile(path, undefined, (p) => {
      reads.n++;
      return readFileSync(p, 'utf8');
    });
    return { file, reads };
  };

  it('reads the file once while it does not change', () => {
    const path = join(dir, 'same');
    writeFileSync(path, 'nameserver 10.0.0.1\n');
    const { file, reads } = counted(path);
    for (let i = 0; i < 5; i++) assert.equal(file.current(), 'nameserver 10.0.0.1\n');
    assert.equal(reads.n, 1);
  });

  it('sees a file replaced by a rename (a new inode), even with the same size and times', () => {
    const path = join(dir, 'renamed');
    writeFileSync(path, 'nameserver 10.0.0.1\n');
    const { file, reads } = counted(path);
    assert.equal(file.current(), 'nameserver 10.0.0.1\n');
    const next = join(dir, 'renamed.new');
    writeFileSync(next, 'nameserver 10.0.0.2\n');
    const t = new Date('2020-01-01T00:00:00Z');
    utimesSync(next, t, t);
    utimesSync(path, t, t);
    renameSync(next, path);
    assert.equal(file.current(), 'nameserver 10.0.0.2\n');
    assert.equal(reads.n, 2);
  });

  it('sees an edit in place that keeps the size, and a set-back modification time', () => {
    const path = join(dir, 'edited');
    writeFileSync(path, 'nameserver 10.0.0.1\n');
    const { file } = counted(path);
    assert.equal(file.current(), 'nameserver 10.0.0.1\n');
    const t = new Date('2020-01-01T00:00:00Z');
    writeFileSync(path, 'nameserver 10.0.0.3\n');
    // an mtime set back to an older value still moves ctime
    utimesSync(path, t, t);
    assert.equal(file.current(), 'nameserver 10.0.0.3\n');
  });

  it('reads as undefined while the file is missing, and the new file once it is back', () => {
    const path = join(dir, 'gone');
    writeFileSync(path, 'a\n');
    const { file, reads } = counted(path);
    assert.equal(file.current(), 'a\n');
    unlinkSync(path);
    assert.equal(file.current(), undefined);
    writeFileSync(path, 'a\n');
    assert.equal(file.current(), 'a\n');
    assert.equal(reads.n, 2);
  });

  it('keeps the version seen before a read, so a change during the read is seen next time', () => {
    const versions = ['v1', 'v2', 'v2'];
    const texts = ['text of v2', 'text of v2 again'];
    let reads = 0;
    const file = new StatCachedFile(
      '/unused',
      () => versions.shift(),
      () => texts[reads++] ?? '',
    );
    // stat saw v1, the file changed to v2 before it was read
    assert.equal(file.current(), 'text of v2');
    // v2 differs from the v1 kept: read again
    assert.equal(file.current(), 'text of v2 again');
    assert.equal(file.current(), 'text of v2 again');
    assert.equal(reads, 2);
  });
});
