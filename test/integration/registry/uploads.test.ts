import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  errorCodes,
  http,
  OCI_MANIFEST,
  pushImage,
  sha256,
  startTestRegistry,
  tempDir,
} from '../../helpers/registry.js';

const V2 = 'docker/registry/v2';

describe('upload state lives in storage', () => {
  it('a chunked upload survives a registry restart and resumes from the last Range', async () => {
    const root = await tempDir();
    const data = randomBytes(3 * 1024 * 1024 + 17);
    const digest = sha256(data);
    let reg = await startTestRegistry({}, {}, root);
    const start = await http('POST', `${reg.url}/v2/resume/me/blobs/uploads/`);
    const id = start.headers.get('docker-upload-uuid') ?? '';
    const path = new URL(start.headers.get('location') ?? '').pathname;
    const first = data.subarray(0, 2 * 1024 * 1024);
    const p1 = await http('PATCH', `${reg.url}${path}`, {
      body: first,
      headers: { 'Content-Range': `0-${first.length - 1}` },
    });
    assert.equal(p1.status, 202);
    // The state is on disk, in the reference layout.
    const uploadDir = join(root, V2, 'repositories/resume/me/_uploads', id);
    assert.equal((await stat(join(uploadDir, 'data'))).size, first.length);
    assert.match(await readFile(join(uploadDir, 'startedat'), 'utf8'), /^\d{4}-\d\d-\d\dT/);
    await reg.stop(true);

    reg = await startTestRegistry({}, {}, root);
    try {
      const status = await http('GET', `${reg.url}${path}`);
      assert.equal(status.status, 204);
      assert.equal(status.headers.get('range'), `0-${first.length - 1}`);
      const rest = data.subarray(first.length);
      const p2 = await http('PATCH', `${reg.url}${path}`, {
        body: rest,
        headers: { 'Content-Range': `${first.length}-${data.length - 1}` },
      });
      assert.equal(p2.status, 202);
      assert.equal(p2.headers.get('range'), `0-${data.length - 1}`);
      const put = await http('PUT', `${reg.url}${path}?digest=${digest}`);
      assert.equal(put.status, 201);
      const got = await http('GET', `${reg.url}/v2/resume/me/blobs/${digest}`);
      assert.ok(got.body.equals(data));
      // The upload directory is gone once complete.
      assert.deepEqual(await readdir(join(root, V2, 'repositories/resume/me/_uploads')), []);
    } finally {
      await reg.stop();
    }
  });

  it('a second registry over the same storage continues an upload started by the first', async () => {
    const a = await startTestRegistry();
    const b = await startTestRegistry({}, {}, a.root);
    try {
      const start = await http('POST', `${a.url}/v2/replica/blobs/uploads/`);
      const path = new URL(start.headers.get('location') ?? '').pathname;
      assert.equal(
        (await http('PATCH', `${a.url}${path}`, { body: 'from a ', headers: { 'Content-Range': '0-6' } }))
          .status,
        202,
      );
      assert.equal(
        (await http('PATCH', `${b.url}${path}`, { body: 'from b', headers: { 'Content-Range': '7-12' } }))
          .status,
        202,
      );
      // Back on a, whose in-memory hash is now stale: it must recompute from storage.
      const put = await http('PUT', `${a.url}${path}?digest=${sha256('from a from b')}`);
      assert.equal(put.status, 201, put.text());
      assert.equal(
        (await http('GET', `${b.url}/v2/replica/blobs/${sha256('from a from b')}`)).text(),
        'from a from b',
      );
    } finally {
      await b.stop(true);
      await a.stop();
    }
  });
});

describe('concurrency', () => {
  it('two concurrent uploads of the same blob both succeed', async () => {
    const reg = await startTestRegistry();
    try {
      const data = randomBytes(2 * 1024 * 1024);
      const digest = sha256(data);
      const starts = await Promise.all([
        http('POST', `${reg.url}/v2/same/blob/blobs/uploads/`),
        http('POST', `${reg.url}/v2/same/blob/blobs/uploads/`),
      ]);
      const puts = await Promise.all(
        starts.map((s) => http('PUT', `${s.headers.get('location')}?digest=${digest}`, { body: data })),
      );
      assert.deepEqual(
        puts.map((p) => p.status),
        [201, 201],
      );
      const got = await http('GET', `${reg.url}/v2/same/blob/blobs/${digest}`);
      assert.ok(got.body.equals(data));
    } finally {
      await reg.stop();
    }
  });

  it('concurrent pushes of many images to several repositories', async () => {
    const reg = await startTestRegistry();
    try {
      const jobs = Array.from({ length: 16 }, (_, i) => pushImage(reg.url, `conc/r${i % 4}`, `t${i}`));
      const images = await Promise.all(jobs);
      for (let i = 0; i < images.length; i++) {
        const res = await http('GET', `${reg.url}/v2/conc/r${i % 4}/manifests/t${i}`, {
          headers: { Accept: OCI_MANIFEST },
        });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('docker-content-digest'), images[i]?.digest);
      }
      const catalog = await http('GET', `${reg.url}/v2/_catalog`);
      assert.deepEqual((catalog.json() as { repositories: string[] }).repositories, [
        'conc/r0',
        'conc/r1',
        'conc/r2',
        'conc/r3',
      ]);
    } finally {
      await reg.stop();
    }
  });

  it('concurrent PATCHes to one upload are serialised: one wins, the other gets 416', async () => {
    const reg = await startTestRegistry();
    try {
      const start = await http('POST', `${reg.url}/v2/race/blobs/uploads/`);
      const loc = start.headers.get('location') ?? '';
      const results = await Promise.all([
        http('PATCH', loc, { body: 'aaaa', headers: { 'Content-Range': '0-3' } }),
        http('PATCH', loc, { body: 'bbbb', headers: { 'Content-Range': '0-3' } }),
      ]);
      assert.deepEqual(results.map((r) => r.status).sort(), [202, 416]);
      const status = await http('GET', loc);
      assert.equal(status.headers.get('range'), '0-3');
    } finally {
      await reg.stop();
    }
  });
});

