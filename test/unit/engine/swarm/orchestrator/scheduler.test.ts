import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConstraints } from '../../../../../src/engine/swarm/services/constraints.js';
import { perNode, TestCluster } from './harness.js';

const busybox = { ContainerSpec: { Image: 'busybox' } };

describe('the scheduler', () => {
  it('spreads 30 replicas on 3 equal nodes 10/10/10, each task new → pending → assigned', async () => {
    const c = await TestCluster.start(['n1', 'n2', 'n3']);
    const id = await c.createService({
      Name: 'web',
      TaskTemplate: busybox,
      Mode: { Replicated: { Replicas: 30 } },
    });
    const tasks = await c.tasks(id);
    assert.equal(tasks.length, 30);
    assert.deepEqual(perNode(tasks), { n1: 10, n2: 10, n3: 10 });
    assert.deepEqual(
      [...new Set(tasks.map((t) => t.Slot))].sort((a, b) => (a ?? 0) - (b ?? 0)),
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
    for (const t of tasks) {
      assert.equal(t.Status.State, 'assigned');
      assert.equal(t.Status.Message, 'scheduler assigned task to node');
      assert.equal(t.DesiredState, 'running');
      assert.deepEqual(t.Spec, busybox);
      assert.deepEqual(t._, { specVersion: 1, serviceName: 'web' });
      assert.match(t.ID, /^t\d{4}$/);
    }
    await c.stop();
  });

  it('prefers the nodes with the fewest tasks of the service, then the fewest in all', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    await c.createService({ Name: 'a', TaskTemplate: busybox, Mode: { Replicated: { Replicas: 3 } } });
    // n1 holds 2 of a, n2 1: b's first task goes to n2 (fewer in all), its second to n1
    const b = await c.createService({
      Name: 'b',
      TaskTemplate: busybox,
      Mode: { Replicated: { Replicas: 2 } },
    });
    assert.deepEqual(perNode(await c.tasks(b)), { n1: 1, n2: 1 });
    const first = (await c.tasks(b)).find((t) => t.Slot === 1);
    assert.equal(first?.NodeID, 'n2');
    await c.stop();
  });

  it('leaves a task pending with swarmkit words when constraints hold nowhere, and places it once a label fits', async () => {
    const c = await TestCluster.start(['n1', 'n2', 'n3']);
    const id = await c.createService({
      Name: 'db',
      TaskTemplate: { ...busybox, Placement: { Constraints: ['node.labels.disk==ssd'] } },
    });
    let [t] = await c.tasks(id);
    assert.equal(t?.Status.State, 'pending');
    assert.equal(t?.Status.Message, 'pending task scheduling');
    assert.equal(t?.Status.Err, 'no suitable node (scheduling constraints not satisfied on 3 nodes)');
    assert.equal(t?.NodeID, undefined);
    await c.updateNode('n2', (n) => {
      n.Spec.Labels = { disk: 'SSD' }; // values compare without case
    });
    [t] = await c.tasks(id);
    assert.equal(t?.Status.State, 'assigned');
    assert.equal(t?.NodeID, 'n2');
    assert.equal(t?.Status.Err, undefined);
    await c.stop();
  });

  it('matches node.id, node.hostname, node.role, platform, engine labels, == and !=', async () => {
    const c = await TestCluster.start([
      { id: 'n1', hostname: 'alpha', role: 'manager' },
      { id: 'n2', hostname: 'beta', engineLabels: { zone: 'b' } },
      { id: 'n3', hostname: 'gamma' },
    ]);
    const place = async (constraints: string[]) => {
      const id = await c.createService({
        TaskTemplate: { ...busybox, Placement: { Constraints: constraints } },
      });
      return (await c.tasks(id))[0]?.NodeID;
    };
    assert.equal(await place(['node.hostname==beta']), 'n2');
    assert.equal(await place(['node.id==n3']), 'n3');
    assert.equal(await place(['node.role==manager']), 'n1');
    assert.equal(await place(['engine.labels.zone==b']), 'n2');
    assert.equal(await place(['node.role!=manager', 'node.hostname!=beta']), 'n3');
    assert.equal(await place(['node.platform.os==linux', 'node.platform.arch==x86_64', 'node.id==n1']), 'n1');
    assert.equal(await place(['node.unknown==x']), undefined);
    await c.updateNode('n3', (n) => {
      n.Status.Addr = '192.168.5.7';
    });
    assert.equal(await place(['node.ip==192.168.5.7']), 'n3');
    assert.equal(await place(['node.ip==192.168.5.0/24']), 'n3');
    assert.equal(await place(['node.ip!=10.0.0.0/8', 'node.role!=manager']), 'n3');
    await c.stop();
  });

  it('refuses bad expressions with swarmkit words', () => {
    assert.throws(() => parseConstraints(['node.id']), /constraint expected one operator from ==, !=/);
    assert.throws(() => parseConstraints(['no de==x']), /key 'no de' is invalid/);
    assert.throws(() => parseConstraints(['node.id==a<b']), /value 'a<b' is invalid/);
    assert.deepEqual(parseConstraints([' node.labels.a == b ']), [
      { key: 'node.labels.a', op: '==', value: 'b' },
    ]);
  });

  it('counts reservations against the node resources less what its tasks reserve', async () => {
    const c = await TestCluster.start([
      { id: 'n1', cpus: 2e9 },
      { id: 'n2', cpus: 1e9 },
    ]);
    const id = await c.createService({
      TaskTemplate: { ...busybox, Resources: { Reservations: { NanoCPUs: 1e9 } } },
      Mode: { Replicated: { Replicas: 4 } },
    });
    const tasks = await c.tasks(id);
    assert.deepEqual(perNode(tasks), { n1: 2, n2: 1 });
    const pending = tasks.filter((t) => t.Status.State === 'pending');
    assert.equal(pending.length, 1);
    assert.equal(pending[0]?.Status.Err, 'no suitable node (insufficient resources on 2 nodes)');
    await c.stop();
  });

  it('keeps host-mode ports apart and honours MaxReplicas, explaining each', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const ports = {
      Ports: [
        { Protocol: 'tcp' as const, TargetPort: 80, PublishedPort: 8080, PublishMode: 'host' as const },
      ],
    };
    const id = await c.createService({
      TaskTemplate: busybox,
      Mode: { Replicated: { Replicas: 3 } },
      EndpointSpec: ports,
    });
    let tasks = await c.tasks(id);
    assert.deepEqual(perNode(tasks), { n1: 1, n2: 1 });
    assert.equal(
      tasks.find((t) => t.Status.State === 'pending')?.Status.Err,
      'no suitable node (host-mode port already in use on 2 nodes)',
    );
    const m = await c.createService({
      TaskTemplate: { ...busybox, Placement: { MaxReplicas: 1 } },
      Mode: { Replicated: { Replicas: 3 } },
    });
    tasks = await c.tasks(m);
    assert.deepEqual(perNode(tasks), { n1: 1, n2: 1 });
    assert.equal(
      tasks.find((t) => t.Status.State === 'pending')?.Status.Err,
      'no suitable node (max replicas per node limit exceed)',
    );
    await c.stop();
  });

  it('explains several filters, most failures first; paused and drained nodes take no new task', async () => {
    const c = await TestCluster.start([
      { id: 'n1', availability: 'pause' },
      { id: 'n2', availability: 'drain' },
      { id: 'n3' },
    ]);
    const id = await c.createService({
      TaskTemplate: { ...busybox, Placement: { Constraints: ['node.id==n9'] } },
    });
    assert.equal(
      (await c.tasks(id))[0]?.Status.Err,
      'no suitable node (2 nodes not available for new tasks; scheduling constraints not satisfied on 1 node)',
    );
    await c.nodeDown('n3');
    const p = await c.createService({
      TaskTemplate: { ...busybox, Placement: { Platforms: [{ OS: 'windows' }] } },
    });
    assert.equal((await c.tasks(p))[0]?.Status.Err, 'no suitable node (3 nodes not available for new tasks)');
    await c.updateNode('n1', (n) => {
      n.Spec.Availability = 'active';
    });
    assert.equal(
      (await c.tasks(p))[0]?.Status.Err,
      'no suitable node (2 nodes not available for new tasks; unsupported platform on 1 node)',
    );
    await c.stop();
  });

  it('spreads over a label value first with placement preferences', async () => {
    const c = await TestCluster.start([
      { id: 'n1', labels: { dc: 'east' } },
      { id: 'n2', labels: { dc: 'east' } },
      { id: 'n3', labels: { dc: 'east' } },
      { id: 'n4', labels: { dc: 'west' } },
    ]);
    const id = await c.createService({
      TaskTemplate: {
        ...busybox,
        Placement: { Preferences: [{ Spread: { SpreadDescriptor: 'node.labels.dc' } }] },
      },
      Mode: { Replicated: { Replicas: 6 } },
    });
    const counts = perNode(await c.tasks(id));
    assert.equal(counts.n4, 3);
    assert.equal((counts.n1 ?? 0) + (counts.n2 ?? 0) + (counts.n3 ?? 0), 3);
    await c.stop();
  });
});
