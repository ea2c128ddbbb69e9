import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { utimes } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseDigest, sha256Digest } from '../../../src/common/digest.js';
import { collectGarbage } from '../../../src/registry/gc/gc.js';
import { BlobGuard } from '../../../src/registry/gc/guard.js';
import { deleteUnlessHeld, HOLDS_DIR, SharedHolds, TOMBSTONE } from '../../../src/registry/gc/holds.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import { paths } from '../../../src/registry/storage/paths.js';

describe('gc BlobGuard', () => {
  it('a held blob is not deleted; one held during the run is kept for the rest of it', async () => {
    const guard = new BlobGuard();
    const deleted: string[] = [];
    const remove = (d: string) => async () => {
      deleted.push(d);
    };
    guard.beginRun();
    let release!: () => void;
    const holding = guard.hold(['a'], () => new Promise<void>((r) => (release = r)));
    assert.equal(await guard.tryDelete('a', remove('a')), false);
    await new Promise((r) => setTimeout(r, 10));
    release();
    await holding;
    // Released, but held during this run: still kept.
    assert.equal(await guard.tryDelete('a', remove('a')), false);
    assert.equal(await guard.tryDelete('b', remove('b')), true);
    guard.endRun();
    guard.beginRun();
    assert.equal(await guard.tryDelete('a', remove('a')), true);
    guard.endRun();
    assert.deepEqual(deleted, ['b', 'a']);
  });

  it('a request that comes while the blob is being deleted waits for the deletion to end', async () => {
    const guard = new BlobGuard();
    guard.beginRun();
    let finish!: () => void;
    let gone = false;
    const deleting = guard.tryDelete(
      'x',
      () =>
        new Promise<void>((r) => {
          finish = () => {
            gone = true;
            r();
          };
        }),
    );
    const seen = guard.hold(['x'], async () => gone);
    await new Promise((r) => setTimeout(r, 20));
    finish();
    assert.equal(await deleting, true);
    assert.equal(await seen, true, 'the request ran after the deletion, so it sees the blob gone');
    guard.endRun();
  });
});

describe('holds shared through the storage (registry processes on one root)', () => {
  let root: string;
  let driver: FilesystemDriver;
  const oldBlob = async (content: string) => {
    const digest = sha256Digest(content);
    const d = parseDigest(digest);
    await driver.putContent(paths.blobData(d), content);
    const then = new Date(Date.now() - 2 * 3600_000);
    await utimes(driver.fullPath(paths.blobData(d)), then, then);
    return { digest, dir: driver.fullPath(paths.blobDir(d)), data: driver.fullPath(paths.blobData(d)) };
  };
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-holds-'));
    driver = new FilesystemDriver(root);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('a collection keeps a blob that another process’s request holds, and deletes it once released', async () => {
    const x = await oldBlob('held by the other process');
    const y = await oldBlob('held by nobody');
    // Two processes: each its own guard, both on the storage's holds.
    const here = new BlobGuard(new SharedHolds(driver.fullPath(HOLDS_DIR)));
    const other = new BlobGuard(new SharedHolds(driver.fullPath(HOLDS_DIR)));
    let release!: () => void;
    let holding!: Promise<void>;
    const held = new Promise<void>((ready) => {
      holding = other.hold([x.digest], async () => {
        ready();
        await new Promise<void>((r) => {
          release = r;
        });
      });
    });
    await held;
    const first = await collectGarbage(driver, { guard: here, gracePeriodMs: 0 });
    assert.deepEqual(first.deletedBlobs, [y.digest]);
    assert.ok(first.keptYoung.includes(x.digest));
    assert.ok(existsSync(x.data));
    assert.equal(existsSync(join(x.dir, TOMBSTONE)), false);
    release();
    await holding;
    assert.deepEqual(readdirSync(driver.fullPath(HOLDS_DIR)), []);
    const second = await collectGarbage(driver, { guard: here, gracePeriodMs: 0 });
    assert.deepEqual(second.deletedBlobs, [x.digest]);
    assert.equal(existsSync(x.dir), false);
  });

  it('deleteUnlessHeld: puts the data back for a live hold, ignores the hold of a dead process', async () => {
    const holds = new SharedHolds(driver.fullPath(HOLDS_DIR));
    const x = await oldBlob('decided on');
    const releaseHold = await holds.add([x.digest]);
    assert.equal(await deleteUnlessHeld(holds, x.digest, x.dir), false);
    assert.ok(existsSync(x.data));
    await releaseHold();
    // A hold left by a process of this host that is gone (no such pid) does not count.
    const dead = join(
      driver.fullPath(HOLDS_DIR),
      `${hostname().replace(/[^A-Za-z0-9_-]/g, '_')}-2147483646-deadbeef-0`,
    );
    writeFileSync(dead, x.digest);
    assert.deepEqual([...(await holds.current())], []);
    assert.equal(existsSync(dead), false);
    assert.equal(await deleteUnlessHeld(holds, x.digest, x.dir), true);
    assert.equal(existsSync(x.dir), false);
  });

  it('data a killed collector had moved aside is put back by the next collection', async () => {
    const x = await oldBlob('moved aside by a killed collector');
    renameSync(x.data, join(x.dir, TOMBSTONE));
    const report = await collectGarbage(driver, { gracePeriodMs: 0 });
    assert.ok(existsSync(x.data));
    assert.equal(report.deletedBlobs.includes(x.digest), false);
    assert.match(report.warnings.join('\n'), /restored/);
  });
});

describe('deleteUnlessHeld and a completion of the same content meanwhile', () => {
  it('removes only the data it moved aside: new data put in place stays', async () => {
    const root = mkdtempSync(join(tmpdir(), 'berth-holds-race-'));
    try {
      const driver = new FilesystemDriver(root);
      const d = parseDigest(sha256Digest('same content'));
      await driver.putContent(paths.blobData(d), 'same content');
      const dir = driver.fullPath(paths.blobDir(d));
      // The holds are read while an upload of the same content completes (its data moved in).
      const holds = new SharedHolds(driver.fullPath(HOLDS_DIR));
      const racing = Object.assign(Object.create(holds) as SharedHolds, {
        current: async () => {
          writeFileSync(join(dir, 'data'), 'same content');
          return new Set<string>();
        },
      });
      assert.equal(await deleteUnlessHeld(racing, d.digest, dir), true);
      assert.deepEqual(readdirSync(dir), ['data']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
