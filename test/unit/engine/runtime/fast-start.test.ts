import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { startCreatedCrun } from '../../../../src/engine/runtime/driver/fast-start.js';

const run = promisify(execFile);

describe("crun's start in-process (the exec fifo)", () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-faststart-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('writes one byte to the waiting reader and unlinks the fifo', async () => {
    await mkdir(join(root, 'c1'));
    const fifo = join(root, 'c1', 'exec.fifo');
    await run('mkfifo', ['-m', '0600', fifo]);
    // the container's init: the fifo's reading end, open while it waits
    const reader = await open(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      assert.equal(await startCreatedCrun(root, 'c1'), true);
      const buf = Buffer.alloc(4);
      const { bytesRead } = await reader.read(buf, 0, 4, null);
      assert.equal(bytesRead, 1);
      assert.equal(buf[0], 0);
      await assert.rejects(access(fifo), { code: 'ENOENT' });
    } finally {
      await reader.close();
    }
  });

  it('leaves it to the CLI when there is no fifo (started already) or no reader (the init died)', async () => {
    assert.equal(await startCreatedCrun(root, 'missing'), false);
    await mkdir(join(root, 'c2'));
    const fifo = join(root, 'c2', 'exec.fifo');
    await run('mkfifo', ['-m', '0600', fifo]);
    assert.equal(await startCreatedCrun(root, 'c2'), false);
    await access(fifo); // untouched
  });
});
