import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { renameSync } from 'node:fs';
import { copyFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sendFileRange } from '../../../src/registry/storage/sendfile.js';
import { tempDir } from '../../helpers/registry.js';

describe('sendFileRange', () => {
  let dir: string;
  let file: string;
  const data = randomBytes(3 * 1024 * 1024 + 12345);
  let server: Server;
  let url: string;
  const threadedAt: number[] = [];
  before(async () => {
    dir = await tempDir('berth-sendfile-');
    file = join(dir, 'data');
    await writeFile(file, data);
    server = createServer((req, res) => {
      const q = new URL(req.url ?? '/', 'http://x').searchParams;
      const start = Number(q.get('start'));
      const end = Number(q.get('end'));
      res.setHeader('Content-Length', end - start + 1);
      const slowReadMs = q.has('slow') ? Number(q.get('slow')) : undefined;
      const path = q.get('file') ?? file;
      void sendFileRange(res, path, start, end, {
        chunk: Number(q.get('chunk') ?? 1024 * 1024),
        slowReadMs,
        onThreaded: (pos) => threadedAt.push(pos),
      }).catch((err: unknown) => res.destroy(err as Error));
      // ?moveto: the file is renamed once the transfer has opened it (as a proxied blob's
      // temporary file is moved into place while clients read it).
      const to = q.get('moveto');
      if (to) renameSync(path, to);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  const get = async (query: string) => Buffer.from(await (await fetch(`${url}/?${query}`)).arrayBuffer());

  it('sends the whole file and any range of it, in chunks smaller and larger than the range', async () => {
    assert.ok((await get(`start=0&end=${data.length - 1}`)).equals(data));
    assert.ok((await get('start=5&end=5')).equals(data.subarray(5, 6)));
    assert.ok((await get('start=1000&end=2000000&chunk=65536')).equals(data.subarray(1000, 2000001)));
    assert.ok((await get(`start=7&end=${data.length - 1}&chunk=4096`)).equals(data.subarray(7)));
    assert.deepEqual(threadedAt, []);
  });

  it('goes on through the threadpool after slow reads in a row, the bytes unchanged', async () => {
    // Every read counts as slow: the third one switches the transfer to asynchronous reads.
    const got = await get(`start=0&end=${data.length - 1}&chunk=262144&slow=-1`);
    assert.ok(got.equals(data));
    assert.deepEqual(threadedAt, [2 * 262144]);
  });

  it('reads on from the file it opened when the file is renamed meanwhile', async () => {
    const moving = join(dir, 'moving.tmp');
    await copyFile(file, moving);
    threadedAt.length = 0;
    const q = `start=0&end=${data.length - 1}&chunk=262144&slow=-1&file=${encodeURIComponent(moving)}&moveto=${encodeURIComponent(join(dir, 'moved'))}`;
    const got = await get(q);
    assert.deepEqual(threadedAt, [2 * 262144]);
    assert.equal(got.length, data.length);
    assert.ok(got.equals(data));
  });
});
