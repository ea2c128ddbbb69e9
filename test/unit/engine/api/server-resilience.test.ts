import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '../../../../src/common/log.js';
import { createApiRouter, createEngineServer } from '../../../../src/engine/api/server.js';
import { ConnectionGuard, plainErrorBody } from '../../../../src/http/connection-limits.js';
import { closeServer, sendJson } from '../../../../src/http/server.js';
import { eventually } from '../../../helpers/eventually.js';
import { RawConnection, type RawTarget, rawExchange } from '../../../helpers/raw-http.js';

const repoRoot = resolve(import.meta.dirname, '../../../..');
const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`;

describe('engine dispatcher: no request ends the server', () => {
  let server: Server;
  let target: RawTarget;
  const streamsClosed: string[] = [];

  before(async () => {
    const router = createApiRouter();
    router.add('GET', '/ok', (ctx) => sendJson(ctx.res, 200, { ok: true }));
    router.add('GET', '/sync-throw', () => {
      throw new Error('thrown synchronously');
    });
    router.add('GET', '/async-throw', async () => {
      await sleep(1);
      throw new Error('thrown after an await');
    });
    router.add('GET', '/throw-after-headers', (ctx) => {
      ctx.res.writeHead(200, { 'Content-Type': 'text/plain' });
      ctx.res.write('partial');
      throw new Error('thrown mid-answer');
    });
    router.add('GET', '/write-after-end', (ctx) => {
      ctx.res.end('done');
      // node emits 'error' on the response for this: with no listener that would be uncaught
      ctx.res.write('more');
    });
    router.add('POST', '/json', async (ctx) => {
      const body = await ctx.readJsonObject(1024);
      sendJson(ctx.res, 200, { keys: Object.keys(body).length });
    });
    router.add('GET', '/stream', (ctx) => {
      ctx.res.writeHead(200, { 'Content-Type': 'text/plain' });
      const timer = setInterval(() => ctx.res.write('x'.repeat(4096)), 2);
      ctx.res.on('close', () => {
        clearInterval(timer);
        streamsClosed.push('stream');
      });
    });
    const log = new Logger('error');
    // a guard with generous caps: the dispatcher's own behaviour is under test here
    const guard = new ConnectionGuard(
      {
        maxHeaderBytes: 64 * 1024,
        maxConnectionsPerClient: 0,
        maxLocalConnections: 0,
        headersTimeoutMs: 10_000,
        bodyIdleTimeoutMs: 10_000,
        keepAliveTimeoutMs: 10_000,
      },
      plainErrorBody,
      log,
    );
    server = createEngineServer(router, { log, serverHeader: 'berth-test', experimental: false, guard });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    target = { port: (server.address() as AddressInfo).port };
  });
  after(async () => {
    await closeServer(server);
  });

  const stillServes = async () => assert.match(await rawExchange(target, get('/ok')), /^HTTP\/1\.1 200/);

  it('answers 500 with a message for handlers that throw, synchronously or not', async () => {
    for (const path of ['/sync-throw', '/async-throw']) {
      const answer = await rawExchange(target, get(path));
      assert.match(answer, /^HTTP\/1\.1 500/, path);
      assert.match(answer, /"message":"thrown/);
    }
    await stillServes();
  });

  it('cuts an answer already under way when its handler throws, and a write after the end harms nothing', async () => {
    const cut = await rawExchange(target, get('/throw-after-headers'));
    assert.match(cut, /^HTTP\/1\.1 200[\s\S]*partial/);
    assert.match(await rawExchange(target, get('/write-after-end')), /^HTTP\/1\.1 200[\s\S]*done$/);
    await sleep(20);
    await stillServes();
  });

  it('survives clients gone mid-body, mid-headers and mid-stream', async () => {
    for (const partial of [
      'POST /json HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"a":',
      'POST /json HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n',
      'POST /json HTTP/1.1\r\nHost: t\r\nCont',
    ]) {
      const c = await RawConnection.open(target);
      c.write(partial);
      await sleep(30);
      c.socket.resetAndDestroy();
    }
    const reader = await RawConnection.open(target);
    reader.write(get('/stream'));
    assert.ok(await reader.waitFor(/xxxx/, 2000));
    reader.socket.resetAndDestroy();
    await eventually('the stream noticed its client left', () => streamsClosed.length === 1, 5000);
    await stillServes();
  });

  it('answers 413 to a JSON body past its limit and closes the connection instead of reading on', async () => {
    const big = JSON.stringify({ a: 'x'.repeat(4000) });
    const declared = await rawExchange(
      target,
      `POST /json HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
    );
    assert.match(declared, /^HTTP\/1\.1 413/);
    assert.match(declared, /exceeds the limit of 1024/);
    // chunked, and the client keeps sending: the server answers and closes
    const c = await RawConnection.open(target);
    c.write(
      'POST /json HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
    );
    const chunk = `1000\r\n${'y'.repeat(0x1000)}\r\n`;
    for (let i = 0; i < 4 && c.closedAt === undefined; i++) {
      c.write(chunk);
      await sleep(10);
    }
    assert.ok(await c.waitFor(/^HTTP\/1\.1 413[\s\S]*Connection: close[\s\S]*limit of 1024/, 2000), c.text());
    const feeder = setInterval(() => c.socket.writable && c.write(chunk), 10);
    const closed = await c.waitClosed(3000);
    clearInterval(feeder);
    assert.ok(closed, 'the server closed the connection rather than reading the rest');
    await stillServes();
  });

  it('ends an ordinary answer to an Upgrade request whose client left (its FIN), as for a plain request', async () => {
    const before = streamsClosed.length;
    const c = await RawConnection.open(target);
    c.write('GET /stream HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n');
    assert.ok(await c.waitFor(/xxxx/, 2000));
    c.socket.end();
    await eventually('the stream noticed its client left', () => streamsClosed.length === before + 1, 5000);
    c.destroy();
    await stillServes();
  });

  it('answers CONNECT as any method no route takes (node would close the connection)', async () => {
    for (const t of ['example.com:443', '/ok']) {
      const answer = await rawExchange(target, `CONNECT ${t} HTTP/1.1\r\nHost: t\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 404/, t);
      assert.match(answer, /page not found/);
    }
    await stillServes();
  });
});

describe('engine crash guard (a server process of its own)', () => {
  let child: ChildProcess;
  let target: RawTarget;
  let stderr = '';

  before(async () => {
    child = spawn(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'test/fixtures/crash-guard/engine-server.ts')],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    await eventually('the fixture server listens', () => /listening \d+/.test(out), 30_000, 50);
    target = { port: Number(/listening (\d+)/.exec(out)?.[1]) };
  });
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('answers 500 to a request whose timer, floating promise or error event throws, and keeps serving', async () => {
    const expected: Record<string, RegExp> = {
      '/timer-throws': /internal error: thrown in a timer/,
      '/floating-rejection': /internal error: nobody awaited this/,
      '/emitter-throws': /internal error: an error event nobody listens to/,
    };
    for (const [path, message] of Object.entries(expected)) {
      const answer = await rawExchange(target, get(path));
      assert.match(answer, /^HTTP\/1\.1 500/, `${path}: ${answer}\n${stderr}`);
      assert.match(answer, message);
    }
    assert.match(await rawExchange(target, get('/ok')), /^HTTP\/1\.1 200/);
    assert.equal(child.exitCode, null);
    assert.match(stderr, /uncaught exception in a request/);
  });

  it('cuts an answer under way whose timer throws, and serves on', async () => {
    const cut = await rawExchange(target, get('/throws-mid-stream'));
    assert.match(cut, /^HTTP\/1\.1 200[\s\S]*partial/);
    await eventually('the error is logged', () => /thrown mid-stream/.test(stderr), 5000);
    assert.match(stderr, /url="\/throws-mid-stream"/);
    assert.match(await rawExchange(target, get('/ok')), /^HTTP\/1\.1 200/);
    assert.equal(child.exitCode, null);
  });
});
