import assert from 'node:assert/strict';
import { constants, fstatSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LogFd } from '../../../../src/engine/runtime/logs/log-fd.js';

describe('a log file opened and closed at once (LogFd)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-logfd-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('appends, truncates and reads in the thread pool', async () => {
    const path = join(dir, 'a.log');
    const w = LogFd.open(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o640);
    assert.equal(fstatSync(w.fd).mode & 0o777, 0o640 & ~process.umask());
    await w.write(Buffer.from('0123456789'), 0, 10);
    await w.truncate(4);
    assert.deepEqual(await w.write(Buffer.from('xyz'), 1, 2), { bytesWritten: 2 });
    await w.close();
    assert.equal(await readFile(path, 'utf8'), '0123yz');
    const r = LogFd.open(path, 'r');
    const buf = Buffer.alloc(8);
    assert.deepEqual(await r.read(buf, 0, 8, 2), { bytesRead: 4 });
    assert.equal(buf.subarray(0, 4).toString(), '23yz');
    await r.close();
    assert.throws(() => LogFd.open(join(dir, 'none'), 'r'), { code: 'ENOENT' });
  });

  it('closes only once the reads under way are done, and refuses reads after', async () => {
    const path = join(dir, 'big.log');
    await writeFile(path, Buffer.alloc(8 << 20, 0x61));
    const r = LogFd.open(path, 'r');
    const bufs = [0, 1, 2, 3].map(() => Buffer.alloc(2 << 20));
    const reads = bufs.map((b, i) => r.read(b, 0, b.length, i * b.length));
    const closed = r.close();
    const results = await Promise.all(reads);
    await closed;
    assert.deepEqual(
      results.map((x) => x.bytesRead),
      [2 << 20, 2 << 20, 2 << 20, 2 << 20],
    );
    assert.ok(bufs.every((b) => b.every((c) => c === 0x61)));
    await assert.rejects(r.read(Buffer.alloc(1), 0, 1, 0), { code: 'EBADF' });
    await r.close(); // twice: nothing
  });
});
