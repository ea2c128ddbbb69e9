import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, stat as stat_, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isKind } from '../../../../src/common/errors.js';
import { Logger } from '../../../../src/common/log.js';
import { parseCgroupLayout, prepareHybridForCrun } from '../../../../src/engine/runtime/driver/cgroups.js';
import { capRlimits } from '../../../../src/engine/runtime/driver/conmon.driver.js';
import {
  deleteStopped,
  runtimeStateExists,
  sameProcessAlive,
} from '../../../../src/engine/runtime/driver/fast-delete.js';
import { OciCli, runtimeMessage } from '../../../../src/engine/runtime/driver/oci-cli.js';
import type {
  ExecMonitor,
  ExecShim,
  ExecShimOptions,
  MonitorStart,
  ProcessRunner,
  RunResult,
} from '../../../../src/engine/runtime/driver/process.js';
import { parseBlkio, parseKeyValues, systemCpuUsage } from '../../../../src/engine/runtime/driver/stats.js';
import { createRuntime } from '../../../../src/engine/runtime/index.js';
import type { ExitStatus, StartOptions } from '../../../../src/engine/runtime/runtime.types.js';
import { ociSpec } from '../../../helpers/oci.js';

/** Records calls; answers from a script. */
class FakeRunner implements ProcessRunner {
  calls: { file: string; args: string[] }[] = [];
  monitors: { file: string; args: string[]; cwd: string }[] = [];
  answers = new Map<string, RunResult>();
  monitorResult: MonitorStart = { pid: 4242 };

  async run(file: string, args: string[]): Promise<RunResult> {
    this.calls.push({ file, args });
    const verb = args.find((a) => !a.startsWith('--root'));
    return this.answers.get(verb ?? '') ?? { code: 0, stdout: '', stderr: '' };
  }

  async startMonitor(file: string, args: string[], cwd: string): Promise<MonitorStart> {
    this.monitors.push({ file, args, cwd });
    return this.monitorResult;
  }

  execs: { args: string[]; attach: boolean }[] = [];
  async startExecMonitor(
    _file: string,
    args: string[],
    _cwd: string,
    opts: { attach: boolean; ready?: () => Promise<void> },
  ): Promise<ExecMonitor> {
    this.execs.push({ args, attach: opts.attach });
    await opts.ready?.();
    return { pid: 77, exit: Promise.resolve({ code: 3 }) };
  }
}

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-driver-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function driver(runner: FakeRunner, name: 'runc' | 'crun' = 'runc') {
  const sub = await mkdtemp(join(dir, 'd-'));
  const d = await createRuntime({
    name,
    execRoot: join(sub, 'exec'),
    dataRoot: join(sub, 'data'),
    log: new Logger('error'),
    runtimePath: `/usr/bin/${name}`,
    conmonPath: '/usr/bin/conmon',
    runner,
    mounter: { mount: async () => undefined },
  });
  return { d, sub };
}

function startOpts(sub: string, over: Partial<StartOptions> = {}): StartOptions {
  return {
    id: 'abc',
    bundleDir: join(sub, 'bundle'),
    spec: ociSpec({
      process: { args: ['true'], rlimits: [{ type: 'RLIMIT_CORE', soft: -1, hard: -1 }] },
      linux: { cgroupsPath: '/berth/abc' },
    }),
    terminal: false,
    stdin: false,
    stdinOnce: false,
    logPath: join(sub, 'abc.log'),
    ...over,
  };
}

const flag = (args: string[], name: string) => args[args.indexOf(name) + 1];

