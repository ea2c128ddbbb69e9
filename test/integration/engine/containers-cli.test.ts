import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { busyboxTarball } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { runPty } from '../../helpers/pty.js';

/** busybox:latest in the engine, imported from the host's busybox-static when missing. */
async function ensureBusybox(engine: TestEngine): Promise<void> {
  if ((await engine.docker(['image', 'inspect', 'busybox:latest'])).code === 0) return;
  await engine.dockerOk([
    'import',
    '--change',
    'CMD ["sh"]',
    '--change',
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    await busyboxTarball(),
    'busybox:latest',
  ]);
}

/** The docker CLI (28) against a real engine: every container command. */

/** `docker run -it ... sh`: the size, echo, a resize, Ctrl-D ends it. */
const TTY_SCENARIO = String.raw`
resize(33, 101)
read_until(b'# ')
os.write(fd, b'stty size\r')
read_until(b'33 101')
os.write(fd, b'echo ab""cd\r')
read_until(b'abcd\r\n')
resize(40, 120)
time.sleep(0.5)
os.write(fd, b'stty size\r')
read_until(b'40 120')
# Wait for the next prompt: busybox's shell then asks the terminal for the cursor position and
# swallows input that arrives before it gives up waiting for the answer.
read_until(b'40 120\r\n/ # ')
time.sleep(0.5)
echoed = b'echo ab""cd' in buf
os.write(fd, b'\x04')
finish(echoed=echoed)
`;

/** `docker attach`: a command runs, then ctrl-p ctrl-q detaches. */
const DETACH_SCENARIO = String.raw`
end = time.time() + 15
while time.time() < end and termios.tcgetattr(fd)[3] & termios.ECHO:
    time.sleep(0.05)
time.sleep(0.2)
os.write(fd, b'echo in-attach\r')
# The command's output, not just the terminal's echo of the typed line.
pump(b'in-attach\r\nin-attach\r\n')
time.sleep(0.3)
os.write(fd, b'\x10\x11')
finish()
`;

