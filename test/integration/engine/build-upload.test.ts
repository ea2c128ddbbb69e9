import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { makeTar } from '../../unit/engine/storage/tar.helper.js';

/**
 * POST /build's context as the docker CLI sends it (chunked, which berth reads below node's HTTP
 * parser), from a raw socket: bodies cut anywhere, compressed, malformed, or abandoned mid-way.
 */
describe('build: the context upload', () => {
  let engine: TestEngine;
  const big = randomBytes(3 * 1024 * 1024);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  /** The context: a Dockerfile copying a large file (held, not written, while it arrives). */
  const context = (dockerfile: string, content = big) =>
    makeTar([
      { name: 'Dockerfile', content: dockerfile },
      { name: 'big.bin', content },
    ]);

  /** A chunked body of `data` in chunks of `size`, optionally with a fault put in at `breakAt`. */
  function chunked(data: Buffer, size: number): Buffer {
    const parts: Buffer[] = [];
    for (let at = 0; at < data.length; at += size) {
      const c = data.subarray(at, at + size);
      parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    return Buffer.concat(parts);
  }

  /**
   * Send `POST /build?query` with `wire` as its (already chunked) body in writes of `cut` bytes;
   * the answer as text (status line, headers, body) once the engine closes, or what came by the
   * time the client gave up (`abandonAfter` bytes sent).
   */
  function post(
    query: string,
    wire: Buffer,
    opts: { cut?: number; abandonAfter?: number } = {},
  ): Promise<string> {
    return new Promise((resolve) => {
      const socket = connect(engine.socket);
      const got: Buffer[] = [];
      socket.on('data', (d) => got.push(d));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(Buffer.concat(got).toString('utf8')));
      const timer = setTimeout(() => socket.destroy(), 120_000);
      socket.on('close', () => clearTimeout(timer));
      socket.write(
        `POST /v1.41/build?${query} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\n` +
          'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
      );
      const cut = opts.cut ?? 65536;
      const end = opts.abandonAfter ?? wire.length;
      void (async () => {
        for (let at = 0; at < end && !socket.destroyed; at += cut) {
          if (!socket.write(wire.subarray(at, Math.min(at + cut, end))))
            await new Promise((r) => socket.once('drain', r));
        }
        if (opts.abandonAfter !== undefined) {
          await sleep(100);
          socket.destroy();
        }
      })();
    });
  }

  const workLeft = async () => readdir(join(engine.dataRoot, 'build', 'work'));

  it('builds from a context cut anywhere, and finds it in the cache the second time', async () => {
    const tar = await context('FROM busybox\nCOPY big.bin /big.bin\nRUN wc -c /big.bin\n');
    const first = await post('t=upload-a&rm=1', chunked(tar, 32768), { cut: 7001 });
    assert.match(first, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(first, /Successfully tagged upload-a:latest/);
    // the same context in other cuts and chunk sizes: every step from the cache
    const second = await post('t=upload-a', chunked(tar, 1000), { cut: 65536 });
    assert.match(second, /Successfully tagged upload-a:latest/);
    assert.equal(second.match(/Using cache/g)?.length, 2, second);
    assert.equal(
      await engine.dockerOk(['run', '--rm', 'upload-a', 'sha256sum', '/big.bin']),
      `${execFileSync('sha256sum', { input: big }).toString().split(' ')[0]}  /big.bin`,
    );
  });

  it('a context past the bound of held contents: what does not fit is written as it arrives', async () => {
    // two files of 36 MiB: the first held (64 MiB for all builds), the second written
    const one = randomBytes(36 * 1024 * 1024);
    const two = randomBytes(36 * 1024 * 1024);
    const tar = await makeTar([
      { name: 'Dockerfile', content: 'FROM busybox\nCOPY one two /data/\n' },
      { name: 'one', content: one },
      { name: 'two', content: two },
    ]);
    const sums = [one, two].map((b) => execFileSync('sha256sum', { input: b }).toString().split(' ')[0]);
    for (const round of [1, 2]) {
      const answer = await post('t=upload-large', chunked(tar, 32768));
      assert.match(answer, /Successfully tagged upload-large:latest/, `round ${round}`);
      if (round === 2) assert.match(answer, /Using cache/);
    }
    assert.equal(
      await engine.dockerOk(['run', '--rm', 'upload-large', 'sha256sum', '/data/one', '/data/two']),
      `${sums[0]}  /data/one\n${sums[1]}  /data/two`,
    );
  });

  it('reads gzip, bzip2 and xz contexts sent chunked', async () => {
    const tar = await context('FROM busybox\nCOPY big.bin /big.bin\n', big.subarray(0, 200_000));
    for (const [tool, args] of [
      ['gzip', ['-c']],
      ['bzip2', ['-c']],
      ['xz', ['-c', '-0']],
    ] as const) {
      const packed = execFileSync(tool, [...args], { input: tar });
      const answer = await post(`t=upload-${tool}`, chunked(packed, 4096));
      assert.match(answer, /Successfully tagged/, `${tool}: ${answer}`);
    }
  });

  it('a malformed chunk is a 400 in the answer, and nothing is left behind', async () => {
    const tar = await context('FROM busybox\nCOPY big.bin /\n');
    const wire = chunked(tar, 32768);
    // the CRLF after the tenth chunk's data broken
    const at = wire.indexOf('\r\n8000\r\n', 10 * 32780);
    wire.write('XX', at);
    const answer = await post('t=upload-bad', wire);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.match(answer, /malformed chunked encoding: no CRLF after the chunk data/);
    assert.deepEqual(await workLeft(), []);
    assert.equal((await engine.request('GET', '/v1.41/_ping')).status, 200);
  });

  it('a client gone mid-upload leaves nothing behind', async () => {
    const tar = await context('FROM busybox\nCOPY big.bin /\n');
    await post('t=upload-gone', chunked(tar, 32768), { abandonAfter: 1024 * 1024 });
    let left = await workLeft();
    for (let i = 0; i < 50 && left.length; i++) {
      await sleep(100);
      left = await workLeft();
    }
    assert.deepEqual(left, []);
    const images = await engine.dockerOk(['images', '-q', 'upload-gone']);
    assert.equal(images, '');
  });
});
