import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { keys } from '../../../src/engine/swarm/keys.js';
import type { StoredService } from '../../../src/engine/swarm/services/service.types.js';
import type { Watch } from '../../../src/engine/swarm/store/cluster-store.js';
import { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import { type StoredTask, stateRank } from '../../../src/engine/swarm/tasks/task.types.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { freePort, initLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * The orchestrator on a real one-manager swarm (issue 14 §4): the engine's manager wins the
 * election in its etcd member and runs the control loops. Services are written into etcd through
 * the store, as the services API writes them; the scheduler writes their tasks `assigned` to the
 * node (seen in a watch of the task keys: the node's agent then takes them further and runs them).
 */
describe('the swarm orchestrator on a one-manager swarm', () => {
  let engine: TestEngine;
  let store: EtcdStore;
  let nodeId: string;
  let watch: Watch | undefined;
  /** Every version of every task written, in order, from the watch. */
  const written: StoredTask[] = [];
  const deleted = new Set<string>();

  before(async () => {
    const peerPort = await freePort();
    const listenPort = await freePort();
    engine = await TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] });
    await ensureBusybox(engine);
    nodeId = await initLoopbackSwarm(engine, listenPort);
    store = new EtcdStore({ socketPath: join(engine.execRoot, 'swarm', 'etcd.sock:0') });
    const from = (await store.range(keys.tasks)).revision + 1;
    watch = store.watch(keys.tasks, from, {
      onEvents: (events) => {
        for (const e of events) {
          if (e.type === 'put') written.push(JSON.parse(e.kv.value) as StoredTask);
          else deleted.add(e.kv.key.slice(keys.tasks.length));
        }
      },
      onError: () => {},
    });
  });
  after(async () => {
    watch?.close();
    store?.close();
    await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await engine?.destroy();
  });

  async function tasksOf(serviceId: string): Promise<StoredTask[]> {
    const r = await store.range(keys.tasks);
    return r.kvs.map((kv) => JSON.parse(kv.value) as StoredTask).filter((t) => t.ServiceID === serviceId);
  }

  async function waitFor<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
    let last: T | undefined;
    for (let i = 0; i < 100; i++) {
      last = await read();
      if (ok(last)) return last;
      await sleep(100);
    }
    assert.fail(`${what}: not within 10 s; last seen ${JSON.stringify(last)}`);
  }

  it('leads from the election key and assigns a written service tasks to the node', async () => {
    const leader = await waitFor(
      'a leader',
      () => store.leader(keys.election),
      (l) => l !== undefined,
    );
    assert.equal(JSON.parse(leader?.value ?? '{}').NodeID, nodeId);

    // busybox runs until told to stop (a short grace: sleep as pid 1 ignores SIGTERM)
    const run = { Image: 'busybox', Command: ['sleep', '300'], StopGracePeriod: 500_000_000 };
    const service: StoredService = {
      ID: 'orchtest0000000000000000a',
      CreatedAt: new Date().toISOString(),
      UpdatedAt: new Date().toISOString(),
      Spec: {
        Name: 'web',
        TaskTemplate: { ContainerSpec: run },
        Mode: { Replicated: { Replicas: 2 } },
      },
      Endpoint: {},
      _: { specVersion: 1 },
    };
    await store.put(keys.service(service.ID), JSON.stringify(service));
    await waitFor(
      'two tasks at least assigned',
      () => tasksOf(service.ID),
      (ts) => ts.length === 2 && ts.every((t) => stateRank(t.Status.State) >= stateRank('assigned')),
    );
    // as the scheduler wrote them: one version of each task `assigned` (the agent moves them on)
    const tasks = await waitFor(
      'the two assigned versions in the watch',
      async () => written.filter((t) => t.ServiceID === service.ID && t.Status.State === 'assigned'),
      (ts) => ts.length === 2,
    );
    for (const t of tasks) {
      assert.match(t.ID, /^[0-9a-z]{25}$/);
      assert.equal(t.NodeID, nodeId);
      assert.equal(t.DesiredState, 'running');
      assert.equal(t.Status.Message, 'scheduler assigned task to node');
      assert.deepEqual(t.Spec, service.Spec.TaskTemplate);
      assert.equal(t._.specVersion, 1);
    }
    assert.deepEqual(tasks.map((t) => t.Slot).sort(), [1, 2]);
    // and the node's agent runs them
    await waitFor(
      'the two tasks running',
      () => tasksOf(service.ID),
      (ts) => ts.length === 2 && ts.every((t) => t.Status.State === 'running'),
    );

    // a constraint no node meets: pending, in swarmkit's words
    const pinned = {
      ...service,
      ID: 'orchtest0000000000000000b',
      Spec: {
        Name: 'pinned',
        TaskTemplate: {
          ContainerSpec: run,
          Placement: { Constraints: ['node.labels.x==y'] },
        },
      },
    };
    await store.put(keys.service(pinned.ID), JSON.stringify(pinned));
    const [pending] = await waitFor(
      'a pending task',
      () => tasksOf(pinned.ID),
      (ts) => ts[0]?.Status.State === 'pending' && ts[0]?.Status.Err !== undefined,
    );
    assert.equal(pending?.Status.Err, 'no suitable node (scheduling constraints not satisfied on 1 node)');
    // the label added through the API: placed
    const node = (await engine.request('GET', `/nodes/${nodeId}`)).json<{
      Version: { Index: number };
      Spec: Record<string, unknown>;
    }>();
    const upd = await engine.request('POST', `/nodes/${nodeId}/update?version=${node.Version.Index}`, {
      body: { ...node.Spec, Labels: { x: 'y' } },
    });
    assert.equal(upd.status, 200, upd.text());
    await waitFor(
      'the pending task placed',
      () => tasksOf(pinned.ID),
      (ts) => stateRank(ts[0]?.Status.State ?? 'new') >= stateRank('assigned') && ts[0]?.NodeID === nodeId,
    );
    await waitFor(
      'the scheduler assigning the pending task, in the watch',
      async () =>
        written.some((t) => t.ID === pending?.ID && t.Status.State === 'assigned' && t.NodeID === nodeId),
      (seen) => seen,
    );

    // deleted: the tasks are told to go; the agent stops them, then the reaper deletes them
    const ids = tasks.map((t) => t.ID);
    await store.delete(keys.service(service.ID));
    await waitFor(
      'the deleted service tasks reaped',
      () => tasksOf(service.ID),
      (ts) => ts.length === 0,
    );
    await waitFor(
      'their deletions in the watch',
      async () => ids.filter((taskId) => !deleted.has(taskId)),
      (left) => left.length === 0,
    );
    for (const taskId of ids) {
      const versions = written.filter((t) => t.ID === taskId);
      const told = versions.findIndex((t) => t.DesiredState === 'remove');
      assert.ok(
        told >= 0,
        `task ${taskId} told remove: ${JSON.stringify(versions.map((t) => t.DesiredState))}`,
      );
      assert.equal(versions.at(-1)?.Status.State, 'shutdown', 'stopped by the agent before it went');
    }
    assert.equal(
      await engine.dockerOk(['ps', '-aq', '--filter', `label=com.docker.swarm.service.id=${service.ID}`]),
      '',
      'their containers are gone',
    );
  });
});
