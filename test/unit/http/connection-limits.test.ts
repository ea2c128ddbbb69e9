import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as tlsConnect } from 'node:tls';
import { Logger } from '../../../src/common/log.js';
import { readBody } from '../../../src/http/body.js';
import {
  ConnectionGuard,
  type ConnectionLimits,
  plainErrorBody,
} from '../../../src/http/connection-limits.js';
import {
  closeServer,
  createExchangeServer,
  type Exchange,
  readUpgradeBody,
  takeOverConnection,
} from '../../../src/http/server.js';
import { eventually } from '../../helpers/eventually.js';
import { RawConnection, type RawTarget, rawExchange } from '../../helpers/raw-http.js';
import { makeTestCertificates } from '../../helpers/tls-certs.js';

const limits: ConnectionLimits = {
  maxHeaderBytes: 4096,
  maxConnectionsPerClient: 3,
  maxLocalConnections: 2,
  headersTimeoutMs: 400,
  bodyIdleTimeoutMs: 300,
  keepAliveTimeoutMs: 5000,
};

/** The routes of the server under test. */
async function route(ex: Exchange): Promise<void> {
  const { req, res } = ex;
  const url = req.url ?? '/';
  if (url === '/echo') {
    const body = await readBody(req).catch(() => undefined);
    if (body === undefined) return;
    res.end(`got ${body.length}`);
  } else if (url === '/close-listeners') {
    // what the connection's socket carries, seen from the server's side
    const body = await readBody(req);
    res.end(`listeners ${req.socket.listenerCount('close')} body ${body.length}`);
  } else if (url === '/late-reader') {
    // the server takes its time before reading: its client must not be blamed
    await sleep(900);
    const body = await readBody(req);
    res.end(`got ${body.length}`);
  } else if (url === '/stream') {
    // an answer that streams for longer than every timeout, with pauses longer than them
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    for (let i = 0; i < 4; i++) {
      res.write(`tick ${i}\n`);
      await sleep(450);
    }
    res.end('done\n');
  } else if (url === '/upgrade-body' && ex.upgrade) {
    // exec start: the options come as the body of an upgrade request, on the socket
    const body = await readUpgradeBody(ex);
    const socket = await takeOverConnection(ex);
    socket.write(`HTTP/1.1 101 UPGRADED\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\nbody ${body.length}\n`);
    socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
    socket.on('end', () => socket.end());
    socket.resume();
  } else if (url === '/hijack') {
    const socket = await takeOverConnection(ex);
    socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
    socket.on('end', () => socket.end());
    socket.resume();
  } else {
    res.end('ok');
  }
}