describe('conmon driver (fake processes)', () => {
  it('starts conmon with the bundle, log, exit dir and runtime root, then runtime start', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    const order: string[] = [];
    const res = await d.start(
      startOpts(sub, {
        logSizeMax: 1000,
        beforeStart: async () => {
          order.push(
            `beforeStart after ${runner.monitors.length} monitor(s), ${runner.calls.length} call(s)`,
          );
        },
      }),
    );
    assert.deepEqual(res, { pid: 4242 });
    const m = runner.monitors[0]!;
    assert.equal(m.file, '/usr/bin/conmon');
    assert.equal(flag(m.args, '-r'), '/usr/bin/runc');
    assert.equal(flag(m.args, '-b'), join(sub, 'bundle'));
    assert.equal(flag(m.args, '-c'), 'abc');
    assert.equal(flag(m.args, '-l'), `k8s-file:${join(sub, 'abc.log')}`);
    assert.equal(flag(m.args, '--exit-dir'), join(sub, 'exec', 'exits'));
    assert.equal(flag(m.args, '--persist-dir'), join(sub, 'data', 'runtime', 'abc'));
    assert.equal(flag(m.args, '--runtime-arg'), `--root=${join(sub, 'exec', 'runc')}`);
    assert.equal(flag(m.args, '--log-size-max'), '1000');
    assert.ok(m.args.includes('--full-attach'));
    assert.ok(!m.args.includes('-t') && !m.args.includes('-i'));
    assert.deepEqual(order, ['beforeStart after 1 monitor(s), 0 call(s)']);
    assert.deepEqual(runner.calls.at(-1)!.args, [`--root=${join(sub, 'exec', 'runc')}`, 'start', 'abc']);
    const config = await readFile(join(sub, 'bundle', 'config.json'), 'utf8');
    assert.match(config, /"soft":18446744073709551615/);
    assert.equal(JSON.parse(config.replaceAll('18446744073709551615', '-1')).process.terminal, false);
    await d.close();
  });

  it('writes no output without a log path (LogConfig none); monitorLogPath is in the persist dir', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    await d.start(startOpts(sub, { logPath: undefined, logSizeMax: 1000 }));
    const args = runner.monitors[0]!.args;
    assert.equal(flag(args, '-l'), 'none');
    assert.ok(!args.includes('--log-size-max'));
    assert.equal(d.monitorLogPath('abc'), join(sub, 'data', 'runtime', 'abc', 'output.log'));
    await d.close();
  });

  it('passes -t, -i and --leave-stdin-open as the stdio options ask', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    await d.start(startOpts(sub, { terminal: true, stdin: true, consoleSize: { height: 5, width: 7 } }));
    await d.start(startOpts(sub, { id: 'i1', stdin: true, stdinOnce: false }));
    await d.start(startOpts(sub, { id: 'i2', stdin: true, stdinOnce: true }));
    const [t, i1, i2] = runner.monitors.map((m) => m.args);
    assert.ok(t!.includes('-t') && !t!.includes('-i'));
    assert.ok(i1!.includes('-i') && i1!.includes('--leave-stdin-open'));
    assert.ok(i2!.includes('-i') && !i2!.includes('--leave-stdin-open'));
    const config = JSON.parse(
      (await readFile(join(sub, 'bundle', 'config.json'), 'utf8')).replaceAll('18446744073709551615', '-1'),
    );
    assert.equal(config.process.terminal, false, 'the last start (i2) is not a terminal');
    await d.close();
  });

  it('reports a failed runtime create with its message and deletes the leftovers', async () => {
    const runner = new FakeRunner();
    runner.monitorResult = { pid: -1, message: 'exec: "nope": executable file not found in $PATH' };
    const { d, sub } = await driver(runner);
    await assert.rejects(d.start(startOpts(sub)), /OCI runtime create failed: exec: "nope"/);
    assert.deepEqual(runner.calls.at(-1)!.args.slice(1), ['delete', '--force', 'abc']);
    await d.close();
  });

  it('deletes the container when beforeStart fails', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    await assert.rejects(
      d.start(
        startOpts(sub, {
          beforeStart: async () => {
            throw new Error('attach failed');
          },
        }),
      ),
      /attach failed/,
    );
    assert.deepEqual(
      runner.calls.map((c) => c.args[1]),
      ['delete'],
    );
    await d.close();
  });

  it('reads exit status and OOM marks from the persist dir; reports exits once', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    await d.start(startOpts(sub));
    assert.equal(await d.exitStatus('abc'), null);
    const events: [string, ExitStatus][] = [];
    d.events.on('exit', (id: string, s: ExitStatus) => events.push([id, s]));
    // what conmon does when the container ends
    const persist = join(sub, 'data', 'runtime', 'abc');
    await writeFile(join(persist, 'oom'), '');
    await writeFile(join(persist, 'exit'), '137');
    await writeFile(join(sub, 'exec', 'exits', 'abc.XYZ123'), '137');
    const { rename } = await import('node:fs/promises');
    await rename(join(sub, 'exec', 'exits', 'abc.XYZ123'), join(sub, 'exec', 'exits', 'abc'));
    for (let i = 0; i < 100 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(events.length, 1);
    assert.equal(events[0]![0], 'abc');
    assert.equal(events[0]![1].exitCode, 137);
    assert.equal(events[0]![1].oomKilled, true);
    await stat(join(persist, 'exit-reported'));
    await d.delete('abc');
    assert.equal(await d.exitStatus('abc'), null);
    await assert.rejects(stat(persist), { code: 'ENOENT' });
    await d.close();
  });

  it('refuses resize and reopen of a container without a monitor', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    await d.start(startOpts(sub));
    await assert.rejects(d.resize('abc', 10, 10), (err: unknown) => isKind(err, 'Conflict'));
    await assert.rejects(d.reopenLog('nope'), (err: unknown) => isKind(err, 'NotFound'));
    await assert.rejects(d.attach('nope'), (err: unknown) => isKind(err, 'NotFound'));
    await d.close();
  });
});

