import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { ThreadedSha256 } from '../../../../src/engine/storage/hash.thread.js';

describe('SHA-256 on a worker thread', () => {
  it('hashes as createHash does: small inputs in place, large ones through the ring, again and again', async () => {
    const cases: Array<[number, number]> = [
      [0, 1],
      [100, 7],
      [9_000_000, 65_536],
      [40_000_000, 1 << 20],
      [40_000_000, 20_000_000], // chunks larger than the ring's free space
    ];
    for (const [total, chunk] of cases) {
      const data = randomBytes(total);
      const want = `sha256:${createHash('sha256').update(data).digest('hex')}`;
      for (let round = 0; round < 2; round++) {
        const h = new ThreadedSha256();
        for (let i = 0; i < total; i += chunk) {
          const p = h.update(data.subarray(i, i + chunk));
          if (p) await p;
        }
        assert.equal(await h.digest(), want, `${total} bytes in ${chunk}-byte chunks`);
      }
    }
    // a hash given up ends its thread; the next one still works
    const h = new ThreadedSha256(0);
    await h.update(Buffer.alloc(10));
    h.dispose();
    const again = new ThreadedSha256(0);
    await again.update(Buffer.from('x'));
    assert.equal(await again.digest(), `sha256:${createHash('sha256').update('x').digest('hex')}`);
  });
});
