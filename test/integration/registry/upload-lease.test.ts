// Two registry processes on one storage root: a streaming PATCH into an upload that the other
// process is writing is refused (409), not interleaved; the upload then goes on from either.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../helpers/eventually.js';
import { errorCodes, http, sha256, tempDir } from '../../helpers/registry.js';
import { type RegistryProcess, startRegistryOnRoot } from '../../helpers/registry-process.js';

describe('an upload written from two registry processes', () => {
  // Two registry processes (neither of them the test's own) on one storage root.
  let root: string;
  let a: { proc: RegistryProcess; url: string };
  let b: { proc: RegistryProcess; url: string };
  before(async () => {
    root = await tempDir('berth-lease-');
    a = await startRegistryOnRoot(root, []);
    b = await startRegistryOnRoot(root, []);
  });
  after(async () => {
    await b?.proc.stop();
    await a?.proc.stop();
    await rm(root, { recursive: true, force: true });
  });

  it('is refused in the second process while the first streams into it, and goes on afterwards', async () => {
    const start = await http('POST', `${a.url}/v2/lease/test/blobs/uploads/`);
    assert.equal(start.status, 202);
    const path = new URL(start.headers.get('location') ?? '', a.url).pathname;
    // A streaming PATCH into process A, its body left open.
    const first = 'first part, streamed slowly; ';
    let answered: (v: number) => void;
    const done = new Promise<number>((r) => {
      answered = r;
    });
    const { port } = new URL(a.url);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'PATCH',
        headers: { 'Content-Type': 'application/octet-stream' },
      },
      (res) => {
        res.resume();
        answered(res.statusCode ?? 0);
      },
    );
    req.write(first.slice(0, 10));
    // A takes the upload's lease as its request comes in: wait for the file (bounded).
    const id = path.slice(path.lastIndexOf('/') + 1);
    const leaseFile = join(root, 'docker/registry/v2/repositories/lease/test/_uploads', id, 'writer');
    await eventually('the upload lease of process A', () => existsSync(leaseFile), 10_000);
    const refused = await http('PATCH', `${b.url}${path}`, {
      body: 'interleaved',
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(refused.status, 409, refused.text());
    assert.deepEqual(errorCodes(refused), ['BLOB_UPLOAD_INVALID']);
    req.end(first.slice(10));
    assert.equal(await done, 202);
    // Free again: the second process appends and completes.
    const second = 'second part';
    const patch = await http('PATCH', `${b.url}${path}`, {
      body: second,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(patch.status, 202, patch.text());
    assert.equal(patch.headers.get('range'), `0-${first.length + second.length - 1}`);
    const digest = sha256(first + second);
    const put = await http('PUT', `${b.url}${path}?digest=${digest}`);
    assert.equal(put.status, 201, put.text());
    const blob = await http('GET', `${a.url}/v2/lease/test/blobs/${digest}`);
    assert.equal(blob.text(), first + second);
  });
});