describe('runtime CLI errors', () => {
  it('takes the message out of the runtime log framing', () => {
    assert.equal(
      runtimeMessage(
        'time="2026-11-23T20:00:00Z" level=warning msg="cgroup v1 is deprecated"\n' +
          'time="2026-11-23T20:00:00Z" level=error msg="runc create failed: unable to start container process: exec: \\"/nope\\": stat /nope: no such file or directory"\n',
      ),
      'runc create failed: unable to start container process: exec: "/nope": stat /nope: no such file or directory',
    );
    assert.equal(
      runtimeMessage('{"msg":"executable file not found in $PATH","level":"error"}'),
      'executable file not found in $PATH',
    );
    assert.equal(runtimeMessage('crun: open: Permission denied\n'), 'crun: open: Permission denied');
    assert.equal(runtimeMessage(''), '');
  });

  it('maps runc and crun messages to error kinds', async () => {
    const runner = new FakeRunner();
    const cli = new OciCli('/usr/sbin/runc', '/run/x', runner);
    runner.answers.set('state', {
      code: 1,
      stdout: '',
      stderr: 'time="x" level=error msg="container does not exist"',
    });
    assert.equal(await cli.state('gone'), null);
    runner.answers.set('kill', {
      code: 1,
      stdout: '',
      stderr: 'time="x" level=error msg="container not running"',
    });
    await assert.rejects(cli.kill('c', 9), (err: unknown) => isKind(err, 'Conflict'));
    runner.answers.set('pause', {
      code: 1,
      stdout: '',
      stderr: 'error opening file `/run/crun/c/status`: No such file or directory',
    });
    await assert.rejects(cli.pause('c'), (err: unknown) => isKind(err, 'NotFound'));
    runner.answers.set('resume', { code: 1, stdout: '', stderr: 'something odd' });
    await assert.rejects(
      cli.resume('c'),
      (err: unknown) => isKind(err, 'System') && /something odd/.test(String(err)),
    );
    runner.answers.set('state', { code: 0, stdout: '{"status":"running","pid":12}', stderr: '' });
    assert.deepEqual(await cli.state('c'), { status: 'running', pid: 12 });
    runner.answers.set('ps', { code: 0, stdout: '[12,13]\n', stderr: '' });
    assert.deepEqual(await cli.ps('c'), [12, 13]);
  });
});

