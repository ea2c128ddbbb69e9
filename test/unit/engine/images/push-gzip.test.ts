import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { parallelGzip } from '../../../../src/engine/images/push/gzip.js';

async function gz(data: Buffer, piece = 70_001): Promise<Buffer> {
  async function* src(): AsyncGenerator<Buffer> {
    for (let o = 0; o < data.length; o += piece) yield data.subarray(o, o + piece);
  }
  const out: Buffer[] = [];
  for await (const c of parallelGzip(src())) out.push(c);
  return Buffer.concat(out);
}

describe('parallel gzip', () => {
  it('is one gzip member that node and gzip(1) read back, for any size', async () => {
    const text = Buffer.from('berth push '.repeat(400_000));
    for (const data of [
      Buffer.alloc(0),
      Buffer.from('x'),
      text,
      Buffer.concat([randomBytes(1_500_000), text]),
    ]) {
      const z = await gz(data);
      assert.ok(gunzipSync(z).equals(data));
      assert.ok(execFileSync('gzip', ['-dc'], { input: z, maxBuffer: 1 << 26 }).equals(data));
    }
  });

  it('is reproducible whatever the input chunking, compresses text and stores random blocks', async () => {
    const text = Buffer.from('layer registry manifest digest '.repeat(200_000));
    const a = await gz(text, 1000);
    const b = await gz(text, 3_000_001);
    assert.ok(a.equals(b));
    assert.ok(a.length < text.length / 20, `text compressed to ${a.length}`);
    const random = randomBytes(3 * 1024 * 1024);
    const r = await gz(random);
    // stored blocks: a few bytes per 64 KiB more than the input, never a deflate attempt's output
    assert.ok(r.length > random.length && r.length < random.length + 1024, `random: ${r.length}`);
  });
});