function serve(path?: string): Promise<{ server: Server; guard: ConnectionGuard; target: RawTarget }> {
  const guard = new ConnectionGuard(limits, plainErrorBody, new Logger('error'));
  const server = createExchangeServer(
    (ex) => {
      route(ex).catch(() => ex.res.destroy());
    },
    { guard },
  );
  return new Promise((resolve) => {
    const done = () => {
      const target: RawTarget = path
        ? { path }
        : { port: (server.address() as AddressInfo).port, host: '127.0.0.1' };
      resolve({ server, guard, target });
    };
    if (path) server.listen(path, done);
    else server.listen(0, '127.0.0.1', done);
  });
}

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`;

describe('connection limits', () => {
  let tcp: Awaited<ReturnType<typeof serve>>;
  let unix: Awaited<ReturnType<typeof serve>>;
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-limits-'));
    tcp = await serve();
    unix = await serve(join(dir, 'api.sock'));
  });
  after(async () => {
    await closeServer(tcp.server);
    await closeServer(unix.server);
    await rm(dir, { recursive: true, force: true });
  });

  it('answers 431 to headers past maxHeaderBytes, and keeps serving', async () => {
    const big = `GET / HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(5000)}\r\n\r\n`;
    const answer = await rawExchange(tcp.target, big, 3000);
    assert.match(answer, /^HTTP\/1\.1 431 Request Header Fields Too Large/);
    assert.match(answer, /exceed the limit of 4096 bytes/);
    assert.match(answer, /Connection: close/);
    // a header just under the cap passes
    const fits = await rawExchange(
      tcp.target,
      get('/').replace('\r\n\r\n', `\r\nX-Ok: ${'a'.repeat(3500)}\r\n\r\n`),
    );
    assert.match(fits, /^HTTP\/1\.1 200/);
  });

  it('answers 408 and closes a connection whose headers do not come in time (slow loris)', async () => {
    const c = await RawConnection.open(tcp.target);
    const t0 = Date.now();
    c.write('GET / HTTP/1.1\r\nHost: t\r\n');
    // a byte now and then does not keep it open: the headers must be complete in time
    const drip = setInterval(() => c.write('X'), 100);
    const closed = await c.waitClosed(3000);
    clearInterval(drip);
    assert.ok(closed, 'the server closed the connection');
    assert.equal(c.status(), 408);
    assert.match(c.text(), /request headers not received within 400 ms/);
    const took = (c.closedAt ?? 0) - t0;
    assert.ok(took >= 350 && took < 2000, `closed after ${took} ms`);
    // a connection that never sends a byte goes the same way
    const silent = await RawConnection.open(tcp.target);
    assert.ok(await silent.waitClosed(3000));
    assert.equal(silent.status(), 408);
  });

  it('answers 408 and closes a request whose body stops arriving', async () => {
    const c = await RawConnection.open(tcp.target);
    const t0 = Date.now();
    c.write('POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789');
    assert.ok(await c.waitClosed(3000), 'the stalled request was cut');
    assert.equal(c.status(), 408);
    assert.match(c.text(), /request body stalled: no data received for 300 ms/);
    const took = (c.closedAt ?? 0) - t0;
    assert.ok(took >= 280 && took < 2000, `closed after ${took} ms`);
    // chunked: the same
    const chunked = await RawConnection.open(tcp.target);
    chunked.write('POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    assert.ok(await chunked.waitClosed(3000));
    assert.equal(chunked.status(), 408);
  });

  it('cuts an upgrade request whose body stalls, not the stream that follows a body read whole', async () => {
    const head =
      'POST /upgrade-body HTTP/1.1\r\nHost: t\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Length: 20\r\n\r\n';
    const stalled = await RawConnection.open(tcp.target);
    stalled.write(`${head}{"Detach":`);
    assert.ok(await stalled.waitClosed(3000), 'the stalled upgrade body was cut');
    assert.equal(stalled.status(), 408);
    const ok = await RawConnection.open(tcp.target);
    ok.write(`${head}{"Detach":false, "a"}`);
    assert.ok(await ok.waitFor(/body 20\n/, 2000), ok.text());
    await sleep(700);
    ok.write('ping');
    assert.ok(await ok.waitFor(/echo:ping/, 2000), ok.text());
    assert.equal(ok.closedAt, undefined);
    ok.destroy();
  });

  it('does not cut a body that arrives slowly but steadily, nor one the server reads late', async () => {
    const c = await RawConnection.open(tcp.target);
    c.write('POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 8\r\n\r\n');
    for (let i = 0; i < 8; i++) {
      await sleep(150);
      c.write('x');
    }
    assert.ok(await c.waitClosed(3000));
    assert.match(c.text(), /^HTTP\/1\.1 200[\s\S]*got 8$/);
    const body = 'y'.repeat(200_000);
    const late = await rawExchange(
      tcp.target,
      `POST /late-reader HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    assert.match(late, /^HTTP\/1\.1 200[\s\S]*got 200000$/);
  });

  it('does not cut a long streaming answer, nor a taken-over connection whose client pauses', async () => {
    const stream = await rawExchange(tcp.target, get('/stream'), 5000);
    assert.match(stream, /tick 0\n[\s\S]*tick 3\n[\s\S]*done\n/);
    const c = await RawConnection.open(tcp.target);
    // the body's last bytes come late: the connection was taken over meanwhile
    c.write('POST /hijack HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\na');
    await sleep(700);
    c.write('bc');
    await sleep(100);
    c.write('ping');
    assert.ok(await c.waitFor(/echo:ping/, 3000), `got ${JSON.stringify(c.text())}`);
    assert.equal(c.closedAt, undefined);
    c.destroy();
  });

  it('answers 429 to a client past its connections, and admits it again once it closed some', async () => {
    await eventually('earlier connections closed', () => tcp.guard.openConnections('127.0.0.1') === 0);
    const held: RawConnection[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await RawConnection.open(tcp.target);
      c.write('GET / HTTP/1.1\r\nHost: t\r\n\r\n');
      assert.ok(await c.waitFor(/ok$/, 2000));
      held.push(c);
    }
    const over = await rawExchange(tcp.target, get('/'));
    assert.match(over, /^HTTP\/1\.1 429 Too Many Requests/);
    assert.match(over, /too many open connections from 127\.0\.0\.1 \(the limit is 3 per client\)/);
    // the held ones keep working
    held[0]?.write('GET / HTTP/1.1\r\nHost: t\r\n\r\n');
    assert.ok(await held[0]?.waitFor(/ok[\s\S]*ok$/, 2000), held[0]?.text());
    held.pop()?.destroy();
    await eventually('one closed', () => tcp.guard.openConnections('127.0.0.1') <= 2);
    assert.match(await rawExchange(tcp.target, get('/')), /^HTTP\/1\.1 200/);
    for (const c of held) c.destroy();
    await eventually('all closed', () => tcp.guard.openConnections('127.0.0.1') === 0);
  });

  it('caps the connections of a unix socket as a whole', async () => {
    const held: RawConnection[] = [];
    for (let i = 0; i < 2; i++) {
      const c = await RawConnection.open(unix.target);
      c.write('GET / HTTP/1.1\r\nHost: t\r\n\r\n');
      assert.ok(await c.waitFor(/ok$/, 2000));
      held.push(c);
    }
    const over = await rawExchange(unix.target, get('/'));
    assert.match(over, /^HTTP\/1\.1 429/);
    assert.match(over, /too many open connections on this socket \(the limit is 2\)/);
    for (const c of held) c.destroy();
    await eventually('held connections closed', () => unix.guard.openConnections('local') === 0);
    assert.match(await rawExchange(unix.target, get('/')), /^HTTP\/1\.1 200/);
    // the server's side goes once the client has closed its own (a lingering close)
    await eventually('the last connection closed', () => unix.guard.openConnections('local') === 0);
  });

  it('over TLS: closes a client that never finishes its handshake, and caps headers the same', async () => {
    const certs = await makeTestCertificates(join(dir, 'certs'));
    const guard = new ConnectionGuard(limits, plainErrorBody, new Logger('error'));
    const [cert, key] = await Promise.all([readFile(certs.serverCert), readFile(certs.serverKey)]);
    const server = createExchangeServer((ex) => ex.res.end('ok'), {
      guard,
      create: (listener) =>
        createHttpsServer({ cert, key, keepAlive: true, ...guard.tlsServerOptions() }, listener),
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    try {
      const silent = await RawConnection.open({ port });
      const t0 = Date.now();
      assert.ok(await silent.waitClosed(3000), 'the handshake that never came was cut');
      assert.ok(Date.now() - t0 >= 350, `closed after ${Date.now() - t0} ms`);
      const answer = await new Promise<string>((resolve) => {
        const s = tlsConnect({ port, host: '127.0.0.1', rejectUnauthorized: false }, () =>
          s.write(`GET / HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(5000)}\r\n\r\n`),
        );
        let got = '';
        s.on('data', (d: Buffer) => {
          got += d.toString();
        });
        s.on('close', () => resolve(got));
        s.on('error', () => undefined);
      });
      assert.match(answer, /^HTTP\/1\.1 431/);
    } finally {
      await closeServer(server);
    }
  });

  it('leaves no listener per request on a keep-alive connection', async () => {
    const conn = await RawConnection.open(tcp.target);
    try {
      const counts: number[] = [];
      for (let i = 0; i < 15; i++) {
        conn.write('POST /close-listeners HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi');
        assert.ok(await conn.waitFor(new RegExp(`(listeners \\d+ body 2[^]*){${i + 1}}`), 5000));
      }
      for (const m of conn.text().matchAll(/listeners (\d+) body 2/g)) counts.push(Number(m[1]));
      assert.equal(counts.length, 15);
      assert.equal(counts[14], counts[0], `close listeners per request: ${counts.join(' ')}`);
    } finally {
      conn.destroy();
    }
  });

  it('answers 400 to a malformed request and keeps serving', async () => {
    const bad = await rawExchange(tcp.target, 'GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n');
    assert.match(bad, /^HTTP\/1\.1 400/);
    assert.match(await rawExchange(tcp.target, get('/')), /^HTTP\/1\.1 200/);
  });

  it('lets a streaming answer finish before it refuses what came after its request', async () => {
    // garbage pipelined behind a request whose answer streams: the answer whole, then the 400
    const both = await rawExchange(tcp.target, 'GET /stream HTTP/1.1\r\nHost: t\r\n\r\n{"a":1}', 5000);
    assert.match(both, /^HTTP\/1\.1 200[\s\S]*done\n\r\n0\r\n\r\nHTTP\/1\.1 400 Bad Request\r\n/);
  });
});
