import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Plan } from '../../../../../src/engine/swarm/orchestrator/plan.js';
import { perNode, TestCluster } from './harness.js';

const busybox = { ContainerSpec: { Image: 'busybox' } };

describe('the replicated orchestrator and the restart supervisor', () => {
  it('scales up into the lowest free slots and down from the nodes with most tasks, highest slots first', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const id = await c.createService({ TaskTemplate: busybox, Mode: { Replicated: { Replicas: 2 } } });
    await c.agentsRun();
    await c.updateService(id, (s) => (s.Mode = { Replicated: { Replicas: 5 } }), false);
    await c.agentsRun();
    let live = await c.liveTasks(id);
    assert.deepEqual(
      live.map((t) => t.Slot),
      [1, 2, 3, 4, 5],
    );
    assert.deepEqual(perNode(live), { n1: 3, n2: 2 });
    await c.updateService(id, (s) => (s.Mode = { Replicated: { Replicas: 3 } }), false);
    live = await c.liveTasks(id);
    // n1 had 3: its highest slot goes first, then n1 and n2 hold 2 each: the highest slot
    assert.deepEqual(perNode(live), { n1: 2, n2: 1 });
    assert.equal(live.length, 3);
    const removed = (await c.tasks(id)).filter((t) => t.DesiredState === 'remove');
    assert.equal(removed.length, 2);
    // the agents stop them, the reaper deletes them
    await c.agentsRun();
    assert.equal((await c.tasks(id)).length, 3);
    // scaling does not start an update
    assert.equal((await c.service(id)).UpdateStatus, undefined);
    await c.stop();
  });

  it('replaces a failed task in the same slot after the restart delay, keeping the failed one in history', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const id = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Condition: 'any', Delay: 2e9 } },
      Mode: { Replicated: { Replicas: 2 } },
    });
    await c.agentsRun();
    const [first] = await c.tasks(id);
    assert.ok(first);
    await c.fail(first.ID);
    let slot1 = (await c.tasks(id)).filter((t) => t.Slot === 1);
    assert.equal(slot1.length, 1, 'nothing before the delay');
    assert.equal(slot1[0]?.DesiredState, 'shutdown');
    await c.advance(1000);
    assert.equal((await c.tasks(id)).filter((t) => t.Slot === 1).length, 1);
    await c.advance(1000);
    slot1 = (await c.tasks(id)).filter((t) => t.Slot === 1);
    assert.equal(slot1.length, 2);
    const old = slot1.find((t) => t.ID === first.ID);
    assert.equal(old?.Status.State, 'failed');
    assert.equal(old?.Status.Err, 'task: non-zero exit (137)');
    const replacement = slot1.find((t) => t.ID !== first.ID);
    assert.equal(replacement?.DesiredState, 'running');
    assert.equal(replacement?.Status.State, 'assigned');
    await c.stop();
  });

  it('follows the restart condition: none never, on-failure not after exit 0', async () => {
    const c = await TestCluster.start(['n1']);
    const none = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Condition: 'none', Delay: 0 } },
    });
    const onFailure = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Condition: 'on-failure', Delay: 0 } },
      Mode: { Replicated: { Replicas: 2 } },
    });
    await c.agentsRun();
    await c.fail((await c.tasks(none))[0]?.ID ?? '');
    const [a, b] = await c.tasks(onFailure);
    await c.report(a?.ID ?? '', 'complete', { ExitCode: 0 });
    await c.fail(b?.ID ?? '', 1);
    await c.advance(10);
    assert.equal((await c.tasks(none)).length, 1, 'condition none: not replaced, slot not refilled');
    const tasks = await c.tasks(onFailure);
    assert.equal(tasks.filter((t) => t.Slot === 1).length, 1, 'exit 0: not replaced');
    assert.equal(tasks.filter((t) => t.Slot === 2).length, 2, 'exit 1: replaced');
    await c.stop();
  });

  it('caps replacements at MaxAttempts within the Window', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await c.createService({
      TaskTemplate: {
        ...busybox,
        RestartPolicy: { Condition: 'any', Delay: 0, MaxAttempts: 2, Window: 60e9 },
      },
    });
    for (let i = 0; i < 4; i++) {
      await c.agentsRun();
      const live = await c.liveTasks(id);
      if (live[0]) await c.fail(live[0].ID);
      await c.advance(10);
    }
    // the first task and two replacements
    assert.equal((await c.tasks(id)).length, 3);
    assert.equal((await c.liveTasks(id)).length, 0);
    await c.stop();
  });

  it('counts MaxAttempts beyond the history the reaper keeps', async () => {
    const c = await TestCluster.start(['n1'], 3);
    const id = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Condition: 'any', Delay: 0, MaxAttempts: 6 } },
    });
    const seen = new Set<string>();
    for (let i = 0; i < 10; i++) {
      await c.agentsRun();
      const [live] = await c.liveTasks(id);
      if (!live) break;
      seen.add(live.ID);
      await c.fail(live.ID);
      await c.advance(1);
    }
    assert.equal(seen.size, 7, 'the first task and six replacements');
    assert.equal((await c.liveTasks(id)).length, 0);
    assert.equal((await c.tasks(id)).length, 3, 'history kept to the limit');
    await c.stop();
  });

  it('counts only the failures inside the Window', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await c.createService({
      TaskTemplate: {
        ...busybox,
        RestartPolicy: { Condition: 'any', Delay: 0, MaxAttempts: 1, Window: 10e9 },
      },
    });
    // failures 20 s apart: each is the only one in its window, so each is replaced
    for (let i = 0; i < 3; i++) {
      await c.agentsRun();
      const [live] = await c.liveTasks(id);
      assert.ok(live, `round ${i}: a task runs`);
      await c.advance(20_000);
      await c.fail(live.ID);
      await c.advance(1);
    }
    assert.equal((await c.liveTasks(id)).length, 1);
    // two failures within 10 s: the second is not replaced
    await c.agentsRun();
    const [live] = await c.liveTasks(id);
    await c.advance(20_000);
    await c.fail(live?.ID ?? '');
    await c.advance(1);
    await c.agentsRun();
    const [next] = await c.liveTasks(id);
    assert.ok(next, 'the first failure in the window is replaced');
    await c.advance(1_000);
    await c.fail(next?.ID ?? '');
    await c.advance(1);
    assert.equal((await c.liveTasks(id)).length, 0);
    await c.stop();
  });

  it('replaces the tasks of a node that went down elsewhere, after the restart delay', async () => {
    const c = await TestCluster.start(['n1', 'n2', 'n3']);
    const id = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Delay: 1e9 } },
      Mode: { Replicated: { Replicas: 6 } },
    });
    await c.agentsRun();
    await c.nodeDown('n2');
    let live = await c.liveTasks(id);
    assert.equal(live.length, 4, 'the down node tasks are told to stop');
    await c.advance(1000);
    live = await c.liveTasks(id);
    assert.equal(live.length, 6);
    assert.deepEqual(perNode(live), { n1: 3, n3: 3 });
    // the old ones stay as history with desired shutdown, their slots refilled
    const onN2 = (await c.tasks(id)).filter((t) => t.NodeID === 'n2');
    assert.equal(onN2.length, 2);
    assert.ok(onN2.every((t) => t.DesiredState === 'shutdown'));
    // the node comes back: no slot has two tasks desired to run
    await c.nodeUp('n2');
    await c.agentsRun();
    const slots = (await c.liveTasks(id)).map((t) => t.Slot);
    assert.equal(new Set(slots).size, 6);
    await c.stop();
  });

  it('evicts tasks from a drained node and from a node that no longer meets the constraints', async () => {
    const c = await TestCluster.start([
      { id: 'n1', labels: { tier: 'web' } },
      { id: 'n2', labels: { tier: 'web' } },
    ]);
    const id = await c.createService({
      TaskTemplate: { ...busybox, Placement: { Constraints: ['node.labels.tier==web'] } },
      Mode: { Replicated: { Replicas: 4 } },
    });
    await c.agentsRun();
    await c.updateNode('n1', (n) => {
      n.Spec.Availability = 'drain';
    });
    let live = await c.liveTasks(id);
    assert.deepEqual(perNode(live), { n2: 4 });
    await c.updateNode('n1', (n) => {
      n.Spec.Availability = 'active';
    });
    await c.agentsRun();
    await c.updateNode('n2', (n) => {
      n.Spec.Labels = {};
    });
    live = await c.liveTasks(id);
    assert.equal(live.length, 4);
    assert.deepEqual(perNode(live), { n1: 4 });
    await c.stop();
  });

  it('never lowers a task state or a desired state (the plan moves them forward only)', () => {
    const snap = {
      services: new Map(),
      tasks: new Map(),
      nodes: new Map(),
      networks: new Map(),
      ipam: new Map(),
      live: new Set<string>(),
      downSince: new Map(),
      taskHistoryLimit: 5,
    };
    const plan = new Plan(snap, Date.now(), () => 'x');
    const t = plan.createTask(
      's',
      {
        ID: 's',
        CreatedAt: '',
        UpdatedAt: '',
        Spec: {},
        Endpoint: {},
        _: { specVersion: 1 },
      },
      { Slot: 1 },
    );
    plan.setStatus(t, 'running', 'started');
    plan.setStatus(t, 'pending', 'pending task scheduling');
    assert.equal(t.Status.State, 'running');
    plan.setDesired(t, 'shutdown');
    plan.setDesired(t, 'running');
    assert.equal(t.DesiredState, 'shutdown');
  });
});
