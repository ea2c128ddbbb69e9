import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { applyStatusCall } from '../../../../../src/engine/swarm/cluster-api/task-status.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import { nodeOverlay } from '../../../../../src/engine/swarm/networks/node-overlay.js';
import { SwarmNetworks } from '../../../../../src/engine/swarm/networks/swarm-networks.js';
import type { NodePrivate } from '../../../../../src/engine/swarm/records.js';
import type { StoredTask } from '../../../../../src/engine/swarm/tasks/task.types.js';
import { TestCluster } from '../orchestrator/harness.js';

/**
 * The overlay picture's addresses and backends: VXLAN goes to each node's data-path address (its
 * record's, else its advertise address), `Peers` are the nodes the network is in use on (hostname,
 * advertise address), and a task its node said unhealthy is behind no VIP and answers no name,
 * though it still runs.
 */
describe("a node's overlay picture: data path, peers, unhealthy tasks", () => {
  async function setup() {
    const c = await TestCluster.start([
      { id: 'n1', hostname: 'host-one' },
      { id: 'n2', hostname: 'host-two' },
      { id: 'n3', hostname: 'host-three' },
    ]);
    await c.updateNode('n1', (n) => {
      n.Status.Addr = '192.168.1.1';
      (n as { _?: NodePrivate })._ = { dataPathAddr: '172.16.0.1' };
    });
    // an older record: no data-path address of its own
    await c.updateNode('n2', (n) => {
      n.Status.Addr = '192.168.1.2';
    });
    const nets = new SwarmNetworks({
      swarm: { managerStore: () => c.store, isManager: () => true },
      log: new Logger('error'),
      esp: async () => false,
    });
    const ov = (await nets.create({ Name: 'ov', Driver: 'overlay' })).Id;
    return { c, ov };
  }

  it('sends VXLAN to the data-path addresses and lists the nodes using the network', async () => {
    const { c, ov } = await setup();
    await c.createService({
      Name: 'web',
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox' },
        Networks: [{ Target: ov }],
        Placement: { Constraints: ['node.id!=n3'] },
      },
      Mode: { Replicated: { Replicas: 2 } },
    });
    await c.agentsRun();
    const n1 = await nodeOverlay(c.store, 'n1');
    assert.equal(n1.local, '172.16.0.1');
    assert.equal((await nodeOverlay(c.store, 'n2')).local, '192.168.1.2');
    const net = n1.networks[0];
    assert.deepEqual(new Set(net?.peers.map((p) => p.node)), new Set(['172.16.0.1', '192.168.1.2']));
    assert.deepEqual(net?.nodes, [
      { name: 'host-one', ip: '192.168.1.1' },
      { name: 'host-two', ip: '192.168.1.2' },
    ]);
    await c.stop();
  });

  it('takes a task said unhealthy out of the VIP, tasks.<name> and dnsrr while it runs', async () => {
    const { c, ov } = await setup();
    const vip = await c.createService({
      Name: 'vipweb',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Networks: [{ Target: ov }] },
      Mode: { Replicated: { Replicas: 2 } },
    });
    const rr = await c.createService({
      Name: 'rrweb',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Networks: [{ Target: ov }] },
      Mode: { Replicated: { Replicas: 2 } },
      EndpointSpec: { Mode: 'dnsrr' },
    });
    await c.agentsRun();
    const ipOf = (t: StoredTask) => t.NetworksAttachments?.[0]?.Addresses[0]?.split('/')[0] ?? '';
    const [sick, well] = await c.liveTasks(vip);
    const [rrSick, rrWell] = await c.liveTasks(rr);
    assert.ok(sick && well && rrSick && rrWell);
    const picture = async () => {
      const views = await Promise.all(['n1', 'n2', 'n3'].map((n) => nodeOverlay(c.store, n)));
      return views.flatMap((v) => v.networks).find((n) => n.id === ov);
    };
    const before = await picture();
    assert.deepEqual(before?.vips[0]?.backends, [ipOf(sick), ipOf(well)].sort());

    for (const t of [sick, rrSick]) {
      const answer = await applyStatusCall(
        c.store,
        t.NodeID ?? '',
        { Updates: [{ TaskID: t.ID, Status: t.Status, Unhealthy: true }] },
        () => new Date(),
      );
      assert.deepEqual(answer.Applied, [t.ID], 'a same-state report that says unhealthy is applied');
    }
    const stored = JSON.parse((await c.store.get(keys.task(sick.ID)))?.value ?? '{}') as StoredTask;
    assert.equal(stored.Status.State, 'running', 'its state does not move');
    assert.equal(stored._.unhealthy, true);
    const after = await picture();
    assert.deepEqual(after?.vips.find((v) => v.service === vip)?.backends, [ipOf(well)]);
    const named = (name: string) =>
      (after?.names ?? []).filter((n) => n.names.includes(name)).map((n) => n.ip);
    assert.deepEqual(named('tasks.vipweb'), [ipOf(well)]);
    assert.deepEqual(named('rrweb'), [ipOf(rrWell)]);
    assert.deepEqual(named('tasks.rrweb'), [ipOf(rrWell)]);
    // still an attachment on the network (its FDB entries stay until its container goes)
    assert.ok(after?.peers.some((p) => p.ip === ipOf(sick)));
    // said twice: nothing more to write
    const again = await applyStatusCall(
      c.store,
      sick.NodeID ?? '',
      { Updates: [{ TaskID: sick.ID, Status: sick.Status, Unhealthy: true }] },
      () => new Date(),
    );
    assert.deepEqual(again.Applied, []);
    await c.stop();
  });
});