describe('cgroups for crun', () => {
  const hybrid = [
    'tmpfs /sys/fs/cgroup tmpfs rw 0 0',
    'cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0',
    'cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0',
  ].join('\n');

  it('recognises hybrid, v1 and v2 layouts', () => {
    assert.deepEqual(parseCgroupLayout(hybrid, 'hugetlb\n'), { mode: 'hybrid', v2Controllers: ['hugetlb'] });
    assert.deepEqual(parseCgroupLayout('cgroup2 /sys/fs/cgroup cgroup2 rw 0 0', 'cpu io'), {
      mode: 'v2',
      v2Controllers: [],
    });
    assert.deepEqual(parseCgroupLayout('cgroup /sys/fs/cgroup/cpu cgroup rw 0 0', ''), {
      mode: 'v1',
      v2Controllers: [],
    });
  });

  it('mounts v2-held controllers as v1, or explains why crun cannot run', async () => {
    const mounted: string[] = [];
    let controllers = 'hugetlb';
    const read = async () => parseCgroupLayout(hybrid, controllers);
    const moved = await prepareHybridForCrun(read, {
      mount: async (type, _source, target, options) => {
        mounted.push(`${type} ${target} ${options}`);
        controllers = '';
      },
    });
    assert.deepEqual(moved, ['hugetlb']);
    assert.deepEqual(mounted, ['cgroup /sys/fs/cgroup/hugetlb hugetlb']);
    controllers = 'hugetlb';
    await assert.rejects(
      prepareHybridForCrun(read, {
        mount: async () => {
          throw new Error('permission denied');
        },
      }),
      /crun cannot run on hybrid cgroups while the hugetlb controller is on the cgroup v2 hierarchy.*permission denied.*Use runc/,
    );
  });
});

describe('exec sessions (fake processes)', () => {
  it('starts conmon in exec mode with the process of the container spec', async () => {
    const runner = new FakeRunner();
    const { d, sub } = await driver(runner);
    await d.start(startOpts(sub));
    let ready = false;
    const p = await d.exec({
      id: 'abc',
      execId: 'x1',
      config: { Cmd: ['ls'], Tty: true },
      stdin: true,
      beforeStart: async () => {
        ready = true;
      },
    });
    assert.equal(p.pid, 77);
    assert.deepEqual(await p.exited, { exitCode: 3 });
    assert.ok(ready);
    const { args, attach } = runner.execs[0]!;
    assert.equal(attach, true);
    assert.ok(
      args.includes('-e') && args.includes('--exec-attach') && args.includes('-t') && !args.includes('-i'),
    );
    assert.equal(flag(args, '-c'), 'abc');
    assert.equal(flag(args, '-u'), 'x1');
    assert.equal(flag(args, '-l'), 'none');
    assert.equal(flag(args, '--exec-process-spec'), join(sub, 'exec', 'execs', 'x1', 'process.json'));
    await d.exec({ id: 'abc', execId: 'x2', config: { Cmd: ['cat'] }, stdin: true });
    const second = runner.execs[1]!;
    assert.equal(second.attach, false);
    assert.ok(second.args.includes('-i') && !second.args.includes('--exec-attach'));
    await d.close();
  });
});

/** A runner with berth-sys's exec shim: the runtime's exec runs without conmon. */
class ShimRunner extends FakeRunner {
  shims: { file: string; args: string[]; o: ExecShimOptions }[] = [];
  /** The runtime's answer: a pid, or -1 with what it wrote to its log. */
  outcome: { pid: number } | { pid: -1; log: string } = { pid: 55 };
  async startExecShim(file: string, args: string[], o: ExecShimOptions): Promise<ExecShim> {
    this.shims.push({ file, args, o });
    const outcome = this.outcome;
    if (outcome.pid < 0 && 'log' in outcome)
      await writeFile(args.find((a) => a.startsWith('--log='))?.slice(6) ?? '', outcome.log);
    const listeners: ((b: Buffer | null) => void)[] = [];
    return {
      onOutput: (_fd, l) => {
        listeners.push(l);
        setImmediate(() => l(null));
      },
      started: Promise.resolve(outcome.pid),
      exit: Promise.resolve(outcome.pid > 0 ? { code: 4 } : { code: -1, message: 'exec failed' }),
      writeStdin: async () => undefined,
      closeStdin: () => undefined,
      close: () => undefined,
    };
  }
}

