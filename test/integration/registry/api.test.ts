import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  ALL_MANIFEST_TYPES,
  errorCodes,
  http,
  OCI_MANIFEST,
  pushBlob,
  pushImage,
  pushManifest,
  rawHttp,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';

let reg: TestRegistry;
let base: string;

before(async () => {
  reg = await startTestRegistry();
  base = reg.url;
});
after(async () => {
  await reg.stop();
});

function apiVersion(res: { headers: Headers }): void {
  assert.equal(res.headers.get('docker-distribution-api-version'), 'registry/2.0');
}

describe('GET /v2/', () => {
  it('answers 200 {} with the API version header', async () => {
    const res = await http('GET', `${base}/v2/`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), {});
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    apiVersion(res);
  });
  it('also without the trailing slash and for HEAD', async () => {
    assert.equal((await http('GET', `${base}/v2`)).status, 200);
    const head = await http('HEAD', `${base}/v2/`);
    assert.equal(head.status, 200);
    apiVersion(head);
  });
  it('unknown endpoints are 404 with a JSON error, still with the API version header', async () => {
    const res = await http('GET', `${base}/v3/`);
    assert.equal(res.status, 404);
    apiVersion(res);
    assert.ok(errorCodes(res).length === 1);
  });
  it('an absolute-form request target is routed by its path, as the reference registry does', async () => {
    const host = new URL(base).host;
    const get = (target: string) =>
      rawHttp(base, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    const root = await get(`http://${host}/v2/`);
    assert.equal(root.status, 200, root.text);
    assert.match(root.text, /\r\n\r\n\{\}$/);
    assert.match(root.text, /docker-distribution-api-version: registry\/2.0/i);
    const { layer } = await pushImage(base, 'absolute/form', 'v1', { layer: 'absolute-form blob' });
    const blob = await get(`http://${host}/v2/absolute/form/blobs/${layer}`);
    assert.equal(blob.status, 200, blob.text);
    assert.match(blob.text, /absolute-form blob$/);
    // The query and any authority (the path is what is routed) and https.
    const catalog = await get('http://registry.example:1234/v2/_catalog?n=1');
    assert.equal(catalog.status, 200, catalog.text);
    assert.match(catalog.text, /"repositories":\[".+"\]/);
    assert.equal((await get(`https://${host}/v2`)).status, 200);
    const unknown = await get(`http://${host}/v2/absolute/form/nothing-here`);
    assert.equal(unknown.status, 404);
    assert.match(unknown.text, /NAME_UNKNOWN/);
  });
  it('a method the endpoint does not serve is 405 UNSUPPORTED', async () => {
    const res = await http('POST', `${base}/v2/`);
    assert.equal(res.status, 405);
    assert.deepEqual(errorCodes(res), ['UNSUPPORTED']);
  });
  it('CONNECT is answered as any method the endpoint does not serve (node would close the connection)', async () => {
    const host = new URL(base).host;
    const connect = (target: string) =>
      rawHttp(base, `CONNECT ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    const v2 = await connect('/v2/');
    assert.equal(v2.status, 405, v2.text);
    assert.match(v2.text, /UNSUPPORTED/);
    assert.equal((await connect('example.com:443')).status, 404);
    assert.equal((await http('GET', `${base}/v2/`)).status, 200);
  });
});

describe('blobs', () => {
  const data = Buffer.from('0123456789abcdefghij');
  let digest: string;
  before(async () => {
    digest = await pushBlob(base, 'blobs/repo', data);
  });

  it('GET answers the blob with digest, ETag, caching and range headers', async () => {
    const res = await http('GET', `${base}/v2/blobs/repo/blobs/${digest}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, data);
    assert.equal(res.headers.get('docker-content-digest'), digest);
    assert.equal(res.headers.get('content-length'), String(data.length));
    assert.equal(res.headers.get('etag'), `"${digest}"`);
    assert.equal(res.headers.get('accept-ranges'), 'bytes');
    assert.match(res.headers.get('cache-control') ?? '', /max-age=\d+/);
    assert.ok(res.headers.get('last-modified'));
    apiVersion(res);
  });
  it('GET with Range answers 206 with Content-Range', async () => {
    const res = await http('GET', `${base}/v2/blobs/repo/blobs/${digest}`, {
      headers: { Range: 'bytes=5-9' },
    });
    assert.equal(res.status, 206);
    assert.equal(res.text(), '56789');
    assert.equal(res.headers.get('content-range'), `bytes 5-9/${data.length}`);
    const open = await http('GET', `${base}/v2/blobs/repo/blobs/${digest}`, {
      headers: { Range: 'bytes=15-' },
    });
    assert.equal(open.status, 206);
    assert.equal(open.text(), 'fghij');
    const suffix = await http('GET', `${base}/v2/blobs/repo/blobs/${digest}`, {
      headers: { Range: 'bytes=-3' },
    });
    assert.equal(suffix.text(), 'hij');
  });
  it('GET with an unsatisfiable Range answers 416', async () => {
    const res = await http('GET', `${base}/v2/blobs/repo/blobs/${digest}`, {
      headers: { Range: 'bytes=100-200' },
    });
    assert.equal(res.status, 416);
    assert.equal(res.headers.get('content-range'), `bytes */${data.length}`);
  });
  it('If-None-Match with the ETag answers 304', async () => {
    const res = await http('GET', `${base}/v2/blobs/repo/blobs/${digest}`, {
      headers: { 'If-None-Match': `"${digest}"` },
    });
    assert.equal(res.status, 304);
    assert.equal(res.body.length, 0);
  });
  it('HEAD answers 200 with Content-Length and Docker-Content-Digest, no body', async () => {
    const res = await http('HEAD', `${base}/v2/blobs/repo/blobs/${digest}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), String(data.length));
    assert.equal(res.headers.get('docker-content-digest'), digest);
    assert.equal(res.body.length, 0);
  });
  it('unknown blobs are 404 BLOB_UNKNOWN (GET) and 404 without body (HEAD)', async () => {
    const other = sha256('nope');
    const get = await http('GET', `${base}/v2/blobs/repo/blobs/${other}`);
    assert.equal(get.status, 404);
    assert.deepEqual(errorCodes(get), ['BLOB_UNKNOWN']);
    assert.deepEqual((get.json() as { errors: Array<{ detail: unknown }> }).errors[0]?.detail, {
      digest: other,
    });
    const head = await http('HEAD', `${base}/v2/blobs/repo/blobs/${other}`);
    assert.equal(head.status, 404);
    assert.equal(head.body.length, 0);
  });
  it('a blob of another repository is not visible here', async () => {
    const res = await http('HEAD', `${base}/v2/other/repo/blobs/${digest}`);
    assert.equal(res.status, 404);
  });
  it('malformed digests are 400 DIGEST_INVALID, never 500', async () => {
    for (const bad of [
      'sha256:abc',
      'sha256:zzz',
      'md5:d41d8cd98f00b204e9800998ecf8427e',
      'nocolon',
      'SHA256:AB',
      'sha256:',
    ]) {
      const res = await http('GET', `${base}/v2/blobs/repo/blobs/${bad}`);
      assert.equal(res.status, 400, bad);
      assert.deepEqual(errorCodes(res), ['DIGEST_INVALID'], bad);
    }
  });
  it('DELETE answers 202, then the blob is gone (404) and a second DELETE is 404', async () => {
    const d = await pushBlob(base, 'blobs/del', 'to be deleted');
    const del = await http('DELETE', `${base}/v2/blobs/del/blobs/${d}`);
    assert.equal(del.status, 202);
    assert.equal(del.headers.get('docker-content-digest'), d);
    assert.equal((await http('HEAD', `${base}/v2/blobs/del/blobs/${d}`)).status, 404);
    const again = await http('DELETE', `${base}/v2/blobs/del/blobs/${d}`);
    assert.equal(again.status, 404);
    assert.deepEqual(errorCodes(again), ['BLOB_UNKNOWN']);
  });
});

describe('deleting a blob referenced by a manifest', () => {
  it('leaves the manifest, but the image can no longer be pulled whole', async () => {
    const img = await pushImage(base, 'blobs/image', 'v1');
    assert.equal((await http('DELETE', `${base}/v2/blobs/image/blobs/${img.layer}`)).status, 202);
    const man = await http('GET', `${base}/v2/blobs/image/manifests/v1`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(man.status, 200);
    assert.equal((await http('GET', `${base}/v2/blobs/image/blobs/${img.layer}`)).status, 404);
    assert.equal((await http('GET', `${base}/v2/blobs/image/blobs/${img.config}`)).status, 200);
  });
});

describe('Location URLs', () => {
  it('are absolute from Host, honour X-Forwarded-Proto/Host, and relative with http.relativeurls', async () => {
    const res = await http('POST', `${base}/v2/loc/blobs/uploads/`, {
      headers: { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'registry.example' },
    });
    assert.match(
      res.headers.get('location') ?? '',
      /^https:\/\/registry\.example\/v2\/loc\/blobs\/uploads\//,
    );
    const rel = await startTestRegistry({ http: { relativeurls: true } });
    try {
      const r = await http('POST', `${rel.url}/v2/loc/blobs/uploads/`);
      assert.match(r.headers.get('location') ?? '', /^\/v2\/loc\/blobs\/uploads\/[0-9a-f-]+$/);
    } finally {
      await rel.stop();
    }
  });
});

describe('uploads', () => {
  it('POST starts an upload: 202 with Location, Range 0-0, Content-Length 0, Docker-Upload-UUID', async () => {
    const res = await http('POST', `${base}/v2/up/one/blobs/uploads/`);
    assert.equal(res.status, 202);
    const uuid = res.headers.get('docker-upload-uuid') ?? '';
    assert.ok(uuid.length > 0);
    assert.equal(res.headers.get('location'), `${base}/v2/up/one/blobs/uploads/${uuid}`);
    assert.equal(res.headers.get('range'), '0-0');
    assert.equal(res.headers.get('content-length'), '0');
  });
  it('GET on the upload URL answers 204 with Location, Range and the id', async () => {
    const start = await http('POST', `${base}/v2/up/one/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    await http('PATCH', loc, { body: 'hello', headers: { 'Content-Type': 'application/octet-stream' } });
    const res = await http('GET', loc);
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('range'), '0-4');
    assert.equal(res.headers.get('location'), loc);
    assert.equal(res.headers.get('docker-upload-uuid'), start.headers.get('docker-upload-uuid'));
  });
  it('chunked upload: PATCH with Content-Range in order (202), then PUT with digest (201)', async () => {
    const start = await http('POST', `${base}/v2/up/chunked/blobs/uploads/`);
    let loc = start.headers.get('location') ?? '';
    const p1 = await http('PATCH', loc, {
      body: 'abcde',
      headers: { 'Content-Range': '0-4', 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(p1.status, 202);
    assert.equal(p1.headers.get('range'), '0-4');
    assert.equal(p1.headers.get('content-length'), '0');
    assert.ok(p1.headers.get('docker-upload-uuid'));
    loc = p1.headers.get('location') ?? loc;
    const p2 = await http('PATCH', loc, { body: 'fghij', headers: { 'Content-Range': '5-9' } });
    assert.equal(p2.status, 202);
    assert.equal(p2.headers.get('range'), '0-9');
    const digest = sha256('abcdefghij');
    const put = await http('PUT', `${p2.headers.get('location')}?digest=${digest}`);
    assert.equal(put.status, 201);
    assert.equal(put.headers.get('location'), `${base}/v2/up/chunked/blobs/${digest}`);
    assert.equal(put.headers.get('docker-content-digest'), digest);
    assert.equal(put.headers.get('content-length'), '0');
    assert.equal((await http('GET', `${base}/v2/up/chunked/blobs/${digest}`)).text(), 'abcdefghij');
    // The upload is complete: its URL is gone.
    assert.equal((await http('GET', loc)).status, 404);
  });
  it('an out-of-order or malformed chunk answers 416 with the last valid Range', async () => {
    const start = await http('POST', `${base}/v2/up/order/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    await http('PATCH', loc, { body: 'abc', headers: { 'Content-Range': '0-2' } });
    for (const range of ['5-7', '0-2', 'garbage', '4-3']) {
      const res = await http('PATCH', loc, { body: 'xyz', headers: { 'Content-Range': range } });
      assert.equal(res.status, 416, range);
      assert.equal(res.headers.get('range'), '0-2', range);
      assert.equal(res.headers.get('location'), loc);
      assert.equal(res.headers.get('content-length'), '0');
      assert.ok(res.headers.get('docker-upload-uuid'));
    }
    // A Content-Range that disagrees with Content-Length is not acceptable either.
    const mismatch = await http('PATCH', loc, { body: 'xyz', headers: { 'Content-Range': '3-9' } });
    assert.equal(mismatch.status, 416);
    // The client resumes from the Range it was given.
    const ok = await http('PATCH', loc, { body: 'def', headers: { 'Content-Range': '3-5' } });
    assert.equal(ok.status, 202);
    assert.equal(ok.headers.get('range'), '0-5');
  });
  it('streaming PATCH without Content-Range (chunked transfer encoding) appends', async () => {
    const start = await http('POST', `${base}/v2/up/stream/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    const parts = ['stream', 'ed ', 'data'];
    const body = new ReadableStream({
      pull(controller) {
        const next = parts.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(new TextEncoder().encode(next));
      },
    });
    const res = await http('PATCH', loc, { body });
    assert.equal(res.status, 202);
    assert.equal(res.headers.get('range'), `0-${'streamed data'.length - 1}`);
    const digest = sha256('streamed data');
    assert.equal((await http('PUT', `${loc}?digest=${digest}`)).status, 201);
  });
  it('monolithic: POST then PUT with the whole body', async () => {
    const digest = await pushBlob(base, 'up/mono', 'monolithic');
    assert.equal((await http('HEAD', `${base}/v2/up/mono/blobs/${digest}`)).status, 200);
  });
  it('single-request monolithic: POST ?digest= with the body answers 201', async () => {
    const digest = sha256('one request');
    const res = await http('POST', `${base}/v2/up/single/blobs/uploads/?digest=${digest}`, {
      body: 'one request',
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('docker-content-digest'), digest);
    assert.equal(res.headers.get('location'), `${base}/v2/up/single/blobs/${digest}`);
  });
  it('PUT with the final chunk and Content-Range completes', async () => {
    const start = await http('POST', `${base}/v2/up/final/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    await http('PATCH', loc, { body: 'first', headers: { 'Content-Range': '0-4' } });
    const digest = sha256('firstlast');
    const put = await http('PUT', `${loc}?digest=${digest}`, {
      body: 'last',
      headers: { 'Content-Range': '5-8' },
    });
    assert.equal(put.status, 201);
  });
  it('PUT with several digest parameters verifies all of them', async () => {
    const start = await http('POST', `${base}/v2/up/multi/blobs/uploads/`);
    const loc = new URL(start.headers.get('location') ?? '');
    const { createHash } = await import('node:crypto');
    const s512 = `sha512:${createHash('sha512').update('multi').digest('hex')}`;
    loc.searchParams.append('digest', sha256('multi'));
    loc.searchParams.append('digest', s512);
    const put = await http('PUT', loc.toString(), { body: 'multi' });
    assert.equal(put.status, 201);
    assert.equal(put.headers.get('docker-content-digest'), sha256('multi'));
    assert.equal((await http('GET', `${base}/v2/up/multi/blobs/${s512}`)).text(), 'multi');
  });
  it('a digest that does not match answers 400 DIGEST_INVALID and fails the upload', async () => {
    const start = await http('POST', `${base}/v2/up/bad/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    const put = await http('PUT', `${loc}?digest=${sha256('something else')}`, { body: 'content' });
    assert.equal(put.status, 400);
    assert.deepEqual(errorCodes(put), ['DIGEST_INVALID']);
    assert.equal((await http('GET', loc)).status, 404);
  });
  it('PUT without digest is 400 DIGEST_INVALID and the upload is not complete', async () => {
    const start = await http('POST', `${base}/v2/up/nodigest/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    const put = await http('PUT', loc, { body: 'x' });
    assert.equal(put.status, 400);
    assert.deepEqual(errorCodes(put), ['DIGEST_INVALID']);
    assert.equal((await http('HEAD', `${base}/v2/up/nodigest/blobs/${sha256('x')}`)).status, 404);
  });
  it('a malformed digest parameter is 400 DIGEST_INVALID', async () => {
    const start = await http('POST', `${base}/v2/up/baddigest/blobs/uploads/`);
    const put = await http('PUT', `${start.headers.get('location')}?digest=sha256:nothex`, { body: 'x' });
    assert.equal(put.status, 400);
    assert.deepEqual(errorCodes(put), ['DIGEST_INVALID']);
  });
  it('DELETE cancels (204); the id is then unknown (404 BLOB_UPLOAD_UNKNOWN)', async () => {
    const start = await http('POST', `${base}/v2/up/cancel/blobs/uploads/`);
    const loc = start.headers.get('location') ?? '';
    assert.equal((await http('DELETE', loc)).status, 204);
    for (const method of ['GET', 'PATCH', 'PUT', 'DELETE']) {
      const res = await http(method, method === 'PUT' ? `${loc}?digest=${sha256('')}` : loc, {
        body: method === 'PATCH' ? 'x' : undefined,
      });
      assert.equal(res.status, 404, method);
      assert.deepEqual(errorCodes(res), ['BLOB_UPLOAD_UNKNOWN'], method);
    }
  });
  it('unknown and malformed upload ids are 404 BLOB_UPLOAD_UNKNOWN', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'a..b', 'a.b']) {
      const res = await http('GET', `${base}/v2/up/one/blobs/uploads/${id}`);
      assert.equal(res.status, 404, id);
      assert.deepEqual(errorCodes(res), ['BLOB_UPLOAD_UNKNOWN'], id);
    }
  });
  it('an upload of one repository cannot be continued through another', async () => {
    const start = await http('POST', `${base}/v2/up/a/blobs/uploads/`);
    const id = start.headers.get('docker-upload-uuid');
    assert.equal((await http('GET', `${base}/v2/up/b/blobs/uploads/${id}`)).status, 404);
  });
});

describe('cross-repository mount', () => {
  it('mounts a blob of another repository: 201 with Location and Docker-Content-Digest', async () => {
    const digest = await pushBlob(base, 'mount/src', 'mount me');
    const res = await http('POST', `${base}/v2/mount/dst/blobs/uploads/?mount=${digest}&from=mount/src`);
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('location'), `${base}/v2/mount/dst/blobs/${digest}`);
    assert.equal(res.headers.get('docker-content-digest'), digest);
    assert.equal(res.headers.get('content-length'), '0');
    assert.equal((await http('GET', `${base}/v2/mount/dst/blobs/${digest}`)).text(), 'mount me');
  });
  it('falls back to a 202 upload start when the source or digest is not there or invalid', async () => {
    const digest = await pushBlob(base, 'mount/src2', 'mount source');
    for (const q of [
      `mount=${sha256('absent')}&from=mount/src2`,
      `mount=${digest}&from=mount/absent`,
      `mount=sha256:bad&from=mount/src2`,
      `mount=${digest}&from=Bad_Name`,
    ]) {
      const res = await http('POST', `${base}/v2/mount/dst2/blobs/uploads/?${q}`);
      assert.equal(res.status, 202, q);
      assert.ok(res.headers.get('docker-upload-uuid'), q);
      assert.equal(res.headers.get('range'), '0-0');
    }
  });
});

describe('manifests', () => {
  it('PUT answers 201 with Location and Docker-Content-Digest; GET and HEAD serve it', async () => {
    const img = await pushImage(base, 'man/basic', 'v1');
    const get = await http('GET', `${base}/v2/man/basic/manifests/v1`, { headers: { Accept: OCI_MANIFEST } });
    assert.equal(get.status, 200);
    assert.equal(get.text(), img.body);
    assert.equal(get.headers.get('content-type'), OCI_MANIFEST);
    assert.equal(get.headers.get('docker-content-digest'), img.digest);
    const head = await http('HEAD', `${base}/v2/man/basic/manifests/${img.digest}`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(img.body)));
    assert.equal(head.headers.get('docker-content-digest'), img.digest);
    assert.equal(head.body.length, 0);
    const put = await pushManifest(base, 'man/basic', 'v2', img.body, OCI_MANIFEST);
    assert.equal(put.status, 201);
    assert.equal(put.headers.get('location'), `${base}/v2/man/basic/manifests/${img.digest}`);
    assert.equal(put.headers.get('docker-content-digest'), img.digest);
  });
  it('unknown manifests are 404 MANIFEST_UNKNOWN (GET) and 404 (HEAD)', async () => {
    const get = await http('GET', `${base}/v2/man/basic/manifests/nope`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(get.status, 404);
    assert.deepEqual(errorCodes(get), ['MANIFEST_UNKNOWN']);
    const head = await http('HEAD', `${base}/v2/man/basic/manifests/${sha256('x')}`);
    assert.equal(head.status, 404);
  });
  it('PUT referencing unknown blobs answers 400 with one BLOB_UNKNOWN per missing blob', async () => {
    const config = await pushBlob(base, 'man/missing', '{}');
    const l1 = sha256('missing layer 1');
    const l2 = sha256('missing layer 2');
    const manifest = {
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: config, size: 2 },
      layers: [
        { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: l1, size: 1 },
        { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: l2, size: 1 },
      ],
    };
    const res = await pushManifest(base, 'man/missing', 'v1', manifest, OCI_MANIFEST);
    assert.equal(res.status, 400);
    const errors = (res.json() as { errors: Array<{ code: string; detail: { digest: string } }> }).errors;
    assert.deepEqual(
      errors.map((e) => [e.code, e.detail.digest]),
      [
        ['BLOB_UNKNOWN', l1],
        ['BLOB_UNKNOWN', l2],
      ],
    );
  });
  it('PUT by digest must match the content (DIGEST_INVALID)', async () => {
    const img = await pushImage(base, 'man/bydigest', 'v1');
    const ok = await pushManifest(base, 'man/bydigest', img.digest, img.body, OCI_MANIFEST);
    assert.equal(ok.status, 201);
    const bad = await pushManifest(base, 'man/bydigest', sha256('other'), img.body, OCI_MANIFEST);
    assert.equal(bad.status, 400);
    assert.deepEqual(errorCodes(bad), ['DIGEST_INVALID']);
  });
  it('invalid manifests are 400 MANIFEST_INVALID', async () => {
    for (const body of [
      'not json',
      '[]',
      '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}',
    ]) {
      const res = await pushManifest(base, 'man/invalid', 'v1', body, OCI_MANIFEST);
      assert.equal(res.status, 400, body);
      assert.deepEqual(errorCodes(res), ['MANIFEST_INVALID'], body);
    }
  });
  it('a manifest over 4 MiB is refused with 413', async () => {
    const big = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      pad: 'x'.repeat(4 * 1024 * 1024),
    });
    const res = await pushManifest(base, 'man/big', 'v1', big, OCI_MANIFEST);
    assert.equal(res.status, 413);
    assert.deepEqual(errorCodes(res), ['SIZE_INVALID']);
  });
  it('DELETE by digest answers 202, removes the tags pointing at it, then 404', async () => {
    const img = await pushImage(base, 'man/del', 'v1');
    await pushManifest(base, 'man/del', 'v2', img.body, OCI_MANIFEST);
    const del = await http('DELETE', `${base}/v2/man/del/manifests/${img.digest}`);
    assert.equal(del.status, 202);
    const get = await http('GET', `${base}/v2/man/del/manifests/${img.digest}`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(get.status, 404);
    assert.equal(
      (await http('GET', `${base}/v2/man/del/manifests/v1`, { headers: { Accept: OCI_MANIFEST } })).status,
      404,
    );
    const tags = await http('GET', `${base}/v2/man/del/tags/list`);
    assert.deepEqual((tags.json() as { tags: string[] }).tags, []);
    const again = await http('DELETE', `${base}/v2/man/del/manifests/${img.digest}`);
    assert.equal(again.status, 404);
    assert.deepEqual(errorCodes(again), ['MANIFEST_UNKNOWN']);
  });
  it('DELETE by tag fails with 405 UNSUPPORTED', async () => {
    await pushImage(base, 'man/deltag', 'v1');
    const res = await http('DELETE', `${base}/v2/man/deltag/manifests/v1`);
    assert.equal(res.status, 405);
    assert.deepEqual(errorCodes(res), ['UNSUPPORTED']);
    assert.equal(
      (await http('HEAD', `${base}/v2/man/deltag/manifests/v1`, { headers: { Accept: OCI_MANIFEST } }))
        .status,
      200,
    );
  });
  it('invalid tags are 400 TAG_INVALID on PUT, 404 MANIFEST_UNKNOWN on GET (no such manifest)', async () => {
    for (const tag of ['.dot', '-dash', 'a'.repeat(129), 'bad!tag']) {
      const res = await http('PUT', `${base}/v2/man/basic/manifests/${encodeURIComponent(tag)}`, {
        body: '{}',
        headers: { 'Content-Type': OCI_MANIFEST },
      });
      assert.equal(res.status, 400, tag);
      assert.deepEqual(errorCodes(res), ['TAG_INVALID'], tag);
      const get = await http('GET', `${base}/v2/man/basic/manifests/${encodeURIComponent(tag)}`);
      assert.equal(get.status, 404, tag);
      assert.deepEqual(errorCodes(get), ['MANIFEST_UNKNOWN'], tag);
    }
  });
});

describe('names', () => {
  it('invalid repository names are 400 NAME_INVALID', async () => {
    for (const name of [
      'Upper/case',
      'a//b',
      'a/-b',
      'trailing-/x',
      `${'a'.repeat(250)}/${'b'.repeat(10)}`,
    ]) {
      const res = await http('GET', `${base}/v2/${name}/tags/list`);
      assert.equal(res.status, 400, name);
      assert.deepEqual(errorCodes(res), ['NAME_INVALID'], name);
    }
  });
  it('single-character and single-component names are fine', async () => {
    await pushImage(base, 'x', 'v1');
    await pushImage(base, 'a/b/c', 'v1');
    assert.equal((await http('GET', `${base}/v2/x/tags/list`)).status, 200);
    assert.equal((await http('GET', `${base}/v2/a/b/c/tags/list`)).status, 200);
  });
  it('a 255-character name is accepted, 256 is not', async () => {
    const ok = `${'a'.repeat(127)}/${'b'.repeat(127)}`;
    assert.equal(ok.length, 255);
    assert.equal((await http('POST', `${base}/v2/${ok}/blobs/uploads/`)).status, 202);
    const tooLong = `${ok}c`;
    assert.equal((await http('POST', `${base}/v2/${tooLong}/blobs/uploads/`)).status, 400);
  });
});

describe('tags list and catalog', () => {
  before(async () => {
    const img = await pushImage(base, 'pages/repo', 'b');
    for (const tag of ['a', 'c', 'B', 'a-1', '0']) {
      assert.equal((await pushManifest(base, 'pages/repo', tag, img.body, OCI_MANIFEST)).status, 201);
    }
  });
  it('tags are lexically sorted', async () => {
    const res = await http('GET', `${base}/v2/pages/repo/tags/list`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { name: 'pages/repo', tags: ['0', 'B', 'a', 'a-1', 'b', 'c'] });
    assert.equal(res.headers.get('link'), null);
  });
  it('n and last paginate with an RFC 5988 Link header', async () => {
    const p1 = await http('GET', `${base}/v2/pages/repo/tags/list?n=2`);
    assert.deepEqual((p1.json() as { tags: string[] }).tags, ['0', 'B']);
    assert.equal(p1.headers.get('link'), '</v2/pages/repo/tags/list?last=B&n=2>; rel="next"');
    const p2 = await http('GET', `${base}/v2/pages/repo/tags/list?last=B&n=2`);
    assert.deepEqual((p2.json() as { tags: string[] }).tags, ['a', 'a-1']);
    const p3 = await http('GET', `${base}/v2/pages/repo/tags/list?last=a-1&n=2`);
    assert.deepEqual((p3.json() as { tags: string[] }).tags, ['b', 'c']);
    assert.equal(p3.headers.get('link'), null);
    const tail = await http('GET', `${base}/v2/pages/repo/tags/list?last=b`);
    assert.deepEqual((tail.json() as { tags: string[] }).tags, ['c']);
  });
  it('bad n is 400 PAGINATION_NUMBER_INVALID', async () => {
    for (const n of ['-1', 'abc', '1.5']) {
      const res = await http('GET', `${base}/v2/pages/repo/tags/list?n=${n}`);
      assert.equal(res.status, 400, n);
      assert.deepEqual(errorCodes(res), ['PAGINATION_NUMBER_INVALID'], n);
    }
  });
  it('tags of an unknown repository are 404 NAME_UNKNOWN', async () => {
    const res = await http('GET', `${base}/v2/pages/unknown/tags/list`);
    assert.equal(res.status, 404);
    assert.deepEqual(errorCodes(res), ['NAME_UNKNOWN']);
  });
  it('the catalog lists repositories sorted and paginates', async () => {
    const all = await http('GET', `${base}/v2/_catalog`);
    assert.equal(all.status, 200);
    const repos = (all.json() as { repositories: string[] }).repositories;
    assert.ok(repos.includes('pages/repo'));
    assert.deepEqual(repos, [...repos].sort());
    const p1 = await http('GET', `${base}/v2/_catalog?n=1`);
    const first = (p1.json() as { repositories: string[] }).repositories;
    assert.deepEqual(first, [repos[0]]);
    assert.equal(
      p1.headers.get('link'),
      `</v2/_catalog?last=${encodeURIComponent(repos[0] ?? '')}&n=1>; rel="next"`,
    );
    const p2 = await http('GET', `${base}/v2/_catalog?n=1&last=${repos[0]}`);
    assert.deepEqual((p2.json() as { repositories: string[] }).repositories, [repos[1]]);
    const bad = await http('GET', `${base}/v2/_catalog?n=-5`);
    assert.deepEqual(errorCodes(bad), ['PAGINATION_NUMBER_INVALID']);
  });
});

describe('server page limit', () => {
  it('limits pages to berth.pagination.maxentries and sets Link', async () => {
    const small = await startTestRegistry({ berth: { pagination: { maxentries: 2 } } });
    try {
      const img = await pushImage(small.url, 'lim', 't1');
      await pushManifest(small.url, 'lim', 't2', img.body, OCI_MANIFEST);
      await pushManifest(small.url, 'lim', 't3', img.body, OCI_MANIFEST);
      const res = await http('GET', `${small.url}/v2/lim/tags/list`);
      assert.deepEqual((res.json() as { tags: string[] }).tags, ['t1', 't2']);
      assert.equal(res.headers.get('link'), '</v2/lim/tags/list?last=t2&n=2>; rel="next"');
      const big = await http('GET', `${small.url}/v2/lim/tags/list?n=50`);
      assert.deepEqual((big.json() as { tags: string[] }).tags, ['t1', 't2']);
      assert.ok(big.headers.get('link'));
    } finally {
      await small.stop();
    }
  });
});

describe('deletion disabled', () => {
  it('blob and manifest DELETE answer 405 UNSUPPORTED', async () => {
    const r = await startTestRegistry({ storage: { delete: { enabled: false } } });
    try {
      const img = await pushImage(r.url, 'nodel', 'v1');
      for (const path of [`blobs/${img.layer}`, `manifests/${img.digest}`]) {
        const res = await http('DELETE', `${r.url}/v2/nodel/${path}`);
        assert.equal(res.status, 405, path);
        assert.deepEqual(errorCodes(res), ['UNSUPPORTED']);
      }
      assert.equal((await http('HEAD', `${r.url}/v2/nodel/blobs/${img.layer}`)).status, 200);
    } finally {
      await r.stop();
    }
  });
});
