import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import type { UpdateConfig } from '../../../../../src/engine/swarm/services/service.types.js';
import { type TestCluster as Cluster, TestCluster } from './harness.js';

const image = (ref: string) => ({ ContainerSpec: { Image: ref } });

async function serviceOf(
  c: Cluster,
  replicas: number,
  update: UpdateConfig,
  rollback?: UpdateConfig,
): Promise<string> {
  const id = await c.createService({
    Name: 'web',
    TaskTemplate: { ...image('busybox:1'), RestartPolicy: { Delay: 0 } },
    Mode: { Replicated: { Replicas: replicas } },
    UpdateConfig: update,
    ...(rollback ? { RollbackConfig: rollback } : {}),
  });
  await c.agentsRun();
  return id;
}

const imageOf = (t: { Spec: { ContainerSpec?: { Image?: string } } }) => t.Spec.ContainerSpec?.Image;

describe('the rolling updater', () => {
  it('replaces tasks in batches of Parallelism, Delay apart, stop-first, then completes after Monitor', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const id = await serviceOf(c, 4, { Parallelism: 2, Delay: 10e9, Monitor: 5e9, Order: 'stop-first' });
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:2' } };
    });
    let s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'updating');
    assert.equal(s.UpdateStatus?.Message, 'update in progress');
    // stop-first: two old tasks told to stop, nothing new yet
    let live = await c.liveTasks(id);
    assert.equal(live.length, 2);
    assert.equal((await c.tasks(id)).filter((t) => imageOf(t) === 'busybox:2').length, 0);
    await c.agentsRun(); // the old ones stop: their successors are made
    await c.agentsRun(); // and run
    live = await c.liveTasks(id);
    assert.deepEqual(live.map(imageOf).sort(), ['busybox:1', 'busybox:1', 'busybox:2', 'busybox:2']);
    await c.advance(9_000);
    await c.agentsRun();
    assert.equal(
      (await c.liveTasks(id)).filter((t) => imageOf(t) === 'busybox:2').length,
      2,
      'Delay holds the batch',
    );
    await c.advance(1_000);
    await c.agentsRun();
    await c.agentsRun();
    live = await c.liveTasks(id);
    assert.deepEqual(live.map(imageOf), ['busybox:2', 'busybox:2', 'busybox:2', 'busybox:2']);
    assert.deepEqual(
      live.map((t) => t.Slot),
      [1, 2, 3, 4],
    );
    assert.equal((await c.service(id)).UpdateStatus?.State, 'updating', 'Monitor not over');
    await c.advance(5_000);
    s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'completed');
    assert.equal(s.UpdateStatus?.Message, 'update completed');
    assert.ok(s.UpdateStatus?.CompletedAt);
    await c.stop();
  });

  it('start-first keeps the old task until its successor runs, never fewer than N running', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 2, { Parallelism: 1, Order: 'start-first', Monitor: 1e9 });
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:2' } };
    });
    for (let i = 0; i < 6; i++) {
      const running = (await c.tasks(id)).filter((t) => t.Status.State === 'running');
      assert.ok(running.length >= 2, `never fewer than 2 running (round ${i})`);
      await c.agentsRun();
    }
    await c.advance(1_000);
    const live = await c.liveTasks(id);
    assert.deepEqual(live.map(imageOf), ['busybox:2', 'busybox:2']);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'completed');
    await c.stop();
  });

  it('pauses on a failure past MaxFailureRatio, with swarmkit words', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 3, { Parallelism: 1, FailureAction: 'pause', Monitor: 5e9 });
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:bad' } };
    });
    await c.agentsRun();
    await c.agentsRun();
    const fresh = (await c.liveTasks(id)).find((t) => imageOf(t) === 'busybox:bad');
    assert.ok(fresh);
    await c.advance(1_000);
    await c.fail(fresh.ID, 1);
    const s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'paused');
    assert.equal(
      s.UpdateStatus?.Message,
      `update paused due to failure or early termination of task ${fresh.ID}`,
    );
    const old = async () => (await c.liveTasks(id)).map(imageOf).filter((i) => i === 'busybox:1').length;
    const atPause = await old();
    assert.ok(atPause > 0);
    await c.advance(20_000);
    await c.agentsRun();
    await c.agentsRun();
    assert.equal(await old(), atPause, 'paused: the rest stay old');
    await c.stop();
  });

  it('tolerates failures up to MaxFailureRatio of the slots', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 4, {
      Parallelism: 0,
      FailureAction: 'pause',
      Monitor: 5e9,
      MaxFailureRatio: 0.25,
    });
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:2' } };
    });
    await c.agentsRun();
    await c.agentsRun();
    const fresh = (await c.liveTasks(id)).filter((t) => imageOf(t) === 'busybox:2');
    assert.equal(fresh.length, 4, 'Parallelism 0: all at once');
    await c.fail(fresh[0]?.ID ?? '', 1);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'updating', '1 of 4 is not past 0.25');
    await c.fail(fresh[1]?.ID ?? '', 1);
    const s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'paused');
    assert.match(
      s.UpdateStatus?.Message ?? '',
      /^update paused due to failure or early termination of task t\d+$/,
    );
    await c.stop();
  });

  it('a new leader takes up an update where the old one left it', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 3, { Parallelism: 1, Monitor: 1e9 });
    const standby = c.startManager('m2');
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:2' } };
    });
    await c.agentsRun();
    await c.agentsRun();
    await c.orchestrators[0]?.stop();
    await c.settle();
    assert.equal(standby.leading, true);
    for (let i = 0; i < 8; i++) {
      await c.agentsRun();
      await c.advance(500);
    }
    await c.advance(1_000);
    assert.deepEqual((await c.liveTasks(id)).map(imageOf), ['busybox:2', 'busybox:2', 'busybox:2']);
    const s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'completed');
    await c.stop();
  });

  it('continue goes on past failures; a failure after Monitor does not count', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 2, { Parallelism: 1, FailureAction: 'continue', Monitor: 1e9 });
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:2' } };
    });
    for (let i = 0; i < 3; i++) {
      await c.agentsRun();
      await c.agentsRun();
      const fresh = (await c.liveTasks(id)).find(
        (t) => imageOf(t) === 'busybox:2' && t.Status.State === 'running',
      );
      if (i === 0 && fresh) await c.fail(fresh.ID, 1);
      await c.advance(1);
    }
    await c.agentsRun();
    await c.advance(2_000);
    await c.agentsRun();
    await c.advance(2_000);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'completed');
    assert.deepEqual((await c.liveTasks(id)).map(imageOf), ['busybox:2', 'busybox:2']);
    await c.stop();
  });

  it('rolls back to PreviousSpec with RollbackConfig on failure, and completes the rollback', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(
      c,
      2,
      { Parallelism: 1, FailureAction: 'rollback', Monitor: 5e9 },
      { Parallelism: 0, Monitor: 1e9 },
    );
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:bad' } };
    });
    await c.agentsRun();
    await c.agentsRun();
    const fresh = (await c.liveTasks(id)).find((t) => imageOf(t) === 'busybox:bad');
    assert.ok(fresh);
    await c.fail(fresh.ID, 1);
    let s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'rollback_started');
    assert.equal(
      s.UpdateStatus?.Message,
      `update rolled back due to failure or early termination of task ${fresh.ID}`,
    );
    assert.equal(s.Spec.TaskTemplate?.ContainerSpec?.Image, 'busybox:1');
    assert.equal(s.PreviousSpec?.TaskTemplate?.ContainerSpec?.Image, 'busybox:bad');
    for (let i = 0; i < 4; i++) await c.agentsRun();
    await c.advance(1_000);
    s = await c.service(id);
    assert.equal(s.UpdateStatus?.State, 'rollback_completed');
    assert.equal(s.UpdateStatus?.Message, 'rollback completed');
    assert.deepEqual((await c.liveTasks(id)).map(imageOf), ['busybox:1', 'busybox:1']);
    await c.stop();
  });

  it('a manual rollback (Spec and PreviousSpec swapped) is rolled with its words', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 1, { Parallelism: 1, Monitor: 1e9 });
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:2' } };
    });
    for (let i = 0; i < 3; i++) await c.agentsRun();
    await c.advance(1_000);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'completed');
    const s = await c.service(id);
    await c.updateService(id, (spec) => {
      Object.assign(spec, structuredClone(s.PreviousSpec));
    });
    const after = await c.service(id);
    assert.equal(after.UpdateStatus?.State, 'rollback_started');
    assert.equal(after.UpdateStatus?.Message, 'manually requested rollback');
    for (let i = 0; i < 3; i++) await c.agentsRun();
    // no RollbackConfig: swarmkit's defaults (Monitor 5 s)
    await c.advance(4_000);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'rollback_started');
    await c.advance(1_000);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'rollback_completed');
    assert.deepEqual((await c.liveTasks(id)).map(imageOf), ['busybox:1']);
    await c.stop();
  });

  it('a rollback of a paused update replaces only the slots the update had reached', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 3, { Parallelism: 1, FailureAction: 'pause', Monitor: 5e9, Delay: 60e9 });
    const before = new Set((await c.liveTasks(id)).map((t) => t.ID));
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ContainerSpec: { Image: 'busybox:bad' } };
    });
    await c.agentsRun();
    await c.agentsRun();
    const fresh = (await c.liveTasks(id)).find((t) => imageOf(t) === 'busybox:bad');
    assert.ok(fresh);
    await c.fail(fresh.ID, 1);
    assert.equal((await c.service(id)).UpdateStatus?.State, 'paused');
    // POST /services/{id}/update?rollback=previous, as the services API writes it
    const s = await c.service(id);
    const back = structuredClone(s.PreviousSpec);
    assert.ok(back);
    s.PreviousSpec = s.Spec;
    s.Spec = back;
    s._.specVersion++;
    s.UpdateStatus = {
      State: 'rollback_started',
      StartedAt: new Date(c.clock.now()).toISOString(),
      Message: 'manually requested rollback',
    };
    await c.store.put(keys.service(id), JSON.stringify(s));
    await c.settle();
    for (let i = 0; i < 4; i++) await c.agentsRun();
    await c.advance(5_000);
    const after = await c.service(id);
    assert.equal(after.UpdateStatus?.State, 'rollback_completed');
    assert.equal(after.UpdateStatus?.Message, 'rollback completed');
    const live = await c.liveTasks(id);
    assert.deepEqual(live.map(imageOf), ['busybox:1', 'busybox:1', 'busybox:1']);
    assert.equal(
      live.filter((t) => before.has(t.ID)).length,
      2,
      'the two slots never updated kept their tasks',
    );
    assert.ok(live.every((t) => t._.specVersion === after._.specVersion));
    await c.stop();
  });

  it('labels or replicas alone replace nothing', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await serviceOf(c, 1, { Parallelism: 1 });
    const before = (await c.liveTasks(id)).map((t) => t.ID);
    await c.updateService(id, (s) => (s.Labels = { a: 'b' }), false);
    assert.deepEqual(
      (await c.liveTasks(id)).map((t) => t.ID),
      before,
    );
    assert.equal((await c.service(id)).UpdateStatus, undefined);
    await c.stop();
  });
});
