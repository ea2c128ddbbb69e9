import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { FrameDecoder } from '../../../src/http/stream.js';
import type { TestEngine } from '../../helpers/engine.js';
import { eventuallyValue } from '../../helpers/eventually.js';
import { leaveAndDestroy, runningTasks, startOneManagerSwarm } from '../../helpers/swarm-one.js';

/**
 * Service and task logs on a one-manager swarm (issue 14 §3, §6): the manager subscribes to the
 * tasks' logs through the agent's assignments stream, the agent reads its task containers' logs
 * and posts them back; `docker service logs` and the API answer as with dockerd.
 */
describe('swarm service logs on one manager', () => {
  let engine: TestEngine;
  let nodeId = '';
  let serviceId = '';
  const host = hostname();

  /** The API's answer, demultiplexed: [stream, text] per frame. */
  async function apiLogs(
    path: string,
  ): Promise<{ status: number; frames: [number, string][]; type: string }> {
    const res = await engine.request('GET', path);
    const frames: [number, string][] = [];
    if (res.status === 200)
      for (const f of new FrameDecoder().push(res.body)) frames.push([f.stream, f.payload.toString('utf8')]);
    return { status: res.status, frames, type: String(res.headers['content-type']) };
  }

  before(async () => {
    ({ engine, nodeId } = await startOneManagerSwarm({ bridge: 'none' }));
    serviceId = await engine.dockerOk([
      'service',
      'create',
      '-d',
      '-q',
      '--name',
      'lg',
      '--replicas',
      '2',
      '-e',
      'SLOT={{.Task.Slot}}',
      'busybox:latest',
      'sh',
      '-c',
      'echo hello-$SLOT; echo oops-$SLOT >&2; sleep 0.3; echo ready-$SLOT; exec sleep 300',
    ]);
    await eventuallyValue(
      'two running tasks',
      () => runningTasks(engine, 'lg'),
      (t) => t.length === 2,
    );
  });
  after(() => leaveAndDestroy(engine));

  it('prints every task’s lines as name.slot.taskid@host | line', async () => {
    const tasks = await runningTasks(engine, 'lg');
    // the containers may not have written yet when they are reported running
    const r = await eventuallyValue(
      'both tasks’ lines',
      () => engine.docker(['service', 'logs', 'lg']),
      (res) => res.code === 0 && (res.stdout.match(/ready-/g) ?? []).length === 2,
    );
    for (const t of tasks) {
      const prefix = `lg\\.${t.Slot}\\.${t.ID.slice(0, 12)}@${host}\\s+\\| `;
      assert.match(r.stdout, new RegExp(`^${prefix}hello-${t.Slot}$`, 'm'));
      assert.match(r.stdout, new RegExp(`^${prefix}ready-${t.Slot}$`, 'm'));
      assert.match(r.stderr, new RegExp(`^${prefix}oops-${t.Slot}$`, 'm'));
    }
    assert.equal(r.stdout.trim().split('\n').length, 4);

    const raw = await engine.dockerOk(['service', 'logs', '--raw', 'lg']);
    assert.deepEqual(raw.split('\n').sort(), ['hello-1', 'hello-2', 'ready-1', 'ready-2']);

    const one = tasks.find((t) => t.Slot === 1);
    const untrunc = await engine.dockerOk(['service', 'logs', '--no-trunc', 'lg']);
    assert.match(untrunc, new RegExp(`^lg\\.1\\.${one?.ID}@${host}\\s+\\| hello-1$`, 'm'));
    const noIds = await engine.dockerOk(['service', 'logs', '--no-task-ids', 'lg']);
    assert.match(noIds, new RegExp(`^lg\\.1@${host}\\s+\\| hello-1$`, 'm'));
  });

  it('answers the API with details, tail per task, since and timestamps', async () => {
    const tasks = await runningTasks(engine, 'lg');
    const details = await apiLogs('/services/lg/logs?stdout=1&stderr=1&details=1');
    assert.equal(details.status, 200);
    assert.equal(details.type, 'application/vnd.docker.multiplexed-stream');
    const lines = details.frames.map(([s, text]) => `${s} ${text}`);
    for (const t of tasks) {
      const attrs = `com.docker.swarm.node.id=${nodeId},com.docker.swarm.service.id=${serviceId},com.docker.swarm.task.id=${t.ID}`;
      assert.ok(lines.includes(`1 ${attrs} hello-${t.Slot}\n`), lines.join(''));
      assert.ok(lines.includes(`2 ${attrs} oops-${t.Slot}\n`), lines.join(''));
    }

    // tail counts per task
    const tail = await apiLogs('/services/lg/logs?stdout=1&stderr=1&tail=1');
    assert.deepEqual(tail.frames.map(([, text]) => text).sort(), ['ready-1\n', 'ready-2\n']);

    const future = Math.floor(Date.now() / 1000) + 3600;
    const since = await apiLogs(`/services/${serviceId}/logs?stdout=1&stderr=1&since=${future}`);
    assert.equal(since.status, 200);
    assert.deepEqual(since.frames, []);

    const stamped = await engine.dockerOk(['service', 'logs', '-t', '--raw', 'lg']);
    for (const line of stamped.split('\n'))
      assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (hello|ready)-[12]$/);

    assert.equal((await engine.request('GET', '/services/lg/logs')).status, 400);
    assert.equal((await engine.request('GET', '/services/lg/logs?stdout=1&tail=x')).status, 400);
    assert.equal((await engine.request('GET', '/services/nope/logs?stdout=1')).status, 404);
    assert.equal((await engine.request('GET', '/tasks/nope/logs?stdout=1')).status, 404);
  });

  it('gives one task’s logs', async () => {
    const [task] = (await runningTasks(engine, 'lg')).filter((t) => t.Slot === 2);
    assert.ok(task);
    const r = await engine.dockerOk(['service', 'logs', task.ID]);
    assert.deepEqual(
      r.split('\n').map((l) => l.replace(/\s+\|/, ' |')),
      [`lg.2.${task.ID.slice(0, 12)}@${host} | hello-2`, `lg.2.${task.ID.slice(0, 12)}@${host} | ready-2`],
    );
    const api = await apiLogs(`/tasks/${task.ID}/logs?stderr=1`);
    assert.deepEqual(api.frames, [[2, 'oops-2\n']]);
  });

  it('follows: a new line shows up while the stream stays open', async () => {
    const [task] = (await runningTasks(engine, 'lg')).filter((t) => t.Slot === 1);
    const container = task?.Status.ContainerStatus?.ContainerID ?? '';
    assert.ok(container);
    const child = spawn('docker', ['-H', engine.host, 'service', 'logs', '-f', '--raw', 'lg'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
    });
    try {
      await eventuallyValue(
        'the old lines',
        async () => out,
        (o) => (o.match(/ready-/g) ?? []).length === 2,
        20_000,
      );
      await engine.dockerOk(['exec', container, 'sh', '-c', 'echo later-1 > /proc/1/fd/1']);
      await eventuallyValue(
        'the new line',
        async () => out,
        (o) => o.includes('later-1\n'),
        20_000,
      );
      assert.equal(child.exitCode, null, 'follow keeps the stream open');
    } finally {
      child.kill('SIGTERM');
    }
    await new Promise((r) => child.once('close', r));
  });
});