describe('expiry and purging', () => {
  it('an upload older than uploadpurging.age is unknown (404) and purged', async () => {
    const reg = await startTestRegistry({
      storage: {
        maintenance: { uploadpurging: { enabled: true, age: '1s', interval: '1h', dryrun: false } },
      },
    });
    try {
      const a = await http('POST', `${reg.url}/v2/expire/blobs/uploads/`);
      const b = await http('POST', `${reg.url}/v2/expire/blobs/uploads/`);
      await new Promise((r) => setTimeout(r, 1300));
      const res = await http('PATCH', a.headers.get('location') ?? '', { body: 'late' });
      assert.equal(res.status, 404);
      assert.deepEqual(errorCodes(res), ['BLOB_UPLOAD_UNKNOWN']);
      const purged = await reg.purgeUploads();
      assert.equal(purged.length, 1);
      assert.ok(purged[0]?.endsWith(b.headers.get('docker-upload-uuid') ?? 'x'));
      assert.deepEqual(await readdir(join(reg.root, V2, 'repositories/expire/_uploads')), []);
    } finally {
      await reg.stop();
    }
  });
  it('dryrun purging reports without deleting', async () => {
    const reg = await startTestRegistry({
      storage: {
        maintenance: { uploadpurging: { enabled: true, age: '1ms', interval: '1h', dryrun: true } },
      },
    });
    try {
      await http('POST', `${reg.url}/v2/dry/blobs/uploads/`);
      await new Promise((r) => setTimeout(r, 20));
      assert.equal((await reg.purgeUploads()).length, 1);
      assert.equal((await readdir(join(reg.root, V2, 'repositories/dry/_uploads'))).length, 1);
    } finally {
      await reg.stop();
    }
  });
});

describe('read-only mode', () => {
  it('writes answer 405 UNSUPPORTED, reads work', async () => {
    const rw = await startTestRegistry();
    const img = await pushImage(rw.url, 'ro/repo', 'v1');
    await rw.stop(true);
    const ro = await startTestRegistry(
      { storage: { maintenance: { readonly: { enabled: true } } } },
      {},
      rw.root,
    );
    try {
      for (const [method, path] of [
        ['POST', '/v2/ro/repo/blobs/uploads/'],
        ['PUT', '/v2/ro/repo/manifests/v2'],
        ['DELETE', `/v2/ro/repo/manifests/${img.digest}`],
        ['DELETE', `/v2/ro/repo/blobs/${img.layer}`],
      ] as const) {
        const res = await http(method, `${ro.url}${path}`, { body: method === 'PUT' ? img.body : undefined });
        assert.equal(res.status, 405, `${method} ${path}`);
        assert.deepEqual(errorCodes(res), ['UNSUPPORTED']);
      }
      const get = await http('GET', `${ro.url}/v2/ro/repo/manifests/v1`, {
        headers: { Accept: OCI_MANIFEST },
      });
      assert.equal(get.status, 200);
    } finally {
      await ro.stop();
    }
  });
});

describe('large blobs', () => {
  it('a 24 MiB blob in 8 MiB chunks, then ranged reads', async () => {
    const reg = await startTestRegistry();
    try {
      const data = randomBytes(24 * 1024 * 1024);
      const start = await http('POST', `${reg.url}/v2/large/blobs/uploads/`);
      let loc = start.headers.get('location') ?? '';
      const chunk = 8 * 1024 * 1024;
      for (let off = 0; off < data.length; off += chunk) {
        const part = data.subarray(off, off + chunk);
        const res = await http('PATCH', loc, {
          body: part,
          headers: { 'Content-Range': `${off}-${off + part.length - 1}` },
        });
        assert.equal(res.status, 202);
        loc = res.headers.get('location') ?? loc;
      }
      const digest = sha256(data);
      assert.equal((await http('PUT', `${loc}?digest=${digest}`)).status, 201);
      const got = await http('GET', `${reg.url}/v2/large/blobs/${digest}`);
      assert.ok(got.body.equals(data));
      const ranged = await http('GET', `${reg.url}/v2/large/blobs/${digest}`, {
        headers: { Range: `bytes=${chunk}-${chunk + 99}` },
      });
      assert.equal(ranged.status, 206);
      assert.ok(ranged.body.equals(data.subarray(chunk, chunk + 100)));
      // Concurrent readers each get intact bytes (the send path reuses its buffers).
      const gets = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          http('GET', `${reg.url}/v2/large/blobs/${digest}`, {
            headers: i % 2 ? { Range: `bytes=${i * 1000}-` } : {},
          }),
        ),
      );
      gets.forEach((g, i) => {
        assert.ok(g.body.equals(i % 2 ? data.subarray(i * 1000) : data), `reader ${i}`);
      });
    } finally {
      await reg.stop();
    }
  });
});
