import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ResponseFramer } from '../../../bench/common/http1.js';

/** Feed `text` to a framer in pieces of `size` bytes; the statuses, in order. */
function frame(text: string, size: number, isHead = false): number[] {
  const f = new ResponseFramer(isHead);
  const bytes = Buffer.from(text, 'latin1');
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(...f.push(bytes.subarray(i, i + size)));
  return out;
}

describe('bench response framer', () => {
  const sized = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello';
  const chunked = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n[1]\r\n0\r\n\r\n';
  const empty = 'HTTP/1.1 204 No Content\r\n\r\n';

  it('frames Content-Length, chunked and empty responses in any split, back to back', () => {
    const all = sized + chunked + empty + 'HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}';
    for (const size of [1, 2, 3, 5, 7, 13, all.length]) {
      assert.deepEqual(frame(all, size), [200, 200, 204, 404], `pieces of ${size}`);
    }
  });

  it('waits for the whole body', () => {
    assert.deepEqual(frame(sized.slice(0, -1), 100), []);
    assert.deepEqual(frame(chunked.slice(0, -1), 4), []);
  });

  it('reads no body after HEAD', () => {
    assert.deepEqual(frame('HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n'.repeat(2), 10, true), [200, 200]);
  });
});
