import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { StorageOps } from '../../../../src/engine/storage/adapters/host.ops.js';
import {
  applyLayer,
  cleanMemberPath,
  convertWhiteouts,
  detectCompression,
  type LayerListing,
  noteMember,
} from '../../../../src/engine/storage/layer.apply.js';
import { makeTar } from './tar.helper.js';

/** Records what the storage layer asks of the host; extracts nothing (no root needed). */
class FakeOps implements StorageOps {
  whiteouts: string[] = [];
  opaque: string[] = [];
  extracted = 0;
  async mountOverlay(): Promise<void> {}
  async unmount(): Promise<void> {}
  async makeWhiteouts(paths: string[]): Promise<void> {
    this.whiteouts.push(...paths);
  }
  async setOpaque(dirs: string[]): Promise<void> {
    this.opaque.push(...dirs);
  }
  async extractTar(input: Readable): Promise<void> {
    for await (const c of input) this.extracted += (c as Buffer).length;
  }
  createTar(): never {
    throw new Error('not in this test');
  }
  decompressor(): never {
    throw new Error('not in this test');
  }
}

describe('layer application (no root: fake host adapters)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-layer-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('detects compression from magic bytes', () => {
    assert.equal(detectCompression(gzipSync(Buffer.from('x'))), 'gzip');
    assert.equal(detectCompression(Buffer.from('BZh91AY')), 'bzip2');
    assert.equal(detectCompression(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])), 'xz');
    assert.equal(detectCompression(Buffer.from([0x28, 0xb5, 0x2f, 0xfd])), 'zstd');
    assert.equal(detectCompression(Buffer.from('bin/')), 'none');
    assert.equal(detectCompression(Buffer.alloc(0)), 'none');
  });

  it('classifies members: whiteouts, opaque dirs, AUFS metadata, sizes, escapes', () => {
    const l: LayerListing = { whiteouts: [], opaqueDirs: [], size: 0, entries: 0 };
    noteMember(l, './etc/.wh.passwd', 'file', 0);
    noteMember(l, 'usr/.wh..wh..opq', 'file', 0);
    noteMember(l, '.wh..wh.plnk/123', 'file', 5);
    noteMember(l, '/.wh.top', 'file', 0);
    noteMember(l, 'bin/sh', 'file', 10);
    noteMember(l, 'bin/', 'directory', 0);
    assert.deepEqual(l.whiteouts, ['etc/passwd', 'top']);
    assert.deepEqual(l.opaqueDirs, ['usr']);
    assert.equal(l.size, 15);
    assert.equal(cleanMemberPath('/a//b/../c/'), 'a/c');
    assert.throws(() => cleanMemberPath('../x'), { kind: 'InvalidParameter' });
    assert.throws(() => noteMember(l, 'a/.wh.', 'file', 0), { kind: 'InvalidParameter' });
  });

  it('streams the tar to the extractor, hashes the diff ID and converts whiteouts', async () => {
    const ops = new FakeOps();
    const tar = await makeTar([
      { name: 'etc/', type: 'directory' },
      { name: 'etc/.wh.gone', content: '' },
      { name: 'var/lib/.wh..wh..opq', content: '' },
      { name: 'etc/file', content: 'abc' },
    ]);
    const target = join(dir, 'diff1');
    await mkdir(target);
    const r = await applyLayer({ input: [gzipSync(tar)], dir: target, ops });
    assert.equal(r.compression, 'gzip');
    assert.equal(r.size, 3);
    assert.equal(ops.extracted, tar.length);
    assert.match(r.diffId, /^sha256:[a-f0-9]{64}$/);
    assert.deepEqual(ops.whiteouts, [join(target, 'etc/gone')]);
    assert.deepEqual(ops.opaque, [join(target, 'var/lib')]);
  });

  it('a tar cut short (in a member, in a header, garbage) is a 400, never an uncaught error', async () => {
    const tar = await makeTar([{ name: 'big', content: Buffer.alloc(20_000, 7) }]);
    const cases = [
      tar.subarray(0, 10_000),
      tar.subarray(0, 300),
      Buffer.from('not a tar at all, '.repeat(40)),
    ];
    for (const input of cases) {
      const target = join(dir, `cut-${input.length}`);
      await mkdir(target);
      await assert.rejects(
        applyLayer({ input: [input], dir: target, ops: new FakeOps() }),
        (err: unknown) => {
          assert.equal((err as { kind?: string }).kind, 'InvalidParameter', String(err));
          assert.match(String((err as Error).message), /invalid layer tar/);
          return true;
        },
      );
    }
  });

  it('an empty input is an empty layer', async () => {
    const ops = new FakeOps();
    const r = await applyLayer({ input: [], dir, ops });
    assert.equal(r.diffId, 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    assert.equal(ops.extracted, 0);
  });

  it('never follows a symlink to place a whiteout', async () => {
    const ops = new FakeOps();
    const target = join(dir, 'diff2');
    await mkdir(target);
    await symlink('/etc', join(target, 'evil'));
    await assert.rejects(
      convertWhiteouts(target, { whiteouts: ['evil/passwd'], opaqueDirs: [], size: 0, entries: 1 }, ops),
      { kind: 'InvalidParameter' },
    );
    assert.deepEqual(ops.whiteouts, []);
    // A name the same layer re-created as a directory becomes opaque instead.
    await mkdir(join(target, 'again'));
    await writeFile(join(target, 'file'), 'x');
    await convertWhiteouts(
      target,
      { whiteouts: ['again', 'file'], opaqueDirs: [], size: 0, entries: 2 },
      ops,
    );
    assert.deepEqual(ops.opaque, [join(target, 'again')]);
    assert.deepEqual(ops.whiteouts, []);
  });
});
