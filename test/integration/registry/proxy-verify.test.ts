// The pull-through cache checks what its upstream sends against the digest asked for: a blob or
// a manifest whose content does not match is neither served whole nor cached.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { http, OCI_MANIFEST, sha256, startTestRegistry, type TestRegistry } from '../../helpers/registry.js';

/** An upstream that answers every blob and manifest by digest with other content of that size. */
function lyingUpstream(): { server: Server; gets: string[] } {
  const gets: string[] = [];
  const blob = Buffer.alloc(3 * 1024 * 1024, 0x61);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256('{}'), size: 2 },
      layers: [],
    }),
  );
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (req.method === 'GET') gets.push(url);
    res.setHeader('Docker-Distribution-API-Version', 'registry/2.0');
    const digest = /\/(?:blobs|manifests)\/(sha256:[0-9a-f]{64})$/.exec(url)?.[1];
    if (url === '/v2/') {
      res.setHeader('Content-Type', 'application/json');
      res.end('{}');
    } else if (digest && url.includes('/blobs/')) {
      res.setHeader('Content-Type', 'application/octet-stream');
      res.setHeader('Content-Length', blob.length);
      res.setHeader('Docker-Content-Digest', digest);
      res.end(req.method === 'HEAD' ? undefined : blob);
    } else if (digest) {
      res.setHeader('Content-Type', OCI_MANIFEST);
      res.setHeader('Content-Length', manifest.length);
      res.setHeader('Docker-Content-Digest', digest);
      res.end(req.method === 'HEAD' ? undefined : manifest);
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  return { server, gets };
}

describe('a proxy whose upstream sends content that does not match the digest', () => {
  const upstream = lyingUpstream();
  let proxy: TestRegistry;
  before(async () => {
    await new Promise<void>((r) => upstream.server.listen(0, '127.0.0.1', r));
    const port = (upstream.server.address() as AddressInfo).port;
    proxy = await startTestRegistry({ proxy: { remoteurl: `http://127.0.0.1:${port}` } });
  });
  after(async () => {
    await proxy?.stop();
    await new Promise((r) => upstream.server.close(r));
  });

  it('a blob: the answer is cut before its end, nothing is cached, the next GET asks the upstream again', async () => {
    const digest = sha256('the real content');
    const path = `/v2/lie/blob/blobs/${digest}`;
    /** Whether the proxy answered 200 and ended the body normally (a whole answer). */
    const pull = async (): Promise<{ status: number; ended: boolean; bytes: number }> => {
      const res = await fetch(`${proxy.url}${path}`);
      let bytes = 0;
      try {
        for await (const chunk of res.body as AsyncIterable<Uint8Array>) bytes += chunk.length;
      } catch {
        return { status: res.status, ended: false, bytes };
      }
      return { status: res.status, ended: true, bytes };
    };
    for (let i = 1; i <= 2; i++) {
      const r = await pull();
      assert.ok(
        !(r.status === 200 && r.ended),
        `pull ${i}: a whole answer of wrong content: ${JSON.stringify(r)}`,
      );
      assert.equal(
        upstream.gets.filter((g) => g === path).length,
        i,
        'asked the upstream: nothing was cached',
      );
    }
  });

  it('a manifest by digest: 404 MANIFEST_UNKNOWN, and not cached', async () => {
    const digest = sha256('another manifest');
    const path = `/v2/lie/manifest/manifests/${digest}`;
    for (let i = 0; i < 2; i++) {
      const res = await http('GET', `${proxy.url}${path}`, { headers: { Accept: OCI_MANIFEST } });
      assert.equal(res.status, 404, res.text());
      assert.match(res.text(), /MANIFEST_UNKNOWN/);
    }
    assert.equal(upstream.gets.filter((g) => g === path).length, 2, 'asked again: nothing was cached');
  });
});
