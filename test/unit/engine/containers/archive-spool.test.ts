import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { UploadSpool } from '../../../../src/engine/containers/archive/spool.js';

/** A body that sends `chunks`, then fails (a client that went away) when asked to. */
function body(chunks: Buffer[], failAtEnd = false): Readable {
  let i = 0;
  return new Readable({
    read() {
      if (i < chunks.length) this.push(chunks[i++]);
      else if (failAtEnd) this.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
      else this.push(null);
    },
  });
}

async function readAll(r: Readable): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of r) out.push(c as Buffer);
  return Buffer.concat(out);
}

describe('docker cp upload spool', () => {
  let dir: string;
  let spool: UploadSpool;
  const files = async () => readdir(dir).catch(() => [] as string[]);
  before(async () => {
    dir = join(await mkdtemp(join(tmpdir(), 'berth-spool-')), 'tmp');
    spool = new UploadSpool(dir, 1000);
  });
  after(async () => {
    await rm(join(dir, '..'), { recursive: true, force: true });
  });

  it('receives a body whole, reads it as often as asked, and removes it', async () => {
    const a = await spool.receive(body([Buffer.alloc(600, 1), Buffer.alloc(400, 2)]), 1000);
    assert.equal(a.size, 1000);
    assert.equal((await files()).length, 1);
    assert.equal((await readAll(a.open())).length, 1000);
    assert.deepEqual(await readAll(a.open()), Buffer.concat([Buffer.alloc(600, 1), Buffer.alloc(400, 2)]));
    await a.remove();
    await a.remove();
    assert.deepEqual(await files(), []);
  });

  it('answers 413 past the cap (declared or sent) and keeps nothing', async () => {
    assert.throws(() => spool.checkDeclared(1001), { kind: 'TooLarge' });
    const unread = body([Buffer.alloc(10)]);
    await assert.rejects(spool.receive(unread, 5000), { kind: 'TooLarge' });
    assert.equal(unread.readableDidRead, false, 'nothing read of a body declared too large');
    await assert.rejects(spool.receive(body([Buffer.alloc(700), Buffer.alloc(700)])), (err: Error) => {
      assert.equal((err as { kind?: string }).kind, 'TooLarge');
      assert.match(err.message, /archive is larger than the engine accepts \(1000 bytes\)/);
      return true;
    });
    assert.deepEqual(await files(), []);
  });

  it('keeps nothing of a client that goes away or sends less than it declared (400)', async () => {
    await assert.rejects(spool.receive(body([Buffer.alloc(300)], true)), (err: Error) => {
      assert.equal((err as { kind?: string }).kind, 'InvalidParameter');
      assert.match(err.message, /cannot read the archive: aborted/);
      return true;
    });
    await assert.rejects(spool.receive(body([Buffer.alloc(300)]), 500), { kind: 'InvalidParameter' });
    assert.deepEqual(await files(), []);
  });

  it('leaves a refused request able to take its answer (413 while the client is still sending)', async () => {
    // as the archive route does: answer, and close instead of reading the rest
    const server = createServer((req, res) => {
      spool.receive(req).then(
        () => res.end('received'),
        (err: Error & { kind?: string }) => {
          res.writeHead(err.kind === 'TooLarge' ? 413 : 400, { Connection: 'close' });
          res.end(err.message);
        },
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, method: 'PUT', path: '/' }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
          );
        });
        req.on('error', reject);
        // chunked, 600 bytes at a time, never ending by itself
        const timer = setInterval(() => req.write(Buffer.alloc(600)), 20);
        req.on('close', () => clearInterval(timer));
        setTimeout(() => req.destroy(), 5000).unref();
      });
      assert.equal(answer.status, 413);
      assert.match(answer.text, /archive is larger than the engine accepts/);
      assert.deepEqual(await files(), []);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('sweeps what a killed engine left, and only that', async () => {
    await writeFile(join(dir, 'cp-0123.tar'), 'left');
    await writeFile(join(dir, 'other'), 'kept');
    await spool.sweep();
    assert.deepEqual(await files(), ['other']);
    await rm(join(dir, 'other'));
  });
});
