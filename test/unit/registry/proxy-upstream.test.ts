import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Upstream, UpstreamUnavailable } from '../../../src/registry/proxy/upstream.js';

const CHUNKS = 8;
const GAP_MS = 100;

/** Answers at once, then sends the body in CHUNKS pieces GAP_MS apart (or never, for /hang). */
function slowServer(): Server {
  return createServer((req, res) => {
    const url = req.url ?? '';
    if (url.includes('/never/')) return; // no answer at all
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': CHUNKS * 1024 });
    res.flushHeaders();
    let sent = 0;
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      res.write(Buffer.alloc(1024, 0x62));
      if (++sent === CHUNKS) {
        clearInterval(timer);
        res.end();
      }
    }, GAP_MS);
  });
}

describe('proxy upstream timeouts', () => {
  const server = slowServer();
  let upstream: Upstream;
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    // The whole body takes CHUNKS × GAP_MS = 800 ms, past the 300 ms answer timeout.
    upstream = new Upstream({ remoteurl: `http://127.0.0.1:${port}`, ttlMs: 60_000 }, 300);
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const digest = `sha256:${'0'.repeat(64)}`;

  it('a blob body that takes longer than the answer timeout arrives whole', async () => {
    const res = await upstream.request('GET', 'slow/blob', `blobs/${digest}`);
    assert.equal(res.status, 200);
    assert.equal(Buffer.from(await res.arrayBuffer()).length, CHUNKS * 1024);
  });

  it('any other request is bounded whole (a manifest body that is too slow fails)', async () => {
    const res = await upstream.request('GET', 'slow/blob', `manifests/${digest}`);
    await assert.rejects(res.arrayBuffer());
  });

  it('no answer at all within the timeout: UpstreamUnavailable, for a blob GET too', async () => {
    await assert.rejects(upstream.request('GET', 'never/blob', `blobs/${digest}`), UpstreamUnavailable);
    await assert.rejects(upstream.request('GET', 'never/blob', `manifests/${digest}`), UpstreamUnavailable);
  });
});
