import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FrameDecoder } from '../../../src/http/stream.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/**
 * Attach without `Upgrade`: dockerd answers 200 and hijacks the connection all the same, so the
 * client's stdin reaches the container and output keeps coming after the client half-closes.
 */
describe('attach without Upgrade (plain 200)', () => {
  let engine: TestEngine;
  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('carries stdin and multiplexed output over a hijacked plain connection', async () => {
    const created = await engine.request('POST', '/v1.44/containers/create', {
      body: { Image: 'busybox', Cmd: ['cat'], OpenStdin: true, StdinOnce: true, AttachStdin: true },
    });
    assert.equal(created.status, 201, created.text());
    const id = created.json<{ Id: string }>().Id;
    assert.equal((await engine.request('POST', `/v1.44/containers/${id}/start`)).status, 204);

    const socket = connect(engine.socket);
    const received: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('data', (d: Buffer) => received.push(d));
    socket.write(
      `POST /v1.44/containers/${id}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: engine\r\nContent-Length: 0\r\n\r\n`,
    );
    // Wait for the answer's head, then send stdin as raw bytes on the same connection.
    for (let i = 0; i < 100 && !Buffer.concat(received).includes('\r\n\r\n'); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const head = Buffer.concat(received).toString('latin1');
    assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(head, /Content-Type: application\/vnd\.docker\.multiplexed-stream/);
    socket.write('hello\nworld\n');
    socket.end(); // half-close: with StdinOnce, cat sees EOF and the container exits
    const timer = setTimeout(() => socket.destroy(), 20_000);
    await closed;
    clearTimeout(timer);

    const all = Buffer.concat(received);
    const body = all.subarray(all.indexOf('\r\n\r\n') + 4);
    const frames = new FrameDecoder().push(body);
    const stdout = Buffer.concat(frames.filter((f) => f.stream === 1).map((f) => f.payload)).toString();
    assert.equal(stdout, 'hello\nworld\n');
    const wait = await engine.request('POST', `/v1.44/containers/${id}/wait`);
    assert.equal(wait.json<{ StatusCode: number }>().StatusCode, 0);
    // Removal leaves nothing of the container under the exec root.
    assert.equal((await engine.request('DELETE', `/v1.44/containers/${id}`)).status, 204);
    assert.equal(existsSync(join(engine.execRoot, 'containers', id)), false);
  });

  /** Attach over a raw connection; resolves when the engine closes it (or after `ms`). */
  const rawAttach = async (id: string, query: string, input?: string, ms = 10_000) => {
    const socket = connect(engine.socket);
    const received: Buffer[] = [];
    const closed = new Promise<boolean>((resolve) => socket.on('close', () => resolve(true)));
    socket.on('data', (d: Buffer) => received.push(d));
    socket.write(
      `POST /v1.44/containers/${id}/attach?${query} HTTP/1.1\r\nHost: engine\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n`,
    );
    for (let i = 0; i < 100 && !Buffer.concat(received).includes('\r\n\r\n'); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (input !== undefined) {
      socket.write(input);
      socket.end();
    }
    const timer = setTimeout(() => socket.destroy(), ms);
    const t0 = Date.now();
    await closed;
    clearTimeout(timer);
    return { head: Buffer.concat(received).toString('latin1'), ms: Date.now() - t0 };
  };

  it('ends at once a stream with nothing to carry, and when the client ends its input (not StdinOnce)', async () => {
    const created = await engine.request('POST', '/v1.44/containers/create', {
      body: { Image: 'busybox', Cmd: ['cat'], OpenStdin: true },
    });
    const id = created.json<{ Id: string }>().Id;
    assert.equal((await engine.request('POST', `/v1.44/containers/${id}/start`)).status, 204);
    // stream=1 and nothing asked for: 101, then closed (dockerd does the same)
    const empty = await rawAttach(id, 'stream=1');
    assert.match(empty.head, /^HTTP\/1\.1 101 /);
    assert.ok(empty.ms < 5000, `closed after ${empty.ms} ms`);
    // the client ends its stdin: without StdinOnce the attach ends and the container runs on
    const ended = await rawAttach(id, 'stream=1&stdin=1&stdout=1', 'hi\n');
    assert.ok(ended.ms < 5000, `closed after ${ended.ms} ms`);
    const state = await engine.request('GET', `/v1.44/containers/${id}/json`);
    assert.equal(state.json<{ State: { Running: boolean } }>().State.Running, true);
    assert.equal((await engine.request('DELETE', `/v1.44/containers/${id}?force=1`)).status, 204);
  });

  it('survives clients that leave in the middle of a log replay (attach and attach/ws)', async () => {
    const created = await engine.request('POST', '/v1.44/containers/create', {
      body: {
        Image: 'busybox',
        Cmd: ['sh', '-c', 'yes 0123456789012345678901234567890123456789 | head -c 8000000; sleep 600'],
      },
    });
    const id = created.json<{ Id: string }>().Id;
    assert.equal((await engine.request('POST', `/v1.44/containers/${id}/start`)).status, 204);
    for (let i = 0; i < 100; i++) {
      const logs = await engine.request('GET', `/v1.44/containers/${id}/logs?stdout=1&tail=1`);
      if (logs.body.length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const requests = [
      `POST /v1.44/containers/${id}/attach?logs=1&stream=1&stdout=1 HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\n\r\n`,
      `POST /v1.44/containers/${id}/attach?logs=1&stream=1&stdout=1 HTTP/1.1\r\nHost: e\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n`,
      `GET /v1.44/containers/${id}/attach/ws?logs=1&stream=1&stdout=1 HTTP/1.1\r\nHost: e\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    ];
    for (const request of [...requests, ...requests]) {
      await new Promise<void>((resolve) => {
        const socket = connect(engine.socket);
        socket.on('error', () => resolve());
        socket.once('data', () => {
          socket.destroy(); // gone at the first bytes, while the engine writes the replay
          resolve();
        });
        socket.write(request);
      });
    }
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await engine.request('GET', '/_ping')).status, 200, engine.log());
    assert.equal((await engine.request('DELETE', `/v1.44/containers/${id}?force=1`)).status, 204);
  });

  it('drops a request body (dockerode sends its options as JSON): stdin starts after it', async () => {
    const body = JSON.stringify({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
    const cases: Array<{ name: string; upgrade: boolean; writes: (head: string) => Array<string | number> }> =
      [
        // everything in one write: node hands the body over as the upgrade's first bytes
        { name: 'upgrade, one write', upgrade: true, writes: (h) => [`${h}${body}one\n`] },
        // the body split across writes, stdin right after its end
        {
          name: 'upgrade, split body',
          upgrade: true,
          writes: (h) => [`${h}${body.slice(0, 10)}`, 100, `${body.slice(10)}two\n`],
        },
        { name: 'plain, one write', upgrade: false, writes: (h) => [`${h}${body}`, 'answer', 'three\n'] },
        // the engine takes the connection before the body came: it waits for it
        { name: 'plain, late body', upgrade: false, writes: (h) => [h, 200, body, 'answer', 'four\n'] },
      ];
    for (const c of cases) {
      const created = await engine.request('POST', '/v1.44/containers/create', {
        body: { Image: 'busybox', Cmd: ['cat'], OpenStdin: true, StdinOnce: true, AttachStdin: true },
      });
      const id = created.json<{ Id: string }>().Id;
      assert.equal((await engine.request('POST', `/v1.44/containers/${id}/start`)).status, 204);
      const socket = connect(engine.socket);
      const received: Buffer[] = [];
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.on('data', (d: Buffer) => received.push(d));
      const head =
        `POST /v1.44/containers/${id}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: engine\r\n` +
        (c.upgrade ? 'Upgrade: tcp\r\nConnection: Upgrade\r\n' : '') +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
      for (const w of c.writes(head)) {
        if (typeof w === 'number') await new Promise((r) => setTimeout(r, w));
        else if (w === 'answer') {
          for (let i = 0; i < 100 && !Buffer.concat(received).includes('\r\n\r\n'); i++) {
            await new Promise((r) => setTimeout(r, 50));
          }
        } else socket.write(w);
      }
      socket.end();
      const timer = setTimeout(() => socket.destroy(), 20_000);
      await closed;
      clearTimeout(timer);
      const all = Buffer.concat(received);
      assert.match(all.toString('latin1'), c.upgrade ? /^HTTP\/1\.1 101 UPGRADED/ : /^HTTP\/1\.1 200 OK/);
      const frames = new FrameDecoder().push(all.subarray(all.indexOf('\r\n\r\n') + 4));
      const stdout = Buffer.concat(frames.filter((f) => f.stream === 1).map((f) => f.payload)).toString();
      assert.match(stdout, /^(one|two|three|four)\n$/, `${c.name}: ${JSON.stringify(stdout)}`);
      assert.equal((await engine.request('DELETE', `/v1.44/containers/${id}?force=1`)).status, 204);
    }
  });
});
