import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/** Live restore: the engine is killed with SIGKILL and started again; containers are not lost. */
describe('containers survive kill -9 of the engine', () => {
  let engine: TestEngine;
  const ok = (...args: string[]) => engine.dockerOk(args);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('keeps running containers, records exits that happened while it was down, applies policies', async () => {
    await ok('run', '-d', '--name', 'keep', 'busybox', 'sh', '-c', 'echo started; sleep 600');
    await ok('run', '-d', '--name', 'brief', 'busybox', 'sh', '-c', 'sleep 2; exit 3');
    await ok(
      'run',
      '-d',
      '--name',
      'bouncy',
      '--restart',
      'on-failure',
      'busybox',
      'sh',
      '-c',
      'sleep 2; exit 1',
    );
    await ok('create', '--name', 'never', 'busybox', 'true');
    const pid = await ok('inspect', '-f', '{{.State.Pid}}', 'keep');

    await engine.kill9();
    await sleep(3000);
    await engine.launch();

    assert.equal(await ok('inspect', '-f', '{{.State.Status}} {{.State.Pid}}', 'keep'), `running ${pid}`);
    assert.equal(await ok('inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', 'brief'), 'exited 3');
    assert.equal(await ok('inspect', '-f', '{{.State.Status}}', 'never'), 'created');
    // on-failure: the exit while the engine was down counts, and the policy restarts it
    let bouncy = '';
    for (let i = 0; i < 50; i++) {
      bouncy = await ok('inspect', '-f', '{{.RestartCount}}', 'bouncy');
      if (Number(bouncy) >= 1) break;
      await sleep(100);
    }
    assert.ok(Number(bouncy) >= 1, `RestartCount ${bouncy}`);
    assert.equal(await ok('logs', 'keep'), 'started');
    assert.deepEqual((await ok('ps', '--format', '{{.Names}}')).split('\n').includes('keep'), true);

    const t0 = Date.now();
    await ok('stop', '-t', '1', 'keep');
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal(await ok('inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', 'keep'), 'exited 137');
    await ok('rm', '-f', 'keep', 'brief', 'bouncy', 'never');
    assert.equal(await ok('ps', '-aq'), '');
  });

  it('a graceful engine stop leaves containers running too', async () => {
    await ok('run', '-d', '--name', 'calm', 'busybox', 'sleep', '600');
    await engine.restart();
    assert.equal(await ok('inspect', '-f', '{{.State.Running}}', 'calm'), 'true');
    await ok('rm', '-f', 'calm');
  });

  it("a container's output keeps flowing after a restart while containers started later run", async () => {
    // a conmon started after the engine connected to another's attach socket must not hold that
    // connection: the other conmon would never see the old engine leave, and would block once
    // nobody reads it
    await ok(
      'run',
      '-d',
      '--name',
      'chatty',
      'busybox',
      'sh',
      '-c',
      'while [ ! -f /tmp/go ]; do sleep 0.1; done; yes 0123456789abcdef | head -c 20000000; echo DONE',
    );
    await ok('run', '-d', '--name', 'later', 'busybox', 'sleep', '600');
    await engine.restart();
    const merged = await ok('inspect', '-f', '{{.GraphDriver.Data.MergedDir}}', 'chatty');
    await writeFile(join(merged, 'tmp', 'go'), '');
    let done = false;
    for (let i = 0; i < 300 && !done; i++) {
      done = (await ok('logs', '--tail', '1', 'chatty')).endsWith('DONE');
      if (!done) await sleep(100);
    }
    assert.ok(done, 'the output stalled');
    await ok('rm', '-f', 'chatty', 'later');
  });

  it('an --rm container that exits while the engine is down leaves the anonymous volume another one uses', async () => {
    await ok(
      'run',
      '-d',
      '--name',
      'va',
      '--rm',
      '-v',
      '/data',
      'busybox',
      'sh',
      '-c',
      'echo precious > /data/f; sleep 3',
    );
    await ok('run', '-d', '--name', 'vb', '--volumes-from', 'va', 'busybox', 'sleep', '600');
    const volume = await ok('inspect', '-f', '{{(index .Mounts 0).Name}}', 'vb');
    await engine.kill9();
    await sleep(4500);
    await engine.launch();
    assert.equal((await engine.docker(['inspect', 'va'])).code, 1, 'va removed (AutoRemove)');
    const path = await ok('volume', 'inspect', '-f', '{{.Mountpoint}}', volume);
    assert.equal(await readFile(join(path, 'f'), 'utf8'), 'precious\n');
    await ok('rm', '-f', '-v', 'vb');
  });

  it('a graceful stop ends attach sessions and exits, its pid file gone (the next engine starts)', async () => {
    await ok('run', '-d', '--name', 'attached', 'busybox', 'sleep', '600');
    const socket = connect(engine.socket);
    socket.on('error', () => undefined);
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.write(
      'POST /v1.44/containers/attached/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: e\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n',
    );
    await new Promise((r) => socket.once('data', r));
    const t0 = Date.now();
    await engine.stop();
    assert.ok(Date.now() - t0 < 10_000, `stopped after ${Date.now() - t0} ms`);
    await closed;
    assert.match(engine.log(), /engine stopped/);
    await engine.launch();
    assert.equal(await ok('inspect', '-f', '{{.State.Running}}', 'attached'), 'true');
    await ok('rm', '-f', 'attached');
  });
});
