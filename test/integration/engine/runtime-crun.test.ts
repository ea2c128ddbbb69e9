import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { readCgroupLayout } from '../../../src/engine/runtime/driver/cgroups.js';
import { LogCopier, readLogs } from '../../../src/engine/runtime/index.js';
import type { AttachConnection } from '../../../src/engine/runtime/runtime.types.js';
import { collect, createHarness, type Harness } from './runtime-fixture.js';

describe('runtime driver (crun + conmon)', () => {
  let h: Harness;
  before(async () => {
    h = await createHarness('crun');
  });
  after(async () => {
    await h.cleanup();
  });

  it('left no controller on the cgroup v2 hierarchy (crun refuses hybrid mode otherwise)', async () => {
    const layout = await readCgroupLayout();
    assert.deepEqual(layout.v2Controllers, []);
    assert.match(await h.driver.version(), /^\d+\.\d+/);
    assert.equal(h.driver.name, 'crun');
  });

  it('runs a container, logs its output and records the exit code', async () => {
    const { logPath } = await h.run('c-echo', ['sh', '-c', 'echo hello; echo oops >&2; exit 7']);
    assert.equal((await h.waitExit('c-echo')).exitCode, 7);
    const target = `${logPath}.json`;
    const limits = { maxSize: -1, maxFiles: 1, compress: false };
    await (await LogCopier.start({ source: logPath, target, limits })).finish();
    const got: string[] = [];
    for await (const m of readLogs(target, { stdout: true, stderr: true })) got.push(`${m.stream}:${m.line}`);
    assert.deepEqual(got.sort(), ['stderr:oops\n', 'stdout:hello\n']);
    await h.driver.delete('c-echo');
    assert.equal(await h.driver.state('c-echo'), null);
  });

  it('pauses, resumes, lists pids, kills', async () => {
    const { pid } = await h.run('c-sleep', ['sleep', '100']);
    assert.deepEqual(await h.driver.pids('c-sleep'), [pid]);
    await h.driver.pause('c-sleep');
    assert.equal((await h.driver.state('c-sleep'))?.status, 'paused');
    await h.driver.resume('c-sleep');
    await h.driver.signal('c-sleep', 9);
    assert.equal((await h.waitExit('c-sleep')).exitCode, 137);
  });

  it('runs a TTY and resizes it; stdin reaches cat', async () => {
    let out = '';
    let conn: AttachConnection | undefined;
    await h.run('c-tty', ['sh'], {
      terminal: true,
      stdin: true,
      consoleSize: { height: 10, width: 20 },
      config: { Tty: true, OpenStdin: true },
      beforeStart: async () => {
        conn = await h.driver.attach('c-tty');
        conn.on('stdout', (b: Buffer) => {
          out += b.toString();
        });
      },
    });
    conn!.writeStdin(Buffer.from('stty size\n'));
    for (let i = 0; i < 250 && !out.includes('10 20'); i++) await sleep(20);
    assert.match(out, /10 20/);
    await h.driver.resize('c-tty', 33, 44);
    conn!.writeStdin(Buffer.from('stty size; exit 0\n'));
    assert.equal((await h.waitExit('c-tty')).exitCode, 0);
    assert.match(out, /33 44/);

    let cat: AttachConnection | undefined;
    let got: Promise<{ stdout: string; stderr: string }> | undefined;
    await h.run('c-cat', ['cat'], {
      stdin: true,
      stdinOnce: true,
      beforeStart: async () => {
        cat = await h.driver.attach('c-cat');
        got = collect(cat);
      },
    });
    cat!.writeStdin(Buffer.from('via crun\n'));
    cat!.closeStdin();
    assert.equal((await got!).stdout, 'via crun\n');
    assert.equal((await h.waitExit('c-cat')).exitCode, 0);
  });

  it('records an OOM kill', async () => {
    await h.run('c-oom', ['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=64M', 'count=1'], {
      hostConfig: { Memory: 16 << 20, MemorySwap: 16 << 20 },
    });
    assert.deepEqual(await h.waitExit('c-oom').then((s) => [s.exitCode, s.oomKilled]), [137, true]);
  });
});
