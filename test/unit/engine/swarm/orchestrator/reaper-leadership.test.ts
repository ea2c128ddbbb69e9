import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import { ClusterView } from '../../../../../src/engine/swarm/orchestrator/cluster-view.js';
import { Plan } from '../../../../../src/engine/swarm/orchestrator/plan.js';
import { commit, writesOf } from '../../../../../src/engine/swarm/orchestrator/writer.js';
import type { StoredTask } from '../../../../../src/engine/swarm/tasks/task.types.js';
import { TestCluster } from './harness.js';

const busybox = { ContainerSpec: { Image: 'busybox' } };
const log = new Logger('error');

describe('the task reaper', () => {
  it('keeps TaskHistoryRetentionLimit tasks per slot, deleting the oldest finished ones', async () => {
    const c = await TestCluster.start(['n1'], 3);
    const id = await c.createService({ TaskTemplate: { ...busybox, RestartPolicy: { Delay: 0 } } });
    const failed: string[] = [];
    for (let i = 0; i < 5; i++) {
      await c.agentsRun();
      const [live] = await c.liveTasks(id);
      if (!live) break;
      failed.push(live.ID);
      await c.advance(1000);
      await c.fail(live.ID);
      await c.advance(1);
    }
    const tasks = await c.tasks(id);
    assert.equal(tasks.length, 3, 'the running one and two finished');
    const kept = new Set(tasks.map((t) => t.ID));
    assert.deepEqual(
      failed.filter((f) => kept.has(f)),
      failed.slice(-2),
      'the newest history stays',
    );
    await c.stop();
  });

  it('keeps history per node for global services', async () => {
    const c = await TestCluster.start(['n1', 'n2'], 2);
    const id = await c.createService({
      TaskTemplate: { ...busybox, RestartPolicy: { Delay: 0 } },
      Mode: { Global: {} },
    });
    for (let i = 0; i < 3; i++) {
      await c.agentsRun();
      const onN1 = (await c.liveTasks(id)).find((t) => t.NodeID === 'n1');
      if (onN1) await c.fail(onN1.ID);
      await c.advance(1);
    }
    const tasks = await c.tasks(id);
    assert.equal(tasks.filter((t) => t.NodeID === 'n1').length, 2);
    assert.equal(tasks.filter((t) => t.NodeID === 'n2').length, 1);
    await c.stop();
  });

  it('removes a deleted service tasks: the running ones once their agent stopped them', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await c.createService({ TaskTemplate: busybox, Mode: { Replicated: { Replicas: 2 } } });
    await c.agentsRun();
    await c.removeService(id);
    let tasks = await c.tasks(id);
    assert.equal(tasks.length, 2);
    assert.ok(tasks.every((t) => t.DesiredState === 'remove'));
    await c.agentsRun();
    tasks = await c.tasks(id);
    assert.equal(tasks.length, 0);
    await c.stop();
  });
});

describe('leadership and guarded writes', () => {
  it('exactly one manager leads; on resign the other takes over the loops', async () => {
    const c = await TestCluster.start(['n1']);
    const second = c.startManager('m2');
    await c.settle();
    const [first] = c.orchestrators;
    assert.equal(first?.leading, true);
    assert.equal(second.leading, false);
    const leader = await c.store.leader(keys.election);
    assert.match(leader?.value ?? '', /"NodeID":"m1"/);
    await first?.stop();
    await c.settle();
    assert.equal(second.leading, true);
    const id = await c.createService({ TaskTemplate: busybox });
    assert.equal((await c.tasks(id)).length, 1, 'the new leader runs the loops');
    await c.stop();
  });

  it('a leader whose lease expired loses; its late write is refused and changes nothing', async () => {
    const c = await TestCluster.start(['n1']);
    const [first] = c.orchestrators;
    const id = await c.createService({ TaskTemplate: busybox });
    // a stale leader: a guard on an election key that is gone
    const leaderKv = await c.store.leader(keys.election);
    assert.ok(leaderKv);
    const guard = {
      key: leaderKv.key,
      target: 'create' as const,
      op: 'equal' as const,
      value: leaderKv.createRevision,
    };
    await first?.stop(); // resigns: the key goes
    const view = new ClusterView(c.store, c.clock, log, () => {});
    await view.start();
    const plan = new Plan(view, c.clock.now(), () => 'late1');
    const service = plan.services.get(id);
    assert.ok(service);
    plan.createTask(id, service, { Slot: 2 });
    const before = (await c.store.range(keys.tasks)).kvs.length;
    const res = await commit(
      { store: c.store, log, guard: () => guard, applyWrite: () => {} },
      writesOf(plan),
    );
    view.stop();
    assert.equal(res.deposed, true);
    assert.equal(res.written, 0);
    assert.equal((await c.store.range(keys.tasks)).kvs.length, before);
    assert.equal(await c.store.get(keys.task('late1')), undefined);
    await c.stop();
  });

  it('a write that loses a race with an agent report is retried from the newer value', async () => {
    const c = await TestCluster.start(['n1']);
    const id = await c.createService({ TaskTemplate: busybox });
    const view = new ClusterView(c.store, c.clock, log, () => {});
    await view.start();
    const plan = new Plan(view, c.clock.now(), () => 'x');
    const task = [...plan.tasks.values()].find((t) => t.ServiceID === id) as StoredTask;
    plan.setDesired(task, 'shutdown');
    const writes = writesOf(plan);
    view.stop();
    await c.report(task.ID, 'running'); // the agent wrote first
    const leaderKv = await c.store.leader(keys.election);
    const guard = {
      key: leaderKv?.key ?? '',
      target: 'create' as const,
      op: 'equal' as const,
      value: leaderKv?.createRevision ?? 0,
    };
    const res = await commit({ store: c.store, log, guard: () => guard, applyWrite: () => {} }, writes);
    assert.deepEqual(res, { written: 0, conflicts: 1, deposed: false });
    const stored = (await c.tasks(id))[0];
    assert.equal(stored?.Status.State, 'running', 'the report is not lost');
    assert.equal(stored?.DesiredState, 'running');
    await c.stop();
  });

  it('passes again soon when a write fails on a store error (no watch event would bring it)', async () => {
    const c = await TestCluster.start(['n1']);
    const txn = c.store.txn.bind(c.store);
    let failures = 1;
    c.store.txn = async (...args: Parameters<typeof txn>) => {
      if (failures-- > 0) throw new Error('etcdserver: leader changed');
      return txn(...args);
    };
    const id = await c.createService({ TaskTemplate: busybox });
    assert.equal((await c.tasks(id)).length, 0);
    await c.advance(500);
    assert.equal((await c.tasks(id)).length, 1);
    await c.stop();
  });

  it('campaigns again when its lease cannot be kept alive', async () => {
    const c = await TestCluster.start(['n1']);
    const [first] = c.orchestrators;
    assert.equal(first?.leading, true);
    const before = await c.store.leader(keys.election);
    c.store.failWith = new Error('etcdserver: request timed out');
    await c.clock.advance(4_000);
    c.store.failWith = undefined;
    // the keepalive found the store away; once back its lease had expired: it lost, then won again
    await c.advance(2_000);
    await c.advance(2_000);
    assert.equal(first?.leading, true);
    const leaderKv = await c.store.leader(keys.election);
    assert.ok(leaderKv);
    assert.notEqual(leaderKv.key, before?.key, 'a new campaign under a new lease');
    const id = await c.createService({ TaskTemplate: busybox });
    assert.equal((await c.tasks(id)).length, 1);
    await c.stop();
  });
});
