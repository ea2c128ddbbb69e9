import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { ChunkedDecoder } from '../../../src/http/chunked.js';

/** A body in chunked coding, chunks of the given sizes. */
function encode(data: Buffer, sizes: number[], trailer = ''): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (const n of sizes) {
    parts.push(Buffer.from(`${n.toString(16)}\r\n`), data.subarray(at, at + n), Buffer.from('\r\n'));
    at += n;
  }
  parts.push(Buffer.from(`0\r\n${trailer}\r\n`));
  return Buffer.concat(parts);
}

/** Feed `wire` cut every `step` bytes; the data and what followed the body. */
function decode(wire: Buffer, step: number): { data: Buffer; rest: Buffer; done: boolean } {
  const d = new ChunkedDecoder();
  const out: Buffer[] = [];
  for (let i = 0; i < wire.length && !d.done; i += step) {
    const piece = Buffer.from(wire.subarray(i, i + step));
    for (const p of d.feed(piece)) {
      // views of the buffer fed in, never copies
      assert.equal(p.buffer, piece.buffer);
      out.push(Buffer.from(p));
    }
    if (d.done) return { data: Buffer.concat(out), rest: Buffer.from(d.rest), done: true };
  }
  return { data: Buffer.concat(out), rest: Buffer.alloc(0), done: d.done };
}

const malformed = (why: string) => (err: Error & { kind?: string }) =>
  err.kind === 'InvalidParameter' && err.message === `malformed chunked encoding: ${why}`;

describe('ChunkedDecoder', () => {
  it('decodes a body cut anywhere, and leaves what follows it', () => {
    const data = randomBytes(70_000);
    const wire = Buffer.concat([
      encode(data, [1, 32768, 4000, 33231], 'X-Sum: 1\r\nX-Other: 2\r\n'),
      Buffer.from('GET /next'),
    ]);
    for (const step of [1, 2, 3, 7, 512, 65536, wire.length]) {
      const r = decode(wire, step);
      assert.ok(r.done, `step ${step}`);
      assert.ok(r.data.equals(data), `step ${step}`);
      if (step >= wire.length) assert.equal(r.rest.toString(), 'GET /next');
    }
  });

  it("reads chunk sizes as Go's server: extensions, blanks, bare LF, upper-case hex", () => {
    const wire = Buffer.from('A;name=value\r\n0123456789\r\n4 \n abc\r\n0\n\n');
    const r = decode(wire, wire.length);
    assert.ok(r.done);
    assert.equal(r.data.toString(), '0123456789 abc');
    // ` abc` is 4 bytes: a chunk of 3 is ` ab`, then `c` is no CRLF
    assert.throws(
      () => decode(Buffer.from('3\r\n abc\r\n0\r\n\r\n'), 100),
      malformed('no CRLF after the chunk data'),
    );
  });

  it('an empty body', () => {
    const r = decode(Buffer.from('0\r\n\r\n'), 1);
    assert.ok(r.done);
    assert.equal(r.data.length, 0);
  });

  it('refuses what is no chunked coding', () => {
    assert.throws(() => decode(Buffer.from('zz\r\n'), 4), malformed('invalid byte in chunk length'));
    assert.throws(() => decode(Buffer.from('-1\r\n'), 4), malformed('invalid byte in chunk length'));
    assert.throws(() => decode(Buffer.from('\r\n'), 4), malformed('empty chunk size'));
    assert.throws(
      () => decode(Buffer.from(`${'f'.repeat(17)}\r\n`), 30),
      malformed('chunk length too large'),
    );
    assert.throws(
      () => decode(Buffer.from(`${'f'.repeat(16)}\r\n`), 30),
      malformed('chunk length too large'),
    );
    assert.throws(() => decode(Buffer.from('2\r\nabXY'), 1), malformed('no CRLF after the chunk data'));
    assert.throws(() => decode(Buffer.from(`1${' '.repeat(5000)}`), 100), malformed('line too long'));
    assert.throws(
      () => decode(Buffer.from('0\r\nno colon here\r\n\r\n'), 100),
      malformed('invalid trailer field'),
    );
    const endless = Buffer.from(`0\r\n${'X-A: b\r\n'.repeat(10_000)}`);
    assert.throws(() => decode(endless, 4096), malformed('trailer too large'));
  });

  it('a body cut short is not done', () => {
    const wire = encode(randomBytes(100), [100]);
    assert.equal(decode(wire.subarray(0, 50), 10).done, false);
    assert.equal(decode(wire.subarray(0, wire.length - 2), 10).done, false);
  });
});
