import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultRegistryConnections } from '../../../src/registry/config.js';
import { RawConnection, type RawTarget, rawExchange } from '../../helpers/raw-http.js';
import {
  errorCodes,
  http,
  pushBlob,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`;

describe('registry connection caps (berth.connections)', () => {
  let reg: TestRegistry;
  let target: RawTarget;
  before(async () => {
    reg = await startTestRegistry({
      berth: {
        connections: {
          maxheaderbytes: 4096,
          maxconnectionsperclient: 4,
          headerstimeout: '400ms',
          bodyidletimeout: '400ms',
          keepalivetimeout: '300ms',
        },
      },
    });
    target = { port: reg.port };
  });
  after(async () => {
    await reg.stop();
  });

  const serves = async () => assert.match(await rawExchange(target, get('/v2/')), /^HTTP\/1\.1 200/);

  it('reads its defaults and its keys', () => {
    assert.deepEqual(reg.config.berth.connections, {
      ...defaultRegistryConnections,
      maxHeaderBytes: 4096,
      maxConnectionsPerClient: 4,
      maxLocalConnections: 4,
      headersTimeoutMs: 400,
      bodyIdleTimeoutMs: 400,
      keepAliveTimeoutMs: 300,
    });
  });

  it('answers 431 to headers past the cap and 408 to headers that do not come, then serves on', async () => {
    const big = await rawExchange(
      target,
      `GET /v2/ HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${'a'.repeat(5000)}\r\n\r\n`,
    );
    assert.match(big, /^HTTP\/1\.1 431 Request Header Fields Too Large/);
    assert.match(big, /request headers exceed the limit of 4096 bytes/);
    const slow = await RawConnection.open(target);
    slow.write('GET /v2/ HTTP/1.1\r\nHost: t\r\n');
    assert.ok(await slow.waitClosed(3000));
    assert.equal(slow.status(), 408);
    await serves();
  });

  it('cuts a blob upload whose body stalls (408), and the upload session stays for a retry', async () => {
    const start = await http('POST', `${reg.url}/v2/stall/me/blobs/uploads/`);
    assert.equal(start.status, 202);
    const location = new URL(start.headers.get('location') ?? '', reg.url);
    const c = await RawConnection.open(target);
    c.write(
      `PATCH ${location.pathname}${location.search} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(1000)}`,
    );
    const t0 = Date.now();
    assert.ok(await c.waitClosed(3000), 'the stalled upload was cut');
    assert.ok(Date.now() - t0 >= 350, 'not before the idle time');
    assert.equal(c.status(), 408);
    assert.match(c.text(), /the request body stalled: no data received for 400 ms/);
    const status = await http('GET', location.toString());
    assert.equal(status.status, 204, status.text());
    await serves();
  });

  it('does not cut an upload that arrives slowly but steadily, nor a pull read slowly', async () => {
    const data = randomBytes(3 * 1024 * 1024);
    const digest = sha256(data);
    const start = await http('POST', `${reg.url}/v2/slow/blob/blobs/uploads/`);
    const location = new URL(start.headers.get('location') ?? '', reg.url);
    location.searchParams.set('digest', digest);
    // 12 pieces, one every 150 ms: 1.8 s in all, every gap under the 400 ms idle cap
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        const piece = data.length / 12;
        for (let i = 0; i < 12; i++) {
          controller.enqueue(data.subarray(i * piece, (i + 1) * piece));
          await sleep(150);
        }
        controller.close();
      },
    });
    const put = await http('PUT', location.toString(), {
      body: stream,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(put.status, 201, put.text());
    // a client reading the blob with pauses longer than every timeout gets all of it
    const got = await new Promise<Buffer>((resolve, reject) => {
      const req = request(`${reg.url}/v2/slow/blob/blobs/${digest}`, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => {
          chunks.push(d);
          res.pause();
          setTimeout(() => res.resume(), chunks.length < 4 ? 600 : 0);
        });
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(sha256(got), digest);
  });

  it('answers 429 TOOMANYREQUESTS to a client past its connections', async () => {
    // the earlier tests' idle keep-alive connections are closed by the server meanwhile
    await sleep(800);
    const held: RawConnection[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const c = await RawConnection.open(target);
        c.write('GET /v2/ HTTP/1.1\r\nHost: t\r\n\r\n');
        assert.ok(await c.waitFor(/\{\}$/, 3000), `connection ${i}: ${c.text()}`);
        held.push(c);
      }
      const over = await http('GET', `${reg.url}/v2/`);
      assert.equal(over.status, 429);
      assert.deepEqual(errorCodes(over), ['TOOMANYREQUESTS']);
      assert.match(over.text(), /too many open connections from 127\.0\.0\.1 \(the limit is 4 per client\)/);
    } finally {
      for (const c of held) c.destroy();
    }
    await sleep(100);
    await serves();
    // what the caps refused did not stop the registry from working
    await pushBlob(reg.url, 'after/limits', 'still works');
  });
});
