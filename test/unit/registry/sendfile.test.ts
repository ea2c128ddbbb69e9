import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readlinkSync, renameSync } from 'node:fs';
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
  before(async () => {
    dir = await tempDir('berth-sendfile-');
    file = join(dir, 'data');
    await writeFile(file, data);
    server = createServer((req, res) => {
      const q = new URL(req.url ?? '/', 'http://x').searchParams;
      const start = Number(q.get('start'));
      const end = Number(q.get('end'));
      res.setHeader('Content-Length', end - start + 1);
      const path = q.get('file') ?? file;
      void sendFileRange(res, path, start, end, {
        chunk: Number(q.get('chunk') ?? 1024 * 1024),
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
    // ~800 reads, four at a time ahead of the socket: every byte in its place
    assert.ok((await get(`start=7&end=${data.length - 1}&chunk=4096`)).equals(data.subarray(7)));
  });

  it('keeps each response its own bytes while buffers pass from one response to the next', async () => {
    const other = randomBytes(2 * 1024 * 1024 + 7);
    const otherFile = join(dir, 'other');
    await writeFile(otherFile, other);
    for (let round = 0; round < 3; round++) {
      const [a, b, c] = await Promise.all([
        get(`start=0&end=${data.length - 1}`),
        get(`start=0&end=${other.length - 1}&file=${encodeURIComponent(otherFile)}`),
        get(`start=100000&end=${data.length - 1}`),
      ]);
      assert.ok(a.equals(data));
      assert.ok(b.equals(other));
      assert.ok(c.equals(data.subarray(100000)));
    }
  });

  it('cuts the answer when the file is shorter than the range (never a complete-looking one)', async () => {
    const res = await fetch(`${url}/?start=0&end=${data.length + 4096}`);
    await assert.rejects(res.arrayBuffer());
  });

  it('closes its descriptor when the client goes away mid-transfer', async () => {
    // descriptors of this process open on the file
    const fds = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === file;
        } catch {
          return false;
        }
      }).length;
    const before = fds();
    for (let i = 0; i < 4; i++) {
      const ac = new AbortController();
      const res = await fetch(`${url}/?start=0&end=${data.length - 1}&chunk=4096`, { signal: ac.signal });
      const reader = res.body?.getReader();
      await reader?.read();
      ac.abort();
    }
    let after = fds();
    for (let i = 0; i < 50 && after > before; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = fds();
    }
    assert.ok(after <= before, `descriptors: ${before} before, ${after} after`);
    assert.ok((await get(`start=0&end=${data.length - 1}`)).equals(data));
  });

  it('reads on from the file it opened when the file is renamed meanwhile', async () => {
    const moving = join(dir, 'moving.tmp');
    await copyFile(file, moving);
    const q = `start=0&end=${data.length - 1}&chunk=262144&file=${encodeURIComponent(moving)}&moveto=${encodeURIComponent(join(dir, 'moved'))}`;
    const got = await get(q);
    assert.equal(got.length, data.length);
    assert.ok(got.equals(data));
  });
});
