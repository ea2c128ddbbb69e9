/**
 * berth.limits: request body sizes (manifests, blobs, the token endpoint's form) answered 413
 * SIZE_INVALID, and concurrent upload requests per client answered 429 TOOMANYREQUESTS.
 */
import assert from 'node:assert/strict';
import { type ClientRequest, request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startRegistry } from '../../../src/registry/index.js';
import {
  errorCodes,
  http,
  OCI_MANIFEST,
  pushBlob,
  pushImage,
  sha256,
  startTestRegistry,
  type TestRegistry,
  tempDir,
} from '../../helpers/registry.js';

/** A PATCH that sends `first` and then waits (the upload stays in flight until `finish`). */
function stalledPatch(url: string, first: Buffer): { req: ClientRequest; answer: Promise<number> } {
  const req = request(url, {
    method: 'PATCH',
    headers: { 'Content-Type': 'application/octet-stream', 'Transfer-Encoding': 'chunked' },
  });
  const answer = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
  req.write(first);
  return { req, answer };
}

async function startUpload(base: string, name: string): Promise<string> {
  const res = await http('POST', `${base}/v2/${name}/blobs/uploads/`);
  assert.equal(res.status, 202, res.text());
  return new URL(res.headers.get('location') ?? '', base).toString();
}

async function uploadSize(location: string): Promise<number> {
  const res = await http('GET', location);
  assert.equal(res.status, 204);
  return Number((res.headers.get('range') ?? '0-0').split('-')[1]) + 1;
}

/** Wait (bounded) until this client holds `n` upload slots of the test registry. */
async function slotsHeld(n: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (reg.app.uploadSlots.held('127.0.0.1') !== n) {
    assert.ok(
      Date.now() < deadline,
      `expected ${n} uploads in flight, ${reg.app.uploadSlots.held('127.0.0.1')}`,
    );
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A chunked body of `size` bytes (a stream: no Content-Length). */
function chunked(size: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= size) {
        controller.close();
        return;
      }
      const n = Math.min(256, size - sent);
      sent += n;
      controller.enqueue(new Uint8Array(n).fill(0x61));
    },
  });
}

let reg: TestRegistry;
before(async () => {
  reg = await startTestRegistry({
    berth: { limits: { manifestsize: 2000, blobsize: 1024, uploadsperclient: 2 } },
  });
});
after(async () => {
  await reg.stop();
});

describe('berth.limits.manifestsize', () => {
  const manifest = (pad: number) =>
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256('{}'), size: 2 },
      layers: [],
      annotations: { pad: 'x'.repeat(pad) },
    });

  it('a manifest over the limit is 413 SIZE_INVALID, with Content-Length or chunked', async () => {
    await pushBlob(reg.url, 'lim/man', '{}');
    const res = await http('PUT', `${reg.url}/v2/lim/man/manifests/big`, {
      body: manifest(2500),
      headers: { 'Content-Type': OCI_MANIFEST },
    });
    assert.equal(res.status, 413);
    assert.deepEqual(errorCodes(res), ['SIZE_INVALID']);
    assert.match(res.text(), /2000 bytes/);
    const body = manifest(2500);
    const stream = await http('PUT', `${reg.url}/v2/lim/man/manifests/big`, {
      body: new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(body));
          c.close();
        },
      }),
      headers: { 'Content-Type': OCI_MANIFEST },
    });
    assert.equal(stream.status, 413);
    assert.deepEqual(errorCodes(stream), ['SIZE_INVALID']);
  });

  it('one under the limit is stored', async () => {
    await pushBlob(reg.url, 'lim/man', '{}');
    const res = await http('PUT', `${reg.url}/v2/lim/man/manifests/small`, {
      body: manifest(1500),
      headers: { 'Content-Type': OCI_MANIFEST },
    });
    assert.equal(res.status, 201, res.text());
  });
});