describe('exec sessions without conmon (fake exec shim)', () => {
  it("runs the runtime's exec --detach for a non-TTY exec, conmon for a TTY", async () => {
    const runner = new ShimRunner();
    const { d, sub } = await driver(runner, 'crun');
    await d.start(startOpts(sub));
    let attached = false;
    const p = await d.exec({
      id: 'abc',
      execId: 'y1',
      config: { Cmd: ['ls'] },
      stdin: true,
      beforeStart: async () => {
        const conn = await d.attachExec('y1');
        attached = conn.listenerCount('close') === 0;
      },
    });
    assert.ok(attached);
    assert.equal(p.pid, 55);
    assert.deepEqual(await p.exited, { exitCode: 4 });
    const { file, args, o } = runner.shims[0]!;
    const base = join(sub, 'exec', 'execs', 'y1');
    assert.equal(file, '/usr/bin/crun');
    assert.deepEqual(args, [
      `--root=${join(sub, 'exec', 'crun')}`,
      `--log=${base}.log`,
      '--log-format=json',
      'exec',
      '--detach',
      '--pid-file',
      `${base}.pid`,
      '--process',
      `${base}.json`,
      'abc',
    ]);
    assert.deepEqual(o, {
      cwd: join(sub, 'exec', 'execs'),
      pidFile: `${base}.pid`,
      cleanup: [`${base}.json`, `${base}.log`],
      stdin: true,
    });
    // the process's spec as for conmon: the container's, with the exec's command
    assert.deepEqual((JSON.parse(await readFile(`${base}.json`, 'utf8')) as { args: string[] }).args, ['ls']);
    await d.exec({ id: 'abc', execId: 'y2', config: { Cmd: ['sh'], Tty: true }, stdin: true });
    assert.equal(runner.shims.length, 1);
    assert.equal(runner.execs.length, 1);
    await d.close();
  });

  it("fails with the runtime's log message in runc's words, a conflict for a stopped container", async () => {
    const runner = new ShimRunner();
    const { d, sub } = await driver(runner, 'crun');
    await d.start(startOpts(sub));
    runner.outcome = {
      pid: -1,
      log: '{"msg":"executable file `nope` not found in $PATH: No such file or directory","level":"error"}\n',
    };
    await assert.rejects(
      d.exec({ id: 'abc', execId: 'y3', config: { Cmd: ['nope'] }, stdin: false }),
      /^SystemError: OCI runtime exec failed: unable to start container process: exec: "nope": executable file not found in \$PATH$/,
    );
    runner.outcome = { pid: -1, log: '{"msg":"container `abc` is not running","level":"error"}\n' };
    await assert.rejects(
      d.exec({ id: 'abc', execId: 'y4', config: { Cmd: ['true'] }, stdin: false }),
      (err: unknown) => isKind(err, 'Conflict'),
    );
    // after a failure nothing of the session is left (after a start, the shim removes its files)
    assert.deepEqual(await readdir(join(sub, 'exec', 'execs')), []);
    await d.close();
  });
});

describe('cgroup stats parsing', () => {
  it('parses key/value files, blkio lines and /proc/stat', () => {
    assert.deepEqual(
      parseKeyValues('cache 4096\nrss 53248\n\nhierarchical_memory_limit 9007199254740991\n'),
      {
        cache: 4096,
        rss: 53248,
        hierarchical_memory_limit: 9007199254740991,
      },
    );
    assert.deepEqual(parseBlkio('8:0 Read 4096\n8:0 Write 0\nTotal 4096\n'), [
      { major: 8, minor: 0, op: 'Read', value: 4096 },
      { major: 8, minor: 0, op: 'Write', value: 0 },
    ]);
    assert.equal(
      systemCpuUsage('cpu  100 0 50 800 10 0 5 0 0 0\ncpu0 1 2 3\n'),
      (100 + 50 + 800 + 10 + 5) * 1e7,
    );
  });
});