describe('containers with the docker CLI', () => {
  let engine: TestEngine;
  const docker = (...args: string[]) => engine.docker(args);
  const ok = (...args: string[]) => engine.dockerOk(args);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('run prints output and returns the exit code; run --rm removes', async () => {
    const r = await docker('run', '--name', 'hello', 'busybox', 'echo', 'hello');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'hello\n');
    const code = await docker('run', '--rm', 'busybox', 'sh', '-c', 'echo out; echo err >&2; exit 3');
    assert.equal(code.code, 3);
    assert.equal(code.stdout, 'out\n');
    assert.equal(code.stderr, 'err\n');
    const rm = await docker('run', '--rm', 'busybox', 'echo', 'hello');
    assert.equal(rm.stdout, 'hello\n');
    const names = await ok('ps', '-a', '--format', '{{.Names}}');
    assert.deepEqual(names.split('\n'), ['hello']);
    await ok('rm', 'hello');
  });

  it('run -i with piped stdin reaches the container and ends on EOF', async () => {
    const r = await engine.docker(['run', '-i', '--rm', 'busybox', 'cat'], { input: 'x\ny\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'x\ny\n');
    const wc = await engine.docker(['run', '-i', '--rm', 'busybox', 'wc', '-c'], {
      input: 'a'.repeat(100000),
    });
    assert.equal(wc.stdout.trim(), '100000');
  });

  it('run -it: TTY, echo, window size, Ctrl-D ends the shell', async () => {
    const r = await runPty(
      engine,
      ['run', '-it', '--rm', '--name', 'tty-test', 'busybox', 'sh'],
      TTY_SCENARIO,
    );
    assert.equal(r.error, undefined, r.buf);
    assert.ok(r.echoed, r.buf);
    assert.equal(r.status, 0, r.buf);
    const left = await ok('ps', '-aq', '--filter', 'name=tty-test');
    assert.equal(left, '');
  });

  it('attach to a TTY container and detach with ctrl-p ctrl-q: the container keeps running', async () => {
    await ok('run', '-dit', '--name', 'detachable', 'busybox', 'sh');
    const r = await runPty(engine, ['attach', 'detachable'], DETACH_SCENARIO);
    assert.match(r.buf, /in-attach/);
    assert.match(r.buf, /read escape sequence/);
    // docker CLI 28 exits 1 after a detach, with dockerd too
    assert.equal(r.status, 1, r.buf);
    assert.equal(await ok('inspect', '-f', '{{.State.Running}}', 'detachable'), 'true');
    await ok('rm', '-f', 'detachable');
  });

  it('a TTY container with StdinOnce can be attached again after a detach', async () => {
    // what `docker run -it` makes (OpenStdin, StdinOnce, Tty), started without a client
    const created = await engine.request('POST', '/v1.44/containers/create?name=reattach', {
      body: { Image: 'busybox', Cmd: ['sh'], Tty: true, OpenStdin: true, StdinOnce: true, AttachStdin: true },
    });
    assert.equal(created.status, 201, created.text());
    await ok('start', 'reattach');
    for (const round of [1, 2]) {
      const r = await runPty(engine, ['attach', 'reattach'], DETACH_SCENARIO);
      assert.match(r.buf, /in-attach\r\nin-attach/, `round ${round}: ${r.buf}`);
      assert.match(r.buf, /read escape sequence/);
    }
    assert.equal(await ok('inspect', '-f', '{{.State.Running}}', 'reattach'), 'true');
    await ok('rm', '-f', 'reattach');
  });

  it('stdin without a TTY is passed through as it is (ctrl-p ctrl-q bytes too)', async () => {
    const r = await engine.docker(['run', '-i', '--rm', 'busybox', 'od', '-An', '-c'], {
      input: Buffer.from('A\x10\x11B'),
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /A\s+020\s+021\s+B/);
  });

  it('a health check interval longer than setTimeout allows (720h) does not probe at once', async () => {
    await ok(
      'run',
      '-d',
      '--name',
      'slowprobe',
      '--health-cmd',
      'true',
      '--health-interval',
      '720h',
      'busybox',
      'sleep',
      '60',
    );
    await new Promise((r) => setTimeout(r, 1500));
    const health = JSON.parse(await ok('inspect', '-f', '{{json .State.Health}}', 'slowprobe')) as {
      Status: string;
      Log: unknown[];
    };
    assert.equal(health.Status, 'starting');
    assert.equal(health.Log.length, 0);
    await ok('rm', '-f', 'slowprobe');
  });

  it('start -ai with piped input, run after run', async () => {
    await ok('create', '-i', '--name', 'again', 'busybox', 'sh', '-c', 'cat; exit 6');
    for (const run of ['run1', 'run2', 'run3']) {
      const r = await engine.docker(['start', '-ai', 'again'], { input: `${run}\n`, timeoutMs: 20_000 });
      assert.equal(r.code, 6, `${run}: ${r.stderr}`);
      assert.equal(r.stdout, `${run}\n`);
    }
    await ok('rm', 'again');
  });

  it('run -d, ps with filters, inspect, logs (--tail, -t, --since, -f)', async () => {
    const id = await ok(
      'run',
      '-d',
      '--name',
      'web',
      '--label',
      'team=a',
      'busybox',
      'sh',
      '-c',
      'for i in 1 2 3; do echo line$i; done; sleep 600',
    );
    assert.match(id, /^[a-f0-9]{64}$/);
    await ok('create', '--name', 'idle', '--label', 'team=b', 'busybox', 'true');
    assert.equal(await ok('ps', '--format', '{{.Names}}'), 'web');
    assert.equal(await ok('ps', '-a', '--filter', 'label=team=b', '--format', '{{.Names}}'), 'idle');
    assert.equal(await ok('ps', '-a', '--filter', 'status=created', '--format', '{{.Names}}'), 'idle');
    assert.equal(
      await ok('ps', '--filter', 'name=we', '--format', '{{.Names}} {{.Status}}').then((s) =>
        s.startsWith('web Up'),
      ),
      true,
    );
    assert.equal(
      await ok('ps', '-a', '--filter', 'ancestor=busybox', '-q').then((s) => s.split('\n').length),
      2,
    );
    assert.equal(
      await ok('inspect', '-f', '{{.State.Status}} {{.Name}} {{.Config.Labels.team}}', 'web'),
      'running /web a',
    );
    for (let i = 0; i < 50 && !(await ok('logs', 'web')).includes('line3'); i++) await sleep(100);
    assert.equal(await ok('logs', 'web'), 'line1\nline2\nline3');
    assert.equal(await ok('logs', '--tail', '1', 'web'), 'line3');
    const stamped = await ok('logs', '-t', '--tail', '1', 'web');
    assert.match(stamped, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z line3$/);
    assert.equal(await ok('logs', '--since', '2099-01-01T00:00:00Z', 'web'), '');
    // follow: new output arrives, and the command ends when the container stops
    const fid = await ok('run', '-d', 'busybox', 'sh', '-c', 'echo a; sleep 1; echo b');
    const follow = await engine.docker(['logs', '-f', fid], { timeoutMs: 15_000 });
    assert.equal(follow.stdout, 'a\nb\n');
    await ok('rm', fid);
    await ok('rm', 'idle');
    assert.equal(await ok('info', '--format', '{{.Containers}} {{.ContainersRunning}}'), '1 1');
    const exp = await ok('run', '-d', '--expose', '8080', 'busybox', 'sleep', '600');
    assert.equal(await ok('ps', '--filter', `id=${exp}`, '--format', '{{.Ports}}'), '8080/tcp');
    assert.equal(await ok('ps', '--filter', 'expose=8080', '-q'), exp.slice(0, 12));
    await ok('rm', '-f', exp);
  });

  it('top, pause/unpause, rename, attach, kill, wait, stop, rm -f', async () => {
    const top = await ok('top', 'web');
    assert.match(top, /UID\s+PID\s+PPID/);
    assert.match(top, /sleep 600/);
    await ok('pause', 'web');
    assert.equal(await ok('inspect', '-f', '{{.State.Status}}', 'web'), 'paused');
    const att = await docker('attach', 'web');
    assert.notEqual(att.code, 0);
    assert.match(att.stderr, /paused/);
    await ok('unpause', 'web');
    await ok('rename', 'web', 'web2');
    assert.equal(await ok('inspect', '-f', '{{.Name}}', 'web2'), '/web2');
    const clash = await docker('run', '--name', 'web2', 'busybox');
    assert.equal(clash.code, 125);
    assert.match(clash.stderr, /Conflict\. The container name "\/web2" is already in use/);
    const rm = await docker('rm', 'web2');
    assert.notEqual(rm.code, 0);
    assert.match(rm.stderr, /container is running: stop the container before removing or force remove/);
    const k = await docker('kill', '--signal', 'SIGKILL', 'web2');
    assert.equal(k.code, 0, k.stderr);
    assert.equal(await ok('wait', 'web2'), '137');
    const k2 = await docker('kill', 'web2');
    assert.match(k2.stderr, /is not running/);

    // attach to a running container and see new output
    const a = await ok('run', '-d', 'busybox', 'sh', '-c', 'sleep 1; echo attached-out; sleep 1; exit 4');
    const attach = await engine.docker(['attach', a], { timeoutMs: 20_000 });
    assert.equal(attach.stdout, 'attached-out\n');
    assert.equal(attach.code, 4);
    await ok('rm', a);

    const s = await ok('run', '-d', 'busybox', 'sleep', '600');
    const t0 = Date.now();
    await ok('stop', '-t', '1', s);
    assert.ok(Date.now() - t0 < 8000);
    assert.equal(await ok('inspect', '-f', '{{.State.ExitCode}}', s), '137');
    const f = await ok('run', '-d', 'busybox', 'sleep', '600');
    await ok('rm', '-f', f, s, 'web2');
    assert.equal(await ok('ps', '-aq'), '');
  });

  it('restart policies: on-failure:N retries, always comes back after kill, restart command', async () => {
    await ok('run', '-d', '--name', 'flaky', '--restart', 'on-failure:2', 'busybox', 'sh', '-c', 'exit 1');
    for (let i = 0; i < 100; i++) {
      const st = await ok('inspect', '-f', '{{.State.Status}} {{.RestartCount}}', 'flaky');
      if (st === 'exited 2') break;
      await sleep(100);
    }
    assert.equal(
      await ok('inspect', '-f', '{{.State.Status}} {{.RestartCount}} {{.State.ExitCode}}', 'flaky'),
      'exited 2 1',
    );
    await ok('run', '-d', '--name', 'always', '--restart', 'always', 'busybox', 'sleep', '600');
    const pid1 = await ok('inspect', '-f', '{{.State.Pid}}', 'always');
    await ok('kill', 'always');
    let pid2 = pid1;
    for (let i = 0; i < 50 && (pid2 === pid1 || pid2 === '0'); i++) {
      await sleep(100);
      pid2 = await ok('inspect', '-f', '{{.State.Pid}}', 'always');
    }
    assert.notEqual(pid2, pid1);
    assert.equal(await ok('inspect', '-f', '{{.State.Running}} {{.RestartCount}}', 'always'), 'true 1');
    await ok('restart', '-t', '0', 'always');
    assert.equal(await ok('inspect', '-f', '{{.State.Running}} {{.RestartCount}}', 'always'), 'true 0');
    await ok('stop', '-t', '0', 'always');
    await sleep(300);
    assert.equal(await ok('inspect', '-f', '{{.State.Status}}', 'always'), 'exited');
    const bad = await docker('run', '--rm', '--restart', 'always', 'busybox', 'true');
    assert.equal(bad.code, 125);
    assert.match(bad.stderr, /conflicting options|AutoRemove/i);
    await ok('rm', '-f', 'flaky', 'always');
  });

  it('json-file max-size/max-file rotate the log; docker logs reads across files', async () => {
    const id = await ok(
      'run',
      '-d',
      '--log-opt',
      'max-size=1k',
      '--log-opt',
      'max-file=2',
      'busybox',
      'sh',
      '-c',
      'i=0; while [ $i -lt 150 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxx; i=$((i+1)); sleep 0.01; done; sleep 600',
    );
    let logs = '';
    for (let i = 0; i < 100 && !logs.endsWith('line-149-xxxxxxxxxxxxxxxxxxxx'); i++) {
      await sleep(100);
      logs = await ok('logs', id);
    }
    const lines = logs.split('\n');
    assert.equal(lines.at(-1), 'line-149-xxxxxxxxxxxxxxxxxxxx');
    assert.ok(lines.length < 150 && lines.length >= 10, `${lines.length} lines kept`);
    const logPath = await ok('inspect', '-f', '{{.LogPath}}', id);
    const { stat } = await import('node:fs/promises');
    assert.ok((await stat(`${logPath}.1`)).size <= 2048);
    await ok('rm', '-f', id);
  });

  it('health checks: healthy, unhealthy after retries, ps status and health filter, events', async () => {
    await ok(
      'run',
      '-d',
      '--name',
      'fine',
      '--health-cmd',
      'echo ok',
      '--health-interval',
      '300ms',
      'busybox',
      'sleep',
      '600',
    );
    await ok(
      'run',
      '-d',
      '--name',
      'sick',
      '--health-cmd',
      'exit 1',
      '--health-interval',
      '300ms',
      '--health-retries',
      '2',
      'busybox',
      'sleep',
      '600',
    );
    const status = (n: string) => ok('inspect', '-f', '{{.State.Health.Status}}', n);
    // before its first probe a container is starting (an interval no test run reaches)
    await ok(
      'run',
      '-d',
      '--name',
      'unprobed',
      '--health-cmd',
      'true',
      '--health-interval',
      '1h',
      'busybox',
      'sleep',
      '600',
    );
    assert.equal(await status('unprobed'), 'starting');
    await ok('rm', '-f', 'unprobed');
    for (
      let i = 0;
      i < 50 && ((await status('fine')) !== 'healthy' || (await status('sick')) !== 'unhealthy');
      i++
    )
      await sleep(100);
    assert.equal(await status('fine'), 'healthy');
    assert.equal(await status('sick'), 'unhealthy');
    assert.equal(await ok('inspect', '-f', '{{(index .State.Health.Log 0).Output}}', 'fine'), 'ok');
    assert.match(await ok('ps', '--filter', 'name=fine', '--format', '{{.Status}}'), /^Up .* \(healthy\)$/);
    assert.equal(await ok('ps', '--filter', 'health=unhealthy', '--format', '{{.Names}}'), 'sick');
    // until: a moment already past, so that the command returns at once
    const until = (Date.now() / 1000).toFixed(3);
    const ev = await ok(
      'events',
      '--since',
      String(Math.floor(Date.now() / 1000) - 60),
      '--until',
      until,
      '--filter',
      'container=sick',
      '--format',
      '{{.Action}}',
    );
    assert.ok(ev.split('\n').includes('health_status: unhealthy'), ev);
    await ok('rm', '-f', 'fine', 'sick');
  });

  it('container prune removes stopped containers only', async () => {
    await ok('create', '--name', 'stale', 'busybox', 'true');
    const live = await ok('run', '-d', 'busybox', 'sleep', '600');
    const out = await ok('container', 'prune', '-f');
    assert.match(out, /Deleted Containers:/);
    assert.deepEqual((await ok('ps', '-aq', '--no-trunc')).split('\n'), [live]);
    await ok('rm', '-f', live);
  });

  it('run with a missing command binary fails like dockerd (exit 127)', async () => {
    const r = await docker('run', '--name', 'nocmd', 'busybox', 'no-such-binary');
    assert.equal(r.code, 127, r.stderr);
    assert.match(r.stderr, /no-such-binary/);
    await ok('rm', '-f', 'nocmd');
  });
});