describe('berth.limits.blobsize', () => {
  it('a monolithic upload over the limit is 413 SIZE_INVALID; one at the limit is stored', async () => {
    const big = Buffer.alloc(1025, 1);
    const start = await startUpload(reg.url, 'lim/blob');
    const url = new URL(start);
    url.searchParams.set('digest', sha256(big));
    const res = await http('PUT', url.toString(), { body: big });
    assert.equal(res.status, 413);
    assert.deepEqual(errorCodes(res), ['SIZE_INVALID']);
    const post = await http('POST', `${reg.url}/v2/lim/blob/blobs/uploads/?digest=${sha256(big)}`, {
      body: big,
    });
    assert.equal(post.status, 413);
    await pushBlob(reg.url, 'lim/blob', Buffer.alloc(1024, 2));
  });

  it('chunks count together: the chunk that would pass the limit is 413, the upload keeps what it had', async () => {
    const location = await startUpload(reg.url, 'lim/blob');
    const first = await http('PATCH', location, {
      body: Buffer.alloc(1000, 3),
      headers: { 'Content-Range': '0-999', 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(first.status, 202);
    const next = new URL(first.headers.get('location') ?? '', reg.url).toString();
    const over = await http('PATCH', next, {
      body: Buffer.alloc(100, 3),
      headers: { 'Content-Range': '1000-1099' },
    });
    assert.equal(over.status, 413);
    assert.deepEqual(errorCodes(over), ['SIZE_INVALID']);
    assert.equal(await uploadSize(next), 1000);
    // A streamed (chunked) body is cut where it passes the limit.
    const streamed = await http('PATCH', next, { body: chunked(4096) });
    assert.equal(streamed.status, 413);
    assert.ok((await uploadSize(next)) <= 1024);
    // What is there can still be completed.
    const size = await uploadSize(next);
    const done = new URL(next);
    done.searchParams.set(
      'digest',
      sha256(Buffer.concat([Buffer.alloc(1000, 3), Buffer.alloc(size - 1000, 0x61)])),
    );
    assert.equal((await http('PUT', done.toString())).status, 201);
  });
});

describe('berth.limits.uploadsperclient', () => {
  it('a third upload request in flight from one client is 429 TOOMANYREQUESTS; slots free when one ends', async () => {
    const a = await startUpload(reg.url, 'lim/conc');
    const b = await startUpload(reg.url, 'lim/conc');
    const c = await startUpload(reg.url, 'lim/conc');
    const one = stalledPatch(a, Buffer.alloc(10, 1));
    const two = stalledPatch(b, Buffer.alloc(10, 2));
    // Both are being received before the third comes.
    await slotsHeld(2);
    const third = await http('PATCH', c, { body: Buffer.alloc(10, 3) });
    assert.equal(third.status, 429);
    assert.deepEqual(errorCodes(third), ['TOOMANYREQUESTS']);
    assert.equal(third.headers.get('retry-after'), '1');
    // Requests without a body (status, start) are not uploads in flight.
    assert.equal((await http('GET', c)).status, 204);
    await startUpload(reg.url, 'lim/conc');
    one.req.end();
    assert.equal(await one.answer, 202);
    const again = await http('PATCH', c, { body: Buffer.alloc(10, 3) });
    assert.equal(again.status, 202, again.text());
    two.req.end();
    assert.equal(await two.answer, 202);
  });

  it('a client that goes away frees its slot', async () => {
    const a = await startUpload(reg.url, 'lim/gone');
    const b = await startUpload(reg.url, 'lim/gone');
    const gone = [stalledPatch(a, Buffer.alloc(5)), stalledPatch(b, Buffer.alloc(5))];
    for (const g of gone) g.answer.catch(() => {});
    await slotsHeld(2);
    for (const g of gone) g.req.destroy();
    await slotsHeld(0);
    const c = await startUpload(reg.url, 'lim/gone');
    assert.equal((await http('PATCH', c, { body: Buffer.alloc(5) })).status, 202);
  });

  it('the defaults: 4 MiB manifests, no blob limit, 32 uploads per client', async () => {
    const plain = await startTestRegistry();
    try {
      assert.deepEqual(plain.config.berth.limits, {
        manifestsize: 4 * 1024 * 1024,
        blobsize: 0,
        formsize: 64 * 1024,
        uploadsperclient: 32,
      });
      await pushImage(plain.url, 'lim/default', 'v1', { layer: Buffer.alloc(8 * 1024, 1) });
    } finally {
      await plain.stop();
    }
  });
});

describe('berth.limits.formsize', () => {
  it("the token endpoint's form over the limit is 413", async () => {
    const dir = await tempDir('berth-formsize-');
    const running = await startRegistry({
      log: { level: 'error', accesslog: { disabled: true } },
      http: { addr: '127.0.0.1:0' },
      storage: { filesystem: { rootdirectory: dir } },
      berth: { tokenserver: { enabled: true }, limits: { formsize: 100 } },
    });
    try {
      const post = (body: string) =>
        http('POST', `${running.url}/auth/token`, {
          body,
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        });
      const big = await post(`grant_type=password&service=x&pad=${'y'.repeat(200)}`);
      assert.equal(big.status, 413);
      const small = await post('grant_type=password&service=x&username=nobody&password=no');
      assert.notEqual(small.status, 413);
    } finally {
      await running.close();
    }
  });
});
