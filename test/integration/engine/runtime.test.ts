import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { isKind } from '../../../src/common/errors.js';
import {
  buildResources,
  LogCopier,
  type LogCopierOptions,
  type LogMessage,
  readLogs,
} from '../../../src/engine/runtime/index.js';
import type { AttachConnection, Runtime } from '../../../src/engine/runtime/runtime.types.js';
import { eventually } from '../../helpers/eventually.js';
import { collect, createHarness, type Harness } from './runtime-fixture.js';

const noLimits = { maxSize: -1, maxFiles: 1, compress: false };

/** Start the engine's log writer on what conmon writes at `path` (into `path.json`). */
function copier(path: string, o: Partial<LogCopierOptions> = {}): Promise<LogCopier> {
  return LogCopier.start({ source: path, target: `${path}.json`, limits: noLimits, ...o });
}

/** The messages of a stopped container's monitor output, through the engine's log writer. */
async function logs(path: string): Promise<LogMessage[]> {
  await (await copier(path)).finish();
  const out: LogMessage[] = [];
  for await (const m of readLogs(`${path}.json`, { stdout: true, stderr: true })) out.push(m);
  return out;
}

/** Wait until `cond` holds (bounded). */

describe('runtime driver (runc + conmon)', () => {
  let h: Harness;
  before(async () => {
    h = await createHarness('runc');
  });
  after(async () => {
    await h.cleanup();
  });

  it('runs echo hello, records exit 0 and logs the output', async () => {
    const { pid, logPath } = await h.run('echo1', ['echo', 'hello']);
    assert.ok(pid > 0);
    const s = await h.waitExit('echo1');
    assert.equal(s.exitCode, 0);
    assert.equal(s.oomKilled, false);
    const st = await h.driver.exitStatus('echo1');
    assert.equal(st?.exitCode, 0);
    assert.ok(st!.finishedAt instanceof Date && Math.abs(st!.finishedAt.getTime() - Date.now()) < 60000);
    const ms = await logs(logPath);
    assert.deepEqual(
      ms.map((m) => [m.stream, m.line.toString()]),
      [['stdout', 'hello\n']],
    );
    assert.equal((await h.driver.state('echo1'))?.status, 'stopped');
    await h.driver.delete('echo1');
    assert.equal(await h.driver.state('echo1'), null);
    assert.equal(await h.driver.exitStatus('echo1'), null);
    for (const c of ['memory', 'pids', 'cpu', 'unified']) {
      await assert.rejects(access(`/sys/fs/cgroup/${c}/berth-test/echo1`), { code: 'ENOENT' });
    }
  });

  it('records exit codes and keeps stdout and stderr apart (log and attach)', async () => {
    let conn: AttachConnection | undefined;
    let got: Promise<{ stdout: string; stderr: string }> | undefined;
    const { logPath } = await h.run('codes', ['sh', '-c', 'echo out; echo err >&2; exit 3'], {
      beforeStart: async () => {
        conn = await h.driver.attach('codes');
        got = collect(conn);
      },
    });
    assert.equal((await h.waitExit('codes')).exitCode, 3);
    assert.deepEqual(await got, { stdout: 'out\n', stderr: 'err\n' });
    const ms = await logs(logPath);
    assert.deepEqual(ms.map((m) => `${m.stream}:${m.line.toString()}`).sort(), [
      'stderr:err\n',
      'stdout:out\n',
    ]);
    assert.match(ms[0]!.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  it('delivers signals: a trapped TERM, then KILL', async () => {
    await h.run('trap', ['sh', '-c', 'trap "exit 42" TERM; echo ready; while true; do sleep 0.05; done']);
    await h.run('kill', ['sleep', '100']);
    await eventually('ready', async () =>
      (await readFile(join(h.dir, 'trap.log'), 'utf8').catch(() => '')).includes('ready'),
    );
    await h.driver.signal('trap', 15);
    assert.equal((await h.waitExit('trap')).exitCode, 42);
    assert.equal((await h.driver.state('kill'))?.status, 'running');
    await h.driver.signal('kill', 9);
    assert.equal((await h.waitExit('kill')).exitCode, 137);
  });

  it('pauses and resumes, lists pids', async () => {
    const { pid } = await h.run('pause', ['sleep', '100']);
    assert.deepEqual(await h.driver.state('pause'), { status: 'running', pid });
    assert.deepEqual(await h.driver.pids('pause'), [pid]);
    await h.driver.pause('pause');
    assert.equal((await h.driver.state('pause'))?.status, 'paused');
    await h.driver.resume('pause');
    assert.equal((await h.driver.state('pause'))?.status, 'running');
    await h.driver.signal('pause', 9);
    assert.equal((await h.waitExit('pause')).exitCode, 137);
  });

  it('passes stdin through attach; closeStdin ends it (StdinOnce)', async () => {
    let conn: AttachConnection | undefined;
    let got: Promise<{ stdout: string; stderr: string }> | undefined;
    await h.run('cat', ['cat'], {
      stdin: true,
      stdinOnce: true,
      beforeStart: async () => {
        conn = await h.driver.attach('cat');
        got = collect(conn);
      },
    });
    conn!.writeStdin(Buffer.from('hello cat\n'));
    conn!.writeStdin(Buffer.alloc(100000, 'x'));
    conn!.closeStdin();
    const out = await got!;
    assert.equal(out.stdout.length, 'hello cat\n'.length + 100000);
    assert.ok(out.stdout.startsWith('hello cat\n'));
    assert.equal((await h.waitExit('cat')).exitCode, 0);
  });

  it('keeps stdin open across attach clients without StdinOnce', async () => {
    await h.run('cat2', ['cat'], { stdin: true, stdinOnce: false });
    const a = await h.driver.attach('cat2');
    const gotA = collect(a, (s) => s.includes('one'));
    a.writeStdin(Buffer.from('one\n'));
    assert.equal((await gotA).stdout, 'one\n');
    a.close();
    await sleep(50);
    assert.equal((await h.driver.state('cat2'))?.status, 'running');
    const b = await h.driver.attach('cat2');
    const gotB = collect(b, (s) => s.includes('two'));
    b.writeStdin(Buffer.from('two\n'));
    assert.equal((await gotB).stdout, 'two\n');
    b.close();
    await h.driver.signal('cat2', 9);
    assert.equal((await h.waitExit('cat2')).exitCode, 137);
  });

  it('runs a TTY with an initial size and resizes it', async () => {
    let conn: AttachConnection | undefined;
    let out = '';
    // Not an interactive shell: ash's line editing asks the terminal for the cursor position at
    // each prompt and swallows what is typed meanwhile. `read` waits in the tty's canonical mode.
    await h.run('tty', ['sh', '-c', 'stty size; read x; stty size; tty; exit 5'], {
      terminal: true,
      stdin: true,
      consoleSize: { height: 24, width: 80 },
      config: { Tty: true, OpenStdin: true },
      beforeStart: async () => {
        conn = await h.driver.attach('tty');
        conn.on('stdout', (b: Buffer) => {
          out += b.toString();
        });
      },
    });
    await eventually(`24 80 in ${JSON.stringify(out)}`, () => out.includes('24 80'));
    await h.driver.resize('tty', 40, 100);
    conn!.writeStdin(Buffer.from('\n'));
    await eventually(`40 100 in ${JSON.stringify(out)}`, () => out.includes('40 100'));
    assert.equal((await h.waitExit('tty')).exitCode, 5);
    assert.match(out, /\/dev\/pts\/0/);
  });

  it('reopens its output file when asked; the log writer loses nothing across reopens', async () => {
    const { logPath } = await h.run('rot', ['sh', '-c', 'while read l; do echo "$l"; done'], { stdin: true });
    let reopens = 0;
    const w = await copier(logPath, {
      reopenAfter: 1,
      reopen: async () => {
        reopens++;
        await h.driver.reopenLog('rot');
      },
    });
    const conn = await h.driver.attach('rot');
    const json = async () => (await readFile(`${logPath}.json`, 'utf8').catch(() => '')) as string;
    conn.writeStdin(Buffer.from('before\n'));
    await eventually('first line', async () => (await json()).includes('before'));
    // conmon made a new, empty file; the writer read the old one to its end and dropped its link
    await eventually(
      'reopen',
      async () => reopens === 1 && !(await readFile(logPath, 'utf8')).includes('before'),
    );
    await eventually('old file released', () =>
      access(`${logPath}.old`).then(
        () => false,
        () => true,
      ),
    );
    conn.writeStdin(Buffer.from('after\n'));
    await eventually('second line', async () => (await json()).includes('after'));
    conn.close();
    await h.driver.signal('rot', 9);
    await h.waitExit('rot');
    await w.finish();
    const out: string[] = [];
    for await (const m of readLogs(`${logPath}.json`, { stdout: true, stderr: true }))
      out.push(m.line.toString());
    assert.deepEqual(out, ['before\n', 'after\n']);
  });

  it('follows a running container log until it stops', async () => {
    const { logPath } = await h.run('follow', [
      'sh',
      '-c',
      'for i in 1 2 3; do echo line$i; sleep 0.1; done',
    ]);
    const w = await copier(logPath, { reopen: () => h.driver.reopenLog('follow') });
    const stop = new AbortController();
    const lines: string[] = [];
    const reader = (async () => {
      for await (const m of readLogs(`${logPath}.json`, {
        follow: true,
        stdout: true,
        stderr: true,
        stopFollowing: stop.signal,
      })) {
        lines.push(m.line.toString());
      }
    })();
    await eventually('first line while running', () => lines.length >= 1);
    await h.waitExit('follow');
    await w.finish();
    stop.abort();
    await reader;
    assert.deepEqual(lines, ['line1\n', 'line2\n', 'line3\n']);
  });

  it('records an OOM kill', async () => {
    await h.run('oom', ['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=64M', 'count=1'], {
      hostConfig: { Memory: 16 << 20, MemorySwap: 16 << 20 },
    });
    const s = await h.waitExit('oom');
    assert.equal(s.exitCode, 137);
    assert.equal(s.oomKilled, true);
  });

  it('confines the container with the default seccomp profile unless unconfined', async () => {
    const { logPath } = await h.run('sc1', ['grep', 'Seccomp:', '/proc/self/status']);
    await h.waitExit('sc1');
    assert.match(await readFile(logPath, 'utf8'), /Seccomp:\t2/);
    const r = await h.run('sc2', ['grep', 'Seccomp:', '/proc/self/status'], {
      hostConfig: { SecurityOpt: ['seccomp=unconfined'] },
    });
    await h.waitExit('sc2');
    assert.match(await readFile(r.logPath, 'utf8'), /Seccomp:\t0/);
  });

  it('attaches through a bundle path longer than a socket address holds', async () => {
    const id = 'a'.repeat(64);
    const bundleDir = join(h.dir, 'a-rather-long-directory-name-for-bundles', id, 'bundle');
    assert.ok(bundleDir.length + '/attach'.length > 107);
    let got: Promise<{ stdout: string; stderr: string }> | undefined;
    await h.run(id, ['echo', 'long path'], {
      bundleDir,
      beforeStart: async () => {
        got = collect(await h.driver.attach(id));
      },
    });
    assert.equal((await got!).stdout, 'long path\n');
    assert.equal((await h.waitExit(id)).exitCode, 0);
  });

  it('starts a container again after it exited (restart without delete)', async () => {
    await h.run('again', ['sh', '-c', 'exit 1']);
    assert.equal((await h.waitExit('again')).exitCode, 1);
    await h.run('again', ['sh', '-c', 'exit 2']);
    assert.equal((await h.waitExit('again')).exitCode, 2);
    assert.equal((await h.driver.exitStatus('again'))?.exitCode, 2);
  });

  it('reads stats from the cgroups and updates limits of a running container', async () => {
    const d = h.driver as Runtime;
    await h.run('stats', ['sh', '-c', 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 100'], {
      hostConfig: { Memory: 64 << 20, PidsLimit: 50 },
    });
    let s = await d.stats('stats');
    assert.ok(s);
    assert.equal(s.pids.limit, 50);
    assert.ok(s.pids.current >= 1);
    assert.equal(s.memory.limit, 64 << 20);
    assert.ok(s.memory.usage > 0);
    assert.ok(s.cpu.systemUsage > 0 && s.cpu.onlineCpus >= 1);
    assert.ok(typeof s.memory.stats.rss === 'number' || typeof s.memory.stats.anon === 'number');
    await eventually('cpu usage', async () => ((await d.stats('stats'))?.cpu.totalUsage ?? 0) > 0);
    await d.update('stats', await buildResources({ Memory: 32 << 20, MemorySwap: 64 << 20, CpuShares: 256 }));
    s = await d.stats('stats');
    assert.equal(s?.memory.limit, 32 << 20);
    await h.driver.signal('stats', 9);
    await h.waitExit('stats');
    await h.driver.delete('stats');
    await assert.rejects(d.stats('stats'), (err: unknown) => isKind(err, 'NotFound'));
  });

  it('deletes a stopped container whose processes outlived its init (host PID namespace)', async () => {
    await h.run('orphan', ['sh', '-c', 'sleep 100 & exit 0'], { hostConfig: { PidMode: 'host' } });
    assert.equal((await h.waitExit('orphan')).exitCode, 0);
    const procs = (await readFile('/sys/fs/cgroup/pids/berth-test/orphan/cgroup.procs', 'utf8')).trim();
    assert.notEqual(procs, '', 'the background sleep is still in the cgroup');
    await h.driver.delete('orphan');
    await assert.rejects(access('/sys/fs/cgroup/pids/berth-test/orphan'), { code: 'ENOENT' });
    assert.equal(await h.driver.state('orphan'), null);
  });

  it('deletes a created container that never ran', async () => {
    await assert.rejects(
      h.run('never', ['true'], {
        beforeStart: async () => {
          assert.equal((await h.driver.state('never'))?.status, 'created');
          throw new Error('client went away');
        },
      }),
      /client went away/,
    );
    assert.equal(await h.driver.state('never'), null);
    await assert.rejects(access('/sys/fs/cgroup/memory/berth-test/never'), { code: 'ENOENT' });
  });

  it('fails to start a missing command with the runtime message, and cleans up', async () => {
    await assert.rejects(h.run('missing', ['/nonexistent']), /OCI runtime create failed: .*nonexistent/);
    assert.equal(await h.driver.state('missing'), null);
  });

  it('survives a new driver (live restore): state, attach, kill, exit events', async () => {
    const { pid } = await h.run('live', ['sh', '-c', 'while read l; do echo "got $l"; done; exit 9'], {
      stdin: true,
      stdinOnce: true,
    });
    await h.run('gone', ['sh', '-c', 'read x; exit 4'], { stdin: true });
    // the engine goes away
    await h.driver.close();
    const gone = await h.driver.attach('gone');
    gone.writeStdin(Buffer.from('x\n'));
    gone.close();
    await eventually('exit while the engine is down', () =>
      access(join(h.execRoot, 'exits', 'gone')).then(
        () => true,
        () => false,
      ),
    );

    // a new engine process finds them
    const d2 = await h.newDriver();
    const exits: [string, number][] = [];
    d2.events.on('exit', (id: string, s: { exitCode: number }) => exits.push([id, s.exitCode]));
    await eventually('exit event of the container that exited while down', () =>
      exits.some(([id]) => id === 'gone'),
    );
    assert.deepEqual(
      exits.find(([id]) => id === 'gone'),
      ['gone', 4],
    );
    assert.deepEqual(await d2.state('live'), { status: 'running', pid });
    const conn = await d2.attach('live');
    const got = collect(conn, (s) => s.includes('got ping'));
    conn.writeStdin(Buffer.from('ping\n'));
    assert.equal((await got).stdout, 'got ping\n');
    conn.closeStdin();
    await eventually('exit event after restore', () => exits.some(([id]) => id === 'live'));
    assert.deepEqual(
      exits.find(([id]) => id === 'live'),
      ['live', 9],
    );
    assert.equal((await d2.exitStatus('live'))?.exitCode, 9);
    // reported once: a third driver does not report them again
    const d3 = await h.newDriver();
    const again: string[] = [];
    d3.events.on('exit', (id: string) => again.push(id));
    await sleep(100);
    assert.deepEqual(again, []);
  });
});
