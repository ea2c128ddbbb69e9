import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { TestEngine } from '../../helpers/engine.js';
import { eventuallyValue } from '../../helpers/eventually.js';
import { leaveAndDestroy, runningTasks, startOneManagerSwarm } from '../../helpers/swarm-one.js';

/**
 * `docker service logs -f` follows the tasks that start after it began (issue 14 §3), as dockerd
 * does: a scale-up's new task and the replacement of a killed task show up on the same stream.
 */
describe('swarm service logs -f follows later tasks (one manager)', () => {
  let engine: TestEngine;

  before(async () => {
    ({ engine } = await startOneManagerSwarm({ bridge: 'none' }));
  });
  after(() => leaveAndDestroy(engine));

  it('shows a scale-up’s task and a killed task’s replacement on the running stream', async () => {
    await engine.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'fl',
      '--restart-delay',
      '0s',
      '--env',
      'SLOT={{.Task.Slot}}',
      'busybox:latest',
      'sh',
      '-c',
      'echo hello-$SLOT; exec sleep 300',
    ]);
    const [first] = await eventuallyValue(
      'one running task',
      () => runningTasks(engine, 'fl'),
      (t) => t.length === 1,
      60_000,
    );
    const child = spawn('docker', ['-H', engine.host, 'service', 'logs', '-f', '--raw', 'fl'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
    });
    const count = (word: string) => (out.match(new RegExp(`^${word}$`, 'gm')) ?? []).length;
    try {
      await eventuallyValue(
        'the first task’s line',
        async () => out,
        () => count('hello-1') === 1,
        20_000,
      );

      await engine.dockerOk(['service', 'scale', '-d', 'fl=2']);
      await eventuallyValue(
        'the new task’s line',
        async () => out,
        () => count('hello-2') === 1,
        30_000,
      );

      await engine.dockerOk(['kill', first?.Status.ContainerStatus?.ContainerID ?? '']);
      await eventuallyValue(
        'the replacement’s line',
        async () => out,
        () => count('hello-1') === 2,
        30_000,
      );
      const now = await runningTasks(engine, 'fl');
      assert.equal(now.length, 2);
      assert.ok(!now.some((t) => t.ID === first?.ID), 'slot 1 runs a new task');
      assert.equal(child.exitCode, null, 'follow keeps the stream open');
    } finally {
      child.kill('SIGTERM');
    }
    await new Promise((r) => child.once('close', r));
    await engine.dockerOk(['service', 'rm', 'fl']);
  });
});
