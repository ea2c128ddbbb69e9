import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { HostStorageOps, type StorageOps } from '../../../../src/engine/storage/adapters/host.ops.js';
import { unpackLayerTar } from '../../../../src/engine/storage/layer.apply.js';
import {
  unpackOnThread,
  unpackOnThreadFor,
  warmUnpackThreads,
} from '../../../../src/engine/storage/unpack.thread.js';
import { makeTar } from './tar.helper.js';

async function* chunked(data: Buffer, size: number, failAt?: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) {
    if (failAt !== undefined && i >= failAt) throw new Error('the download failed');
    yield data.subarray(i, i + size);
  }
}

describe('layers unpacked on a worker thread (GNU tar, root)', () => {
  let base: string;
  let tar: Buffer;
  let gz: Buffer;
  const big = randomBytes(20 * 1024 * 1024);
  before(async () => {
    base = await mkdtemp(join(tmpdir(), 'berth-unpack-thread-'));
    tar = await makeTar([
      { name: 'd', type: 'directory' },
      { name: 'd/big.bin', content: big },
      { name: 'd/small', content: 'hello' },
      { name: '.wh.gone', content: '' },
    ]);
    gz = gzipSync(tar, { level: 1 });
  });
  after(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('goes there only for the host and a layer known to be large', () => {
    const ops = new HostStorageOps();
    assert.equal(unpackOnThreadFor(ops, gz.length), true);
    assert.equal(unpackOnThreadFor(ops, 1024), false);
    assert.equal(unpackOnThreadFor(ops, undefined), false);
    assert.equal(unpackOnThreadFor({} as StorageOps, gz.length), false);
  });

  it('gives what unpacking in this thread gives: files, diff ID, listing, tar-split record', async () => {
    const want = `sha256:${createHash('sha256').update(tar).digest('hex')}`;
    const here = join(base, 'here');
    await mkdir(here);
    const local = await unpackLayerTar(chunked(gz, 65536), here, new HostStorageOps());
    for (let round = 0; round < 2; round++) {
      const dir = join(base, `thread-${round}`);
      await mkdir(dir);
      const got = await unpackOnThread(chunked(gz, 65536), dir);
      assert.equal(got.diffId, want);
      assert.equal(got.compression, 'gzip');
      assert.equal(got.tarSize, tar.length);
      assert.deepEqual(got.listing, local.listing);
      assert.deepEqual(got.listing.whiteouts, ['gone']);
      assert.ok(got.tarSplit && local.tarSplit && got.tarSplit.equals(local.tarSplit));
      assert.ok((await readFile(join(dir, 'd', 'big.bin'))).equals(big));
      assert.equal(await readFile(join(dir, 'd', 'small'), 'utf8'), 'hello');
    }
  });

  it('unpacks layers side by side on threads started beforehand', async () => {
    warmUnpackThreads(2);
    const want = `sha256:${createHash('sha256').update(tar).digest('hex')}`;
    const got = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const dir = join(base, `side-${i}`);
        await mkdir(dir);
        return unpackOnThread(chunked(gz, 100_000 + i), dir);
      }),
    );
    assert.deepEqual(
      got.map((g) => g.diffId),
      [want, want, want],
    );
  });

  it('fails with the input when the input fails midway, and the next layer still unpacks', async () => {
    const dir = join(base, 'failing');
    await mkdir(dir);
    await assert.rejects(unpackOnThread(chunked(gz, 65536, 12 * 1024 * 1024), dir), /the download failed/);
    const again = join(base, 'again');
    await mkdir(again);
    const got = await unpackOnThread(chunked(gz, 1 << 20), again);
    assert.equal(got.diffId, `sha256:${createHash('sha256').update(tar).digest('hex')}`);
  });

  it('refuses a layer the walk refuses, with its error kind', async () => {
    const bad = Buffer.concat([
      tar.subarray(0, tar.length - 1024),
      Buffer.alloc(512, 0x41),
      Buffer.alloc(1024),
    ]);
    const dir = join(base, 'bad');
    await mkdir(dir);
    await assert.rejects(unpackOnThread(chunked(bad, 65536), dir), (err: Error & { kind?: string }) => {
      assert.equal(err.kind, 'InvalidParameter', err.message);
      assert.match(err.message, /invalid layer tar/);
      return true;
    });
  });
});
