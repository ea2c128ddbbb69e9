import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BlobGuard } from '../../../src/registry/gc/guard.js';

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