describe('rlimits at start', () => {
  it('never passes an rlimit above the daemon hard limit', () => {
    const limits = new Map([
      ['nofile', { soft: 1024, hard: 20000 }],
      ['core', { soft: 0, hard: -1 }],
    ]);
    assert.deepEqual(
      capRlimits(
        [
          { type: 'RLIMIT_NOFILE', soft: 1048576, hard: 1048576 },
          { type: 'RLIMIT_CORE', soft: -1, hard: -1 },
          { type: 'RLIMIT_NOFILE', soft: -1, hard: 100 },
        ],
        limits,
      ),
      [
        { type: 'RLIMIT_NOFILE', soft: 20000, hard: 20000 },
        { type: 'RLIMIT_CORE', soft: -1, hard: -1 },
        { type: 'RLIMIT_NOFILE', soft: 100, hard: 100 },
      ],
    );
  });
});

describe('stale exec sessions', () => {
  it('removes exec session directories whose conmon is gone when a driver starts', async () => {
    const sub = await mkdtemp(join(dir, 'stale-'));
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(sub, 'exec', 'execs', 'gone'), { recursive: true });
    await writeFile(join(sub, 'exec', 'execs', 'gone', 'conmon.pid'), '999999999');
    await mkdir(join(sub, 'exec', 'execs', 'nopid'), { recursive: true });
    const d = await createRuntime({
      name: 'runc',
      execRoot: join(sub, 'exec'),
      dataRoot: join(sub, 'data'),
      log: new Logger('error'),
      runtimePath: '/usr/bin/runc',
      conmonPath: '/usr/bin/conmon',
      runner: new FakeRunner(),
    });
    await assert.rejects(stat(join(sub, 'exec', 'execs', 'gone')), { code: 'ENOENT' });
    await assert.rejects(stat(join(sub, 'exec', 'execs', 'nopid')), { code: 'ENOENT' });
    await d.close();
  });
});

describe('in-process delete of stopped containers', () => {
  it('tells a live process from a reused pid', async () => {
    const stat = await readFile('/proc/self/stat', 'utf8');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
    assert.equal(await sameProcessAlive(process.pid, start), true);
    assert.equal(await sameProcessAlive(process.pid, `${start}1`), false);
    assert.equal(await sameProcessAlive(999999999, start), false);
  });

  it('leaves unknown or running state to the runtime', async () => {
    const root = await mkdtemp(join(dir, 'state-'));
    assert.equal(await deleteStopped('runc', root, 'missing'), false);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(root, 'live'));
    const stat = await readFile('/proc/self/stat', 'utf8');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
    await writeFile(
      join(root, 'live', 'state.json'),
      JSON.stringify({ init_process_pid: process.pid, init_process_start: Number(start), cgroup_paths: {} }),
    );
    assert.equal(await deleteStopped('runc', root, 'live'), false);
    await stat_(join(root, 'live'));
    await mkdir(join(root, 'dead'));
    await writeFile(
      join(root, 'dead', 'state.json'),
      JSON.stringify({
        init_process_pid: 999999999,
        init_process_start: 1,
        cgroup_paths: { x: join(root, 'no-cgroup') },
      }),
    );
    assert.equal(await deleteStopped('runc', root, 'dead'), true);
    await assert.rejects(stat_(join(root, 'dead')), { code: 'ENOENT' });
    assert.equal(await deleteStopped('youki', root, 'dead'), false);
  });

  it('tells whether the runtime keeps state for a container (delete needs no runtime call without)', async () => {
    const root = await mkdtemp(join(dir, 'state-'));
    assert.equal(await runtimeStateExists(root, 'missing'), false);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(root, 'half'));
    assert.equal(await runtimeStateExists(root, 'half'), true);
  });
});
