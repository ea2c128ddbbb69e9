import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { FrameDecoder } from '../../../src/http/stream.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { runPty } from '../../helpers/pty.js';

/** `docker exec -it <c> sh`: size, echo, a resize, the exit code. */
const EXEC_SCENARIO = String.raw`
resize(27, 91)
read_until(b'# ')
os.write(fd, b'stty size\r')
read_until(b'27 91')
resize(44, 132)
time.sleep(0.5)
os.write(fd, b'stty size\r')
read_until(b'44 132\r\n/tmp # ')
time.sleep(0.5)
os.write(fd, b'echo ab""cd; exit 3\r')
finish()
`;

interface ExecInspect {
  ID: string;
  Running: boolean;
  ExitCode: number | null;
  ProcessConfig: Record<string, unknown>;
  OpenStdin: boolean;
  OpenStdout: boolean;
  OpenStderr: boolean;
  ContainerID: string;
  DetachKeys: string;
  Pid: number;
}

describe('exec (docker CLI and API)', () => {
  let engine: TestEngine;
  let box: string;
  const ok = (...args: string[]) => engine.dockerOk(args);
  const createExec = (container: string, body: unknown) =>
    engine.request('POST', `/v1.44/containers/${container}/exec`, { body });
  const execJson = async (id: string) =>
    (await engine.request('GET', `/v1.44/exec/${id}/json`)).json<ExecInspect>();
  const message = (r: { json<T>(): T }) => r.json<{ message: string }>().message;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    box = await ok('run', '-d', '--name', 'box', '-e', 'FOO=bar', '-w', '/tmp', 'busybox', 'sleep', '1000');
  });
  after(async () => {
    await engine?.destroy();
  });

  it('runs a command with the container environment: output, separate stderr, exit code, user, dir, env', async () => {
    const r = await engine.docker([
      'exec',
      'box',
      'sh',
      '-c',
      'echo $FOO $HOSTNAME; pwd; echo err >&2; exit 3',
    ]);
    assert.equal(r.code, 3);
    assert.equal(r.stdout, `bar ${box.slice(0, 12)}\n/tmp\n`);
    assert.equal(r.stderr, 'err\n');
    assert.equal(
      await ok(
        'exec',
        '-u',
        'nobody',
        '-w',
        '/',
        '-e',
        'FOO=baz',
        'box',
        'sh',
        '-c',
        'id -u; pwd; echo $FOO',
      ),
      '65534\n/\nbaz',
    );
    assert.equal(
      (await engine.docker(['exec', '-i', 'box', 'sh', '-c', 'cat; echo done'], { input: 'piped\n' })).stdout,
      'piped\ndone\n',
    );
  });

  it('fails as dockerd: 126 with the runtime message for a missing command, an unknown user, a missing dir', async () => {
    const missing = await engine.docker(['exec', 'box', 'nope']);
    assert.equal(missing.code, 126);
    assert.match(
      missing.stdout,
      /^OCI runtime exec failed: .*exec: "nope": executable file not found in \$PATH/,
    );
    assert.doesNotMatch(missing.stdout, /level=error/);
    const user = await engine.docker(['exec', '-u', 'nosuch', 'box', 'true']);
    assert.equal(user.code, 126);
    assert.match(user.stdout, /unable to find user nosuch/);
    const dir = await engine.docker(['exec', '-w', '/nonexist', 'box', 'pwd']);
    assert.equal(dir.code, 126);
    assert.match(dir.stdout, /chdir to cwd \("\/nonexist"\)/);
    // detached, the failure is the start's answer: 400
    const id = (await createExec('box', { Cmd: ['nope'] })).json<{ Id: string }>().Id;
    const start = await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true } });
    assert.equal(start.status, 400);
    assert.match(message(start), /executable file not found/);
    assert.equal((await execJson(id)).ExitCode, 126);
  });

  it('create and start refuse what dockerd refuses', async () => {
    const noCmd = await createExec('box', {});
    assert.equal(noCmd.status, 400);
    assert.equal(message(noCmd), 'No exec command specified');
    const asString = await createExec('box', { Cmd: 'echo hi' });
    assert.equal(asString.status, 400);
    assert.equal(
      message(asString),
      'json: cannot unmarshal string into Go struct field ExecConfig.Cmd of type []string',
    );
    const keys = await createExec('box', { Cmd: ['true'], DetachKeys: 'bogus-key' });
    assert.equal(keys.status, 400);
    assert.equal(message(keys), 'Invalid escape keys (bogus-key) provided');
    const missing = await createExec('nope', { Cmd: ['true'] });
    assert.equal(missing.status, 404);
    assert.equal(message(missing), 'No such container: nope');
    const unknown = await engine.request('GET', '/v1.44/exec/nope/json');
    assert.equal(unknown.status, 404);
    assert.equal(message(unknown), 'No such exec instance: nope');
    assert.equal(
      (await engine.request('POST', '/v1.44/exec/nope/start', { body: { Detach: true } })).status,
      404,
    );

    const stopped = await ok('create', 'busybox', 'true');
    const notRunning = await createExec(stopped, { Cmd: ['true'] });
    assert.equal(notRunning.status, 409);
    assert.equal(message(notRunning), `Container ${stopped} is not running`);
    await ok('pause', 'box');
    const paused = await engine.docker(['exec', 'box', 'true']);
    assert.match(paused.stderr, /Container box is paused, unpause the container before exec/);
    await ok('unpause', 'box');
    await ok('rm', stopped);

    const id = (await createExec('box', { Cmd: ['sleep', '2'] })).json<{ Id: string }>().Id;
    assert.equal(
      (await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true } })).status,
      200,
    );
    const again = await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true } });
    assert.equal(again.status, 409);
    assert.equal(message(again), `Error: Exec command ${id} is already running`);
    const bad = await engine.request('POST', `/v1.44/exec/${id}/resize?h=x&w=10`);
    assert.equal(bad.status, 400);
    assert.equal(message(bad), 'strconv.Atoi: parsing "x": invalid syntax');
    assert.equal((await engine.request('POST', `/v1.44/exec/${id}/resize?h=10&w=10`)).status, 200);
    for (let i = 0; i < 100 && (await execJson(id)).Running; i++) await sleep(50);
    const ran = await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true } });
    assert.equal(message(ran), `Error: Exec command ${id} has already run`);
    assert.equal((await engine.request('POST', `/v1.44/exec/${id}/resize?h=10&w=10`)).status, 404);
  });

  it('inspect shows the instance before, while and after it runs; the container lists it until it ends', async () => {
    const created = await createExec('box', {
      Cmd: ['sleep', '1'],
      User: 'nobody',
      Tty: true,
      DetachKeys: 'ctrl-x',
      AttachStdout: true,
    });
    assert.equal(created.status, 201);
    const id = created.json<{ Id: string }>().Id;
    const before = await execJson(id);
    assert.deepEqual(Object.keys(before), [
      'ID',
      'Running',
      'ExitCode',
      'ProcessConfig',
      'OpenStdin',
      'OpenStderr',
      'OpenStdout',
      'CanRemove',
      'ContainerID',
      'DetachKeys',
      'Pid',
    ]);
    assert.deepEqual(
      { ...before, ID: undefined },
      {
        ID: undefined,
        Running: false,
        ExitCode: null,
        ProcessConfig: {
          tty: true,
          entrypoint: 'sleep',
          arguments: ['1'],
          privileged: false,
          user: 'nobody',
        },
        OpenStdin: false,
        OpenStderr: false,
        OpenStdout: true,
        CanRemove: false,
        ContainerID: box,
        DetachKeys: 'GA==',
        Pid: 0,
      },
    );
    assert.deepEqual(JSON.parse(await ok('inspect', '-f', '{{json .ExecIDs}}', 'box')), [id]);
    await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true, Tty: true } });
    const running = await execJson(id);
    assert.equal(running.Running, true);
    assert.ok(running.Pid > 0);
    for (let i = 0; i < 100 && (await execJson(id)).Running; i++) await sleep(50);
    const done = await execJson(id);
    assert.equal(done.ExitCode, 0);
    assert.equal(await ok('inspect', '-f', '{{json .ExecIDs}}', 'box'), 'null');
  });

  it('announces exec_create, exec_start and exec_die with the exec ID and exit code', async () => {
    const since = Math.floor(Date.now() / 1000);
    await engine.docker(['exec', 'box', 'sh', '-c', 'exit 7']);
    const lines = await engine.events(since, '{{json .}}', ['container=box', 'event=exec_die']);
    const die = lines
      .split('\n')
      .map((l) => JSON.parse(l) as { Action: string; Actor: { Attributes: Record<string, string> } })
      .find((e) => e.Actor.Attributes.exitCode === '7');
    assert.ok(die, lines);
    const execId = die.Actor.Attributes.execID ?? '';
    const all = await engine.events(since, '{{.Action}} {{.Actor.Attributes.execID}}', ['container=box']);
    assert.deepEqual(
      all.split('\n').filter((l) => l.endsWith(execId)),
      [`exec_create: sh -c exit 7 ${execId}`, `exec_start: sh -c exit 7 ${execId}`, `exec_die ${execId}`],
    );
  });

  it('docker exec -it: a terminal of the right size that follows resizes, echo, the exit code', async () => {
    const r = await runPty(engine, ['exec', '-it', 'box', 'sh'], EXEC_SCENARIO);
    assert.equal(r.error, undefined, r.buf);
    assert.match(r.buf, /27 91/);
    assert.match(r.buf, /44 132/);
    assert.match(r.buf, /abcd\r\n/);
    assert.equal(r.status, 3, r.buf);
  });

  it('a TTY session detaches on its detach keys; the process goes on (exec_detach)', async () => {
    const id = (
      await createExec('box', {
        Cmd: ['sh', '-c', 'read x; echo got-$x'],
        Tty: true,
        AttachStdin: true,
        AttachStdout: true,
        DetachKeys: 'ctrl-x',
      })
    ).json<{ Id: string }>().Id;
    const socket = connect(engine.socket);
    const received: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('data', (d: Buffer) => received.push(d));
    const body = JSON.stringify({ Detach: false, Tty: true });
    socket.write(
      `POST /v1.44/exec/${id}/start HTTP/1.1\r\nHost: engine\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    for (let i = 0; i < 100 && !Buffer.concat(received).includes('\r\n\r\n'); i++) await sleep(50);
    assert.match(Buffer.concat(received).toString('latin1'), /^HTTP\/1\.1 101 UPGRADED\r\n/);
    socket.write('\x18');
    const timer = setTimeout(() => socket.destroy(), 10_000);
    await closed;
    clearTimeout(timer);
    assert.equal((await execJson(id)).Running, true);
  });

  it('attached without a TTY: multiplexed output, stdin to EOF, then the exit code is there', async () => {
    const id = (
      await createExec('box', {
        Cmd: ['sh', '-c', 'cat; echo bye >&2; exit 4'],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
      })
    ).json<{ Id: string }>().Id;
    const socket = connect(engine.socket);
    const received: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('data', (d: Buffer) => received.push(d));
    const body = JSON.stringify({ Detach: false, Tty: false });
    socket.write(
      `POST /v1.44/exec/${id}/start HTTP/1.1\r\nHost: engine\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}in-1\n`,
    );
    for (let i = 0; i < 100 && !Buffer.concat(received).includes('\r\n\r\n'); i++) await sleep(50);
    socket.end('in-2\n');
    const timer = setTimeout(() => socket.destroy(), 10_000);
    await closed;
    clearTimeout(timer);
    const all = Buffer.concat(received);
    assert.match(all.toString('latin1'), /Content-Type: application\/vnd\.docker\.multiplexed-stream/);
    const frames = new FrameDecoder().push(all.subarray(all.indexOf('\r\n\r\n') + 4));
    const text = (n: number) =>
      Buffer.concat(frames.filter((f) => f.stream === n).map((f) => f.payload)).toString();
    assert.equal(text(1), 'in-1\nin-2\n');
    assert.equal(text(2), 'bye\n');
    // the stream ended after the exit was recorded
    assert.equal((await execJson(id)).ExitCode, 4);
  });

  it('its instances go with the container: a stop ends them and they are no longer found', async () => {
    const id = (await createExec('box', { Cmd: ['sleep', '100'] })).json<{ Id: string }>().Id;
    await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true } });
    await ok('stop', '-t', '1', 'box');
    assert.equal((await engine.request('GET', `/v1.44/exec/${id}/json`)).status, 404);
    await ok('start', 'box');
    assert.equal(await ok('exec', 'box', 'echo', 'again'), 'again');
  });
});
