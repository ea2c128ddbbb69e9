import assert from 'node:assert/strict';
import { mkdir, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { originForm } from '../../../src/registry/app.js';
import { toErrorResponse } from '../../../src/registry/errors.js';
import { UploadSlots } from '../../../src/registry/limits/upload-slots.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import { tempDir } from '../../helpers/registry.js';

describe('originForm', () => {
  it('routes an absolute-form target by its path and query', () => {
    assert.equal(originForm('/v2/'), '/v2/');
    assert.equal(originForm('http://127.0.0.1:5000/v2/'), '/v2/');
    assert.equal(originForm('https://registry.example/v2/a/b/tags/list?n=1'), '/v2/a/b/tags/list?n=1');
    assert.equal(originForm('http://host'), '/');
    assert.equal(originForm('http://host?x=1'), '/?x=1');
    assert.equal(originForm('ftp://x/v2/'), '/v2/');
    // Not absolute-form: left as it is (and answered 404 by the router).
    assert.equal(originForm('v2/'), 'v2/');
    assert.equal(originForm('*'), '*');
  });
});

describe('UploadSlots', () => {
  it('refuses a client over its limit with 429 TOOMANYREQUESTS and Retry-After, per client', () => {
    const slots = new UploadSlots(2);
    const a1 = slots.acquire('a');
    const a2 = slots.acquire('a');
    const b1 = slots.acquire('b');
    let refused: unknown;
    try {
      slots.acquire('a');
    } catch (err) {
      refused = err;
    }
    const answer = toErrorResponse(refused);
    assert.equal(answer.status, 429);
    assert.equal(answer.body.errors[0]?.code, 'TOOMANYREQUESTS');
    assert.equal(answer.headers['Retry-After'], '1');
    a1();
    a1(); // giving a slot back twice frees it once
    assert.equal(slots.held('a'), 1);
    slots.acquire('a');
    assert.throws(() => slots.acquire('a'));
    a2();
    b1();
    assert.equal(slots.held('b'), 0);
  });
  it('0 means no limit', () => {
    const slots = new UploadSlots(0);
    for (let i = 0; i < 100; i++) slots.acquire('a');
    assert.equal(slots.held('a'), 100);
  });
});

describe('FilesystemDriver.sweepTemporary', () => {
  let root: string;
  const V2 = 'docker/registry/v2';
  const HOUR = 3_600_000;
  before(async () => {
    root = await tempDir('berth-sweep-');
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function file(path: string, ageMs: number): Promise<void> {
    const full = join(root, V2, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, 'x');
    const t = new Date(Date.now() - ageMs);
    await utimes(full, t, t);
  }
  const exists = (path: string) =>
    stat(join(root, V2, path)).then(
      () => true,
      () => false,
    );

  it('deletes old temporary files and what they leave empty, never a collection or a live file', async () => {
    // A repository named "tags" and a tag named "revisions": collections are found from the end.
    await file('repositories/a/tags/_manifests/tags/revisions/current/link.0123456789ab.tmp', HOUR);
    await file('repositories/a/tags/_manifests/tags/live/current/link', HOUR);
    await file('repositories/a/tags/_manifests/tags/live/current/link.00000000000a.tmp', HOUR);
    await file('repositories/b/_layers/sha256/abcd/link.0123456789ab.tmp', HOUR);
    await file('repositories/b/_uploads/u1/startedat.0123456789ab.tmp', HOUR);
    await file('repositories/b/_uploads/u1/data', HOUR);
    await file('blobs/sha256/ab/abcd/data.0123456789ab.tmp', HOUR);
    await file('blobs/sha256/ab/abce/data', HOUR);
    await file('blobs/sha256/ab/abcf/data.0123456789ab.tmp', 0); // young: another writer's
    // A directory whose name looks temporary (a tag may be named so) is not a temporary file.
    await file('repositories/b/_manifests/tags/v.0123456789ab.tmp/current/link', HOUR);
    const driver = new FilesystemDriver(root);

    const dry = await driver.sweepTemporary(Date.now() - 60_000, true);
    assert.equal(dry.length, 5);
    assert.ok(await exists('blobs/sha256/ab/abcd/data.0123456789ab.tmp'));

    const swept = await driver.sweepTemporary(Date.now() - 60_000);
    assert.deepEqual(swept, dry);
    assert.ok(swept.every((p) => p.startsWith(`/${V2}/`) && p.endsWith('.tmp')));
    // Emptied: the tag's current/ (and the tag, it held nothing else), the layer link dir, the blob dir.
    assert.equal(await exists('repositories/a/tags/_manifests/tags/revisions'), false);
    assert.equal(await exists('repositories/b/_layers/sha256/abcd'), false);
    assert.equal(await exists('blobs/sha256/ab/abcd'), false);
    // Kept: collections, live files and the directories holding them, young temporaries.
    assert.ok(await exists('repositories/a/tags/_manifests/tags'));
    assert.ok(await exists('repositories/a/tags/_manifests/tags/live/current/link'));
    assert.ok(await exists('repositories/b/_layers/sha256'));
    assert.ok(await exists('repositories/b/_uploads/u1/data'));
    assert.ok(await exists('blobs/sha256/ab/abce/data'));
    assert.ok(await exists('blobs/sha256/ab/abcf/data.0123456789ab.tmp'));
    assert.ok(await exists('repositories/b/_manifests/tags/v.0123456789ab.tmp/current/link'));
    assert.deepEqual(await readdir(join(root, V2, 'blobs/sha256/ab')), ['abce', 'abcf']);
  });

  it('a storage without the registry tree has nothing to sweep', async () => {
    const empty = await tempDir('berth-sweep-empty-');
    try {
      assert.deepEqual(await new FilesystemDriver(empty).sweepTemporary(Date.now()), []);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
