import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isKind } from '../../../../../src/common/errors.js';
import { Logger } from '../../../../../src/common/log.js';
import { isAssigned } from '../../../../../src/engine/swarm/cluster-api/assignments.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import {
  attachContainer,
  listAttachments,
  releaseContainer,
} from '../../../../../src/engine/swarm/networks/attachment-tasks.js';
import { networkKeys } from '../../../../../src/engine/swarm/networks/network-keys.js';
import { nodeOverlay } from '../../../../../src/engine/swarm/networks/node-overlay.js';
import { SwarmNetworks } from '../../../../../src/engine/swarm/networks/swarm-networks.js';
import type { StoredTask } from '../../../../../src/engine/swarm/tasks/task.types.js';
import { TestCluster } from '../orchestrator/harness.js';

/**
 * Network-attachment tasks on the manager: an address of an attachable network for a node's
 * container, held by a task no loop runs, reaps or schedules; released with the container, or
 * with its node.
 */
describe('network-attachment tasks', () => {
  async function setUp() {
    const c = await TestCluster.start(['n1', 'n2']);
    const nets = new SwarmNetworks({
      swarm: { managerStore: () => c.store, isManager: () => true },
      log: new Logger('error'),
      esp: async () => false,
    });
    const att = (await nets.create({ Name: 'att', Driver: 'overlay', Attachable: true })).Id;
    const plain = (await nets.create({ Name: 'plain', Driver: 'overlay' })).Id;
    let n = 0;
    const opts = { now: () => new Date(c.clock.now()), newId: () => `a${++n}` };
    return { c, att, plain, opts, nets };
  }

  it('hands out the lowest free address once per container and network, and gives it back', async () => {
    const { c, att, opts, nets } = await setUp();
    const one = await attachContainer(
      c.store,
      'n2',
      { ContainerID: 'c1', Network: 'att', Names: ['pal'] },
      opts,
    );
    assert.equal(one.NetworkID, att);
    assert.equal(one.NetworkName, 'att');
    assert.equal(one.Address, '10.0.0.2/24');
    // the same container again: the same task (a retried start)
    const again = await attachContainer(c.store, 'n2', { ContainerID: 'c1', Network: att, Names: [] }, opts);
    assert.equal(again.TaskID, one.TaskID);
    const two = await attachContainer(c.store, 'n1', { ContainerID: 'c2', Network: 'att', Names: [] }, opts);
    assert.equal(two.Address, '10.0.0.3/24');

    const task = JSON.parse((await c.store.get(keys.task(one.TaskID)))?.value ?? '{}') as StoredTask;
    assert.deepEqual(task.Spec, {
      NetworkAttachmentSpec: { ContainerID: 'c1' },
      Networks: [{ Target: att }],
      ForceUpdate: 0,
      Runtime: 'attachment',
    });
    assert.equal(task.NodeID, 'n2');
    assert.equal(task.ServiceID, '');
    assert.equal(task.Status.State, 'running');
    assert.equal(isAssigned(task, 'n2'), false, 'no agent runs it');
    const claim = await c.store.get(networkKeys.ipam(att, '10.0.0.2'));
    assert.deepEqual(JSON.parse(claim?.value ?? '{}'), { kind: 'task', task: one.TaskID });

    // the picture of every node on the network: the container's peer entry and its names
    const n1 = await nodeOverlay(c.store, 'n1');
    assert.deepEqual(
      n1.networks.map((x) => x.name),
      ['att'],
    );
    assert.ok(n1.networks[0]?.peers.some((p) => p.ip === '10.0.0.2' && p.mac === '02:42:0a:00:00:02'));
    assert.ok(n1.networks[0]?.names.some((x) => x.ip === '10.0.0.2' && x.names.includes('pal')));

    // the network is in use while a container holds it (swarmkit's words)
    await assert.rejects(
      nets.remove('att'),
      (err: Error) =>
        err.message ===
        `rpc error: code = FailedPrecondition desc = network ${att} is in use by task ${one.TaskID}`,
    );
    // the orchestrator leaves it alone (no service, no scheduling, no reaping)
    await c.advance(10_000);
    assert.ok(await c.store.get(keys.task(one.TaskID)));

    assert.deepEqual(await listAttachments(c.store, 'n2'), [
      { TaskID: one.TaskID, ContainerID: 'c1', NetworkID: att },
    ]);
    assert.deepEqual(await releaseContainer(c.store, 'n2', { ContainerID: 'c1' }), {
      Released: [one.TaskID],
    });
    assert.equal(await c.store.get(keys.task(one.TaskID)), undefined);
    assert.equal(await c.store.get(networkKeys.ipam(att, '10.0.0.2')), undefined);
    assert.deepEqual((await nodeOverlay(c.store, 'n2')).networks, []);
    // another node's container is not this node's to release
    assert.deepEqual(await releaseContainer(c.store, 'n2', { ContainerID: 'c2' }), { Released: [] });
    await c.stop();
  });

  it("refuses a network that is not attachable, or none; goes with its node's removal", async () => {
    const { c, opts } = await setUp();
    await assert.rejects(
      attachContainer(c.store, 'n1', { ContainerID: 'c1', Network: 'plain', Names: [] }, opts),
      (err: Error) => isKind(err, 'Forbidden') && err.message === 'network plain not manually attachable',
    );
    await assert.rejects(
      attachContainer(c.store, 'n1', { ContainerID: 'c1', Network: 'nosuch', Names: [] }, opts),
      (err: Error) => isKind(err, 'NotFound') && err.message === 'network nosuch not found',
    );
    const a = await attachContainer(c.store, 'n2', { ContainerID: 'c1', Network: 'att', Names: [] }, opts);
    await c.store.delete(keys.node('n2'));
    await c.advance(1000);
    assert.equal(await c.store.get(keys.task(a.TaskID)), undefined, 'reaped with its node');
    await c.stop();
  });

  it('claims exactly the address asked for, or refuses it as libnetwork does', async () => {
    const { c, att, opts } = await setUp();
    const call = (id: string, Address: string, node = 'n1') =>
      attachContainer(c.store, node, { ContainerID: id, Network: 'att', Names: [], Address }, opts);
    const one = await call('c1', '10.0.0.50');
    assert.equal(one.Address, '10.0.0.50/24');
    assert.ok(await c.store.get(networkKeys.ipam(att, '10.0.0.50')));
    const inUse = (err: Error) => isKind(err, 'Conflict') && err.message === 'Address already in use';
    // held by another container (on another node), the gateway, the network and broadcast addresses
    await assert.rejects(call('c2', '10.0.0.50', 'n2'), inUse);
    await assert.rejects(call('c2', '10.0.0.1'), inUse);
    await assert.rejects(call('c2', '10.0.0.0'), inUse);
    await assert.rejects(call('c2', '10.0.0.255'), inUse);
    await assert.rejects(
      call('c2', '10.9.0.5'),
      (err: Error) => isKind(err, 'InvalidParameter') && err.message === 'requested address is out of range',
    );
    await assert.rejects(
      attachContainer(
        c.store,
        'n1',
        { ContainerID: 'c2', Network: 'att', Names: [], Address6: 'fd00::5' },
        opts,
      ),
      (err: Error) => isKind(err, 'InvalidParameter') && /no IPv6 pool/.test(err.message),
    );
    // nothing was claimed by the refusals; the lowest free address is still handed out unasked
    const two = await attachContainer(c.store, 'n2', { ContainerID: 'c2', Network: 'att', Names: [] }, opts);
    assert.equal(two.Address, '10.0.0.2/24');
    await c.stop();
  });
});
