import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RawChunkedBody, requestBody } from '../../../src/http/raw-body.js';
import { closeServer, createExchangeServer, sendJson } from '../../../src/http/server.js';

/** What the server saw of each body read below the parser. */
interface Seen {
  raw: boolean;
  bytes: number;
  sha256: string;
  error?: string;
}

const seen: Seen[] = [];
/** When a held answer (`/hold`) saw its client go, before it was written. */
const closedWhileHeld: number[] = [];
const dir = mkdtempSync(join(tmpdir(), 'berth-raw-body-'));
const path = join(dir, 'sock');
let server: Server;

/** Read the whole body of a request through requestBody, answering what it saw. */
async function readAll(req: Parameters<typeof requestBody>[0]): Promise<Seen> {
  const body = requestBody(req);
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for await (const c of body) {
      bytes += (c as Buffer).length;
      hash.update(c as Buffer);
    }
    return { raw: body instanceof RawChunkedBody, bytes, sha256: hash.digest('hex') };
  } catch (err) {
    return { raw: body instanceof RawChunkedBody, bytes, sha256: '', error: (err as Error).message };
  }
}

before(async () => {
  server = createExchangeServer(
    ({ req, res }) => {
      if (req.url === '/early') {
        // answered before the body is read
        sendJson(res, 400, { message: 'no' });
        return;
      }
      if (req.url === '/slow') {
        // reads nothing for a while: the socket must not be read ahead without bound
        const body = requestBody(req);
        setTimeout(() => {
          const socket = req.socket;
          sendJson(res, 200, { buffered: body.readableLength, read: socket.bytesRead });
        }, 300);
        return;
      }
      if (req.url === '/recycle') {
        // reads as the build context's extraction does: each buffer given back once a chunk of
        // another begins
        const body = requestBody(req) as RawChunkedBody;
        const hash = createHash('sha256');
        const buffers = new Set<ArrayBufferLike>();
        let last: ArrayBufferLike | undefined;
        let bytes = 0;
        body.on('data', (c: Buffer) => {
          if (c.buffer !== last) {
            if (last) body.recycle(last);
            last = c.buffer;
          }
          buffers.add(c.buffer);
          hash.update(c);
          bytes += c.length;
        });
        body.on('end', () =>
          sendJson(res, 200, { bytes, sha256: hash.digest('hex'), buffers: buffers.size }),
        );
        body.on('error', (err) => sendJson(res, 400, { message: err.message }));
        return;
      }
      if (req.url === '/hold') {
        // reads the whole body, then works without writing (a build's long step): a client that
        // goes away meanwhile must be seen (the answer's close), not only at the next write
        void readAll(req).then(() => {
          const timer = setTimeout(() => sendJson(res, 200, { held: 'to the end' }), 5000);
          res.on('close', () => {
            clearTimeout(timer);
            if (!res.writableFinished) closedWhileHeld.push(Date.now());
          });
        });
        return;
      }
      if (req.url === '/info') {
        sendJson(res, 200, { ok: true });
        return;
      }
      void readAll(req).then((s) => {
        seen.push(s);
        sendJson(res, s.error ? 400 : 200, s);
      });
    },
    { rawBody: (req) => req.method === 'POST' && req.url !== '/plain' },
  );
  // an idle kept connection closes soon (the tests' clients wait for the close)
  server.keepAliveTimeout = 500;
  await new Promise<void>((resolve) => server.listen(path, resolve));
});

after(async () => {
  await closeServer(server);
  rmSync(dir, { recursive: true, force: true });
});

/** One connection: writes `parts` (with a pause between them), collects the answer until it closes. */
function exchange(
  parts: Buffer[],
  opts: { gapMs?: number; endAfter?: boolean; destroyAfter?: boolean } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(path);
    const got: Buffer[] = [];
    socket.on('data', (d) => got.push(d));
    socket.on('error', (err) => {
      if ((err as NodeJS.ErrnoException).code === 'EPIPE' || opts.destroyAfter) return;
      reject(err);
    });
    socket.on('close', () => resolve(Buffer.concat(got).toString('latin1')));
    void (async () => {
      for (const p of parts) {
        if (socket.destroyed) return;
        socket.write(p);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
      if (opts.destroyAfter) {
        await new Promise((r) => setTimeout(r, 50));
        socket.destroy();
      }
    })();
    const timer = setTimeout(() => socket.destroy(), 10_000);
    socket.on('close', () => clearTimeout(timer));
  });
}

