import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readlink, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import tarStream from 'tar-stream';
import { writeCopyTar } from '../../../../src/engine/build/copy-layer.js';

function tarOf(entries: Array<Partial<tarStream.Header> & { name: string; body?: string }>): Readable {
  const pack = tarStream.pack();
  for (const { body, ...h } of entries) pack.entry(h as tarStream.Header, body ?? '');
  pack.finalize();
  return pack as unknown as Readable;
}

describe('a copy written into a step snapshot', () => {
  it('resolves parents inside the root (links in the image never lead out) and keeps owners and modes', async () => {
    const outside = await mkdtemp(join(tmpdir(), 'berth-outside-'));
    const root = await mkdtemp(join(tmpdir(), 'berth-root-'));
    try {
      await mkdir(join(root, 'real'));
      await symlink('/real', join(root, 'app'));
      await symlink(outside, join(root, 'escape'));
      await symlink('../../../..', join(root, 'up'));
      await writeCopyTar(
        root,
        tarOf([
          { name: 'app/a.txt', type: 'file', mode: 0o640, uid: 7, gid: 8, body: 'a' },
          { name: 'escape/', type: 'directory', mode: 0o755 },
          { name: 'escape/b.txt', type: 'file', mode: 0o644, body: 'b' },
          { name: 'up/c.txt', type: 'file', mode: 0o644, body: 'c' },
          { name: 'new/', type: 'directory', mode: 0o700, uid: 3, gid: 4 },
          { name: 'new/l', type: 'symlink', linkname: '/etc/passwd' },
          { name: 'new/h', type: 'link', linkname: 'app/a.txt' },
        ]),
      );
      assert.equal(await readFile(join(root, 'real/a.txt'), 'utf8'), 'a');
      const a = await stat(join(root, 'real/a.txt'));
      assert.deepEqual([a.mode & 0o777, a.uid, a.gid, a.nlink], [0o640, 7, 8, 2]);
      // the link named `escape` was replaced by the directory: nothing written outside
      assert.equal((await lstat(join(root, 'escape'))).isDirectory(), true);
      assert.equal(await readFile(join(root, 'escape/b.txt'), 'utf8'), 'b');
      await assert.rejects(stat(join(outside, 'b.txt')));
      assert.equal(await readFile(join(root, 'c.txt'), 'utf8'), 'c');
      const n = await stat(join(root, 'new'));
      assert.deepEqual([n.mode & 0o777, n.uid, n.gid], [0o700, 3, 4]);
      assert.equal(await readlink(join(root, 'new/l')), '/etc/passwd');
    } finally {
      await rm(root, { recursive: true, force: true });
      await rm(outside, { recursive: true, force: true });
    }
  });
});
