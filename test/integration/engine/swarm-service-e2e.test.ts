import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestEngine } from '../../helpers/engine.js';
import { eventuallyValue } from '../../helpers/eventually.js';
import {
  leaveAndDestroy,
  runningTasks,
  serviceTasks,
  startOneManagerSwarm,
} from '../../helpers/swarm-one.js';

/**
 * Services end to end on a one-manager swarm through the docker CLI (issue 14 §3, §4, §6): the
 * API stores the service, the elected orchestrator makes and places its tasks, the node's agent
 * runs them as containers and reports them running; scale, a killed task container replaced,
 * a rolling update, and removal leave exactly what the spec says.
 */
describe('swarm services end to end on one manager', () => {
  let engine: TestEngine;

  before(async () => {
    ({ engine } = await startOneManagerSwarm({ bridge: 'none' }));
  });
  after(() => leaveAndDestroy(engine));

  async function taskContainers(service: string): Promise<{ Id: string; Names: string[]; State: string }[]> {
    const filters = encodeURIComponent(
      JSON.stringify({ label: [`com.docker.swarm.service.name=${service}`] }),
    );
    return (await engine.request('GET', `/containers/json?all=1&filters=${filters}`)).json();
  }

  it('runs, scales, replaces and removes a replicated service', async () => {
    await engine.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'web',
      '--replicas',
      '2',
      '--restart-delay',
      '0s',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const two = await eventuallyValue(
      'two running tasks',
      () => runningTasks(engine, 'web'),
      (t) => t.length === 2,
    );
    assert.deepEqual(two.map((t) => t.Slot).sort(), [1, 2]);
    const ls = await engine.dockerOk(['service', 'ls', '--format', '{{.Name}} {{.Replicas}}']);
    assert.match(ls, /^web 2\/2$/m);
    const containers = await taskContainers('web');
    assert.equal(containers.filter((c) => c.State === 'running').length, 2);
    for (const c of containers) assert.match(c.Names[0] ?? '', /^\/web\.[12]\.[0-9a-z]{25}$/);

    await engine.dockerOk(['service', 'scale', '-d', 'web=3']);
    await eventuallyValue(
      'three running tasks',
      () => runningTasks(engine, 'web'),
      (t) => t.length === 3,
    );

    // a task container killed behind the engine's back is replaced in its slot, the old one kept as failed
    const victim = (await runningTasks(engine, 'web')).find((t) => t.Slot === 1);
    assert.ok(victim?.Status.ContainerStatus?.ContainerID);
    await engine.dockerOk(['kill', victim.Status.ContainerStatus.ContainerID]);
    await eventuallyValue(
      'slot 1 replaced',
      () => serviceTasks(engine, 'web'),
      (ts) =>
        ts.some((t) => t.ID === victim.ID && t.Status.State === 'failed') &&
        ts.some((t) => t.Slot === 1 && t.ID !== victim.ID && t.Status.State === 'running'),
    );
    const failed = (await serviceTasks(engine, 'web')).find((t) => t.ID === victim.ID);
    assert.match(failed?.Status.Err ?? '', /^task: non-zero exit \(137\)$/);

    await engine.dockerOk(['service', 'scale', '-d', 'web=1']);
    await eventuallyValue(
      'one running task',
      () => runningTasks(engine, 'web'),
      (t) => t.length === 1,
    );
    await eventuallyValue(
      'the scaled-down containers gone',
      () => taskContainers('web'),
      (cs) => cs.filter((c) => c.State === 'running').length === 1,
    );

    // a rolling update: the task is replaced by one from the new spec
    const before = (await runningTasks(engine, 'web'))[0];
    await engine.dockerOk(['service', 'update', '-d', '--env-add', 'X=1', 'web']);
    const after = await eventuallyValue(
      'the updated task',
      () => runningTasks(engine, 'web'),
      (t) => t.length === 1 && t[0]?.ID !== before?.ID,
    );
    const env = await engine.dockerOk(['exec', after[0]?.Status.ContainerStatus?.ContainerID ?? '', 'env']);
    assert.match(env, /^X=1$/m);

    await engine.dockerOk(['service', 'rm', 'web']);
    await eventuallyValue(
      'no task container left',
      () => taskContainers('web'),
      (cs) => cs.length === 0,
    );
    // as dockerd: a service filter naming no service is a 404
    assert.equal(
      (await engine.request('GET', `/tasks?filters=${encodeURIComponent('{"service":["web"]}')}`)).status,
      404,
    );
  });

  it('converges as the CLI watches it without -d (its per-slot progress and the verify line)', async () => {
    const out = await engine.dockerOk(
      ['service', 'create', '--name', 'watched', '--replicas', '2', 'busybox:latest', 'sleep', '300'],
      { timeoutMs: 60_000 },
    );
    assert.match(out, /overall progress: 2 out of 2 tasks/);
    assert.match(out, /verify: Service (watched|[0-9a-z]{25}) converged/);
    await engine.dockerOk(['service', 'rm', 'watched']);
  });

  it('runs a global service and a replicated job to completion', async () => {
    await engine.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'g',
      '--mode',
      'global',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    await eventuallyValue(
      'one global task on the node',
      () => runningTasks(engine, 'g'),
      (t) => t.length === 1,
    );
    await engine.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'job',
      '--mode',
      'replicated-job',
      '--replicas',
      '3',
      '--max-concurrent',
      '2',
      'busybox:latest',
      'true',
    ]);
    await eventuallyValue(
      'three completed job tasks',
      () => serviceTasks(engine, 'job'),
      (ts) => ts.filter((t) => t.Status.State === 'complete').length === 3,
    );
    const ls = await engine.dockerOk(['service', 'ls', '--format', '{{.Name}} {{.Replicas}}']);
    assert.match(ls, /^job 0\/0 \(3\/3 completed\)$/m);
    await engine.dockerOk(['service', 'rm', 'g', 'job']);
    await eventuallyValue(
      'no global task container left',
      () => taskContainers('g'),
      (cs) => cs.length === 0,
    );
  });
});
