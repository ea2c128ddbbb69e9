import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { perNode, TestCluster } from './harness.js';

const busybox = { ContainerSpec: { Image: 'busybox' } };

describe('global services and jobs', () => {
  it('runs one task per eligible node, grows onto a node that joins, leaves drained and unfit nodes', async () => {
    const c = await TestCluster.start(['n1', 'n2', { id: 'n3', availability: 'pause' }]);
    const id = await c.createService({
      TaskTemplate: { ...busybox, Placement: { Constraints: ['node.labels.off!=yes'] } },
      Mode: { Global: {} },
    });
    let live = await c.liveTasks(id);
    assert.deepEqual(perNode(live), { n1: 1, n2: 1 }, 'pause: no new task');
    assert.ok(live.every((t) => t.Slot === undefined && t.Status.State === 'assigned'));
    await c.addNode({ id: 'n4' });
    await c.settle();
    assert.deepEqual(perNode(await c.liveTasks(id)), { n1: 1, n2: 1, n4: 1 });
    await c.agentsRun();
    await c.updateNode('n1', (n) => {
      n.Spec.Availability = 'drain';
    });
    await c.updateNode('n2', (n) => {
      n.Spec.Labels = { off: 'yes' };
    });
    live = await c.liveTasks(id);
    assert.deepEqual(perNode(live), { n4: 1 });
    await c.updateNode('n3', (n) => {
      n.Spec.Availability = 'active';
    });
    assert.deepEqual(perNode(await c.liveTasks(id)), { n3: 1, n4: 1 });
    await c.stop();
  });

  it('restarts a global task on its own node and leaves the tasks of a down node alone', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const id = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Delay: 0 } },
      Mode: { Global: {} },
    });
    await c.agentsRun();
    const onN1 = (await c.tasks(id)).find((t) => t.NodeID === 'n1');
    await c.fail(onN1?.ID ?? '');
    await c.advance(1);
    const n1 = (await c.tasks(id)).filter((t) => t.NodeID === 'n1');
    assert.equal(n1.length, 2);
    await c.nodeDown('n2');
    await c.advance(10_000);
    const n2 = (await c.tasks(id)).filter((t) => t.NodeID === 'n2');
    assert.equal(n2.length, 1);
    assert.equal(n2[0]?.DesiredState, 'running');
    await c.stop();
  });

  it('runs a replicated job to TotalCompletions with at most MaxConcurrent at once', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const id = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Condition: 'on-failure', Delay: 0 } },
      Mode: { ReplicatedJob: { MaxConcurrent: 2, TotalCompletions: 5 } },
    });
    const service = await c.service(id);
    assert.ok(service.JobStatus?.JobIteration.Index);
    const iteration = service.JobStatus?.JobIteration.Index;
    for (let round = 0; round < 10; round++) {
      await c.agentsRun();
      const running = (await c.tasks(id)).filter((t) => t.Status.State === 'running');
      assert.ok(running.length <= 2, `at most 2 at once, saw ${running.length}`);
      if (running.length === 0) break;
      // one failure on the way: it is restarted, not counted
      if (round === 1 && running[0]) await c.fail(running[0].ID, 1);
      for (const t of running.slice(round === 1 ? 1 : 0)) await c.report(t.ID, 'complete', { ExitCode: 0 });
      await c.advance(1);
    }
    const tasks = await c.tasks(id);
    assert.equal(tasks.filter((t) => t.Status.State === 'complete').length, 5);
    assert.equal(tasks.filter((t) => t.Status.State === 'failed').length, 1);
    assert.ok(tasks.every((t) => t.JobIteration?.Index === iteration));
    assert.equal((await c.liveTasks(id)).length, 0);
    await c.stop();
  });

  it('runs a global job once per node; a forced update starts a new iteration', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const id = await c.createService({ TaskTemplate: busybox, Mode: { GlobalJob: {} } });
    await c.agentsRun();
    for (const t of await c.tasks(id)) await c.report(t.ID, 'complete', { ExitCode: 0 });
    await c.advance(10_000);
    assert.equal((await c.tasks(id)).length, 2, 'completed once per node, not again');
    const first = (await c.service(id)).JobStatus?.JobIteration.Index ?? 0;
    await c.updateService(id, (s) => {
      s.TaskTemplate = { ...s.TaskTemplate, ForceUpdate: 1 };
    });
    const second = (await c.service(id)).JobStatus?.JobIteration.Index ?? 0;
    assert.ok(second > first);
    const fresh = (await c.tasks(id)).filter((t) => t.JobIteration?.Index === second);
    assert.deepEqual(perNode(fresh), { n1: 1, n2: 1 });
    await c.stop();
  });
});
