import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tryLockFile } from '../../../src/common/fs/file-lock.js';
import { eventually } from '../../helpers/eventually.js';

const lockModule = resolve(import.meta.dirname, '../../../src/common/fs/file-lock.ts');

/**
 * A process that takes the lock, prints `locked` and then the pid of a `sleep` it starts
 * afterwards (a child that outlives it, as conmon outlives the engine), and waits.
 */
function holder(path: string): ChildProcess {
  const script = `
    import { spawn } from 'node:child_process';
    import { tryLockFile } from ${JSON.stringify(lockModule)};
    const lock = await tryLockFile(${JSON.stringify(path)});
    if (!lock) { console.log('busy'); process.exit(3); }
    console.log('locked');
    const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    child.unref();
    console.log(child.pid);
    setInterval(() => {}, 1000);
  `;
  return spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

describe('file lock (flock held by the process)', () => {
  let dir: string;
  const strays: number[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-lock-unit-'));
  });
  after(async () => {
    for (const pid of strays) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('is exclusive, writable, and free again once released (its file removed)', async () => {
    const path = join(dir, 'a.lock');
    const first = await tryLockFile(path);
    assert.ok(first);
    await first.write('1234\n');
    await first.write('99\n');
    assert.equal(await readFile(path, 'utf8'), '99\n');
    assert.equal(await tryLockFile(path), undefined, 'a second lock while the first is held');
    await first.release();
    assert.equal(existsSync(path), false);
    const second = await tryLockFile(path);
    assert.ok(second, 'free after the release');
    await second.release();
  });

  it('dies with its holder (SIGKILL), not with a child the holder started', async () => {
    const path = join(dir, 'b.lock');
    const proc = holder(path);
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    await eventually('the holder to lock', () => /^locked\n\d+\n/.test(out), 20_000);
    const sleeper = Number(out.split('\n')[1]);
    strays.push(sleeper);
    assert.equal(await tryLockFile(path), undefined, 'held by the other process');
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
    // the holder's child still runs: it must not have kept the lock
    process.kill(sleeper, 0);
    const mine = await tryLockFile(path);
    assert.ok(mine, 'free once the holder is dead');
    await mine.release();
  });

  it('answers a clear error when flock(1) cannot run', async () => {
    await assert.rejects(
      tryLockFile(join(dir, 'c.lock'), '/nonexistent/flock'),
      /flock\(1\) \(util-linux\) cannot run/,
    );
  });
});