const head = (target: string, extra = '') =>
  Buffer.from(`POST ${target} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n${extra}\r\n`);

function chunked(data: Buffer, size: number): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at < data.length; at += size) {
    const c = data.subarray(at, at + size);
    parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Seen;

describe('request bodies read below the HTTP parser', () => {
  it('decodes a chunked body sent in pieces, with the headers and body in one packet or apart', async () => {
    const data = randomBytes(300_000);
    const sha256 = createHash('sha256').update(data).digest('hex');
    const wire = chunked(data, 32768);
    // the head and the start of the body in one write, then odd cuts
    const answer = await exchange(
      [
        Buffer.concat([head('/build', 'Connection: close\r\n'), wire.subarray(0, 1000)]),
        wire.subarray(1000, 1001),
        wire.subarray(1001),
      ],
      { gapMs: 5 },
    );
    assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
    // the client asked to close: the connection closes after the answer
    assert.match(answer, /\r\nConnection: close\r\n/i);
    assert.deepEqual(bodyOf(answer), { raw: true, bytes: data.length, sha256 });
    // byte by byte for a small one
    const small = chunked(Buffer.from('hello, world'), 5);
    const parts = [head('/build', 'Connection: close\r\n'), ...[...small].map((b) => Buffer.from([b]))];
    const second = bodyOf(await exchange([Buffer.concat(parts)]));
    assert.equal(second.raw, true);
    assert.equal(second.bytes, 12);
  });

  it('reads the socket into buffers of its own, read into again once the reader gives them back', async () => {
    const data = randomBytes(16 * 1024 * 1024);
    const sha256 = createHash('sha256').update(data).digest('hex');
    // sent in pieces with pauses, so that the socket's reads are many
    const wire = chunked(data, 40_000);
    const parts: Buffer[] = [];
    for (let at = 0; at < wire.length; at += 1024 * 1024) parts.push(wire.subarray(at, at + 1024 * 1024));
    const answer = await exchange([head('/recycle', 'Connection: close\r\n'), ...parts], { gapMs: 2 });
    const got = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as {
      bytes: number;
      sha256: string;
      buffers: number;
    };
    assert.equal(got.bytes, data.length);
    assert.equal(got.sha256, sha256);
    // 16 MiB is 256 reads of 64 KiB at the least: a few buffers read into again and again
    assert.ok(got.buffers <= 32, `${got.buffers} buffers`);
  });

  it('keeps the connection for the next requests: node parses them again, a raw body again', async () => {
    const answer = await exchange(
      [
        Buffer.concat([head('/build'), chunked(Buffer.from('first'), 2)]),
        Buffer.concat([head('/build'), chunked(Buffer.from('second!'), 3)]),
        // pipelined right after the body's end, in the same packet
        Buffer.concat([
          head('/build'),
          chunked(Buffer.from('third'), 5),
          Buffer.from('GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
        ]),
      ],
      { gapMs: 100 },
    );
    const answers = answer.split(/(?=HTTP\/1\.1 )/);
    assert.equal(answers.length, 4, answer);
    assert.match(answers[0] as string, /\r\nConnection: keep-alive\r\n[\s\S]*"raw":true,"bytes":5/);
    assert.match(answers[1] as string, /\r\nConnection: keep-alive\r\n[\s\S]*"raw":true,"bytes":7/);
    assert.match(answers[2] as string, /"raw":true,"bytes":5/);
    assert.match(answers[3] as string, /^HTTP\/1\.1 200 OK[\s\S]*\r\nConnection: close\r\n[\s\S]*"ok":true/);
  });

  it('after a raw body, node reads a Content-Length body on the same connection', async () => {
    const plain = randomBytes(200_000);
    const answer = await exchange(
      [
        Buffer.concat([head('/build'), chunked(randomBytes(300_000), 65_536)]),
        Buffer.concat([
          Buffer.from(
            `POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: ${plain.length}\r\nConnection: close\r\n\r\n`,
          ),
          plain,
        ]),
      ],
      { gapMs: 100 },
    );
    const answers = answer.split(/(?=HTTP\/1\.1 )/);
    assert.equal(answers.length, 2, answer);
    assert.match(answers[0] as string, /"raw":true,"bytes":300000/);
    const sha256 = createHash('sha256').update(plain).digest('hex');
    assert.match(answers[1] as string, new RegExp(`"raw":false,"bytes":200000,"sha256":"${sha256}"`));
  });

  it('closes a kept connection that stays idle for the keep-alive timeout', async () => {
    const started = Date.now();
    const answer = await exchange([Buffer.concat([head('/build'), chunked(Buffer.from('idle'), 4)])]);
    assert.match(answer, /\r\nConnection: keep-alive\r\n[\s\S]*"raw":true,"bytes":4/);
    // the exchange's own cut comes after 10 s
    assert.ok(Date.now() - started < 5000, `closed after ${Date.now() - started} ms`);
  });

  it('leaves other requests to node: a Content-Length body, a route not asked for, a keep-alive GET first', async () => {
    const plain = await exchange([
      Buffer.from('POST /build HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello'),
    ]);
    assert.deepEqual(bodyOf(plain), {
      raw: false,
      bytes: 5,
      sha256: createHash('sha256').update('hello').digest('hex'),
    });
    const notAsked = bodyOf(
      await exchange([head('/plain', 'Connection: close\r\n'), chunked(Buffer.from('ab'), 1)]),
    );
    assert.equal(notAsked.raw, false);
    assert.equal(notAsked.bytes, 2);
    // a GET answered on the connection, then a raw body on the same connection
    const both = await exchange(
      [
        Buffer.from('GET /info HTTP/1.1\r\nHost: x\r\n\r\n'),
        Buffer.concat([head('/build', 'Connection: close\r\n'), chunked(Buffer.from('abc'), 2)]),
      ],
      { gapMs: 50 },
    );
    assert.match(
      both,
      /^HTTP\/1\.1 200 OK[\s\S]*"ok":true[\s\S]*HTTP\/1\.1 200 OK[\s\S]*"raw":true,"bytes":3/,
    );
  });

  it('a malformed chunk fails the body with a 400, and the connection closes', async () => {
    const answer = await exchange([head('/build'), Buffer.from('5\r\nabcdeXX3\r\nabc\r\n0\r\n\r\n')]);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    const s = bodyOf(answer);
    assert.equal(s.raw, true);
    assert.equal(s.error, 'malformed chunked encoding: no CRLF after the chunk data');
  });

  it('a client gone mid-body fails the body', async () => {
    const before = seen.length;
    await exchange([head('/build'), Buffer.from('100\r\nabc')], { destroyAfter: true });
    for (let i = 0; i < 100 && seen.length === before; i++) await new Promise((r) => setTimeout(r, 20));
    const s = seen[seen.length - 1] as Seen;
    assert.equal(s.raw, true);
    assert.equal(s.bytes, 3);
    assert.equal(s.error, 'aborted');
  });

  it('a client gone after the whole body, while the answer is still being made, closes the answer', async () => {
    const before = closedWhileHeld.length;
    const left = Date.now();
    await exchange([head('/hold'), chunked(randomBytes(256 * 1024), 32768)], { destroyAfter: true });
    for (let i = 0; i < 100 && closedWhileHeld.length === before; i++)
      await new Promise((r) => setTimeout(r, 20));
    assert.equal(closedWhileHeld.length, before + 1, 'the answer did not see its client go');
    assert.ok((closedWhileHeld[before] ?? 0) - left < 2000);
  });

  it('an answer given before the body is read reaches a client still sending', async () => {
    const data = chunked(randomBytes(8 * 1024 * 1024), 32768);
    const answer = await exchange([head('/early'), data]);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.match(answer, /"message":"no"/);
  });

  it('keeps backpressure: a body nobody reads is not read from the socket without bound', async () => {
    const data = chunked(randomBytes(32 * 1024 * 1024), 32768);
    const answer = await exchange([head('/slow'), data]);
    const { buffered, read } = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as {
      buffered: number;
      read: number;
    };
    assert.ok(buffered <= 1024 * 1024, `buffered ${buffered}`);
    assert.ok(read < 4 * 1024 * 1024, `read ${read}`);
  });
});
