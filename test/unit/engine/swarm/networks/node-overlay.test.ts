import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { nodeOverlay } from '../../../../../src/engine/swarm/networks/node-overlay.js';
import { SwarmNetworks } from '../../../../../src/engine/swarm/networks/swarm-networks.js';
import { TestCluster } from '../orchestrator/harness.js';

/**
 * What the managers tell a node of its overlay networks: only the networks its live tasks use,
 * every live attachment on them with its node's address, and names from the running tasks.
 */
describe("a node's overlay picture", () => {
  it('has the networks of its tasks, the peers on every node and the running tasks’ names', async () => {
    const c = await TestCluster.start(['n1', 'n2', 'n3']);
    const nets = new SwarmNetworks({
      swarm: { managerStore: () => c.store, isManager: () => true },
      log: new Logger('error'),
      esp: async () => false,
    });
    const ov = (await nets.create({ Name: 'ov', Driver: 'overlay', Labels: { a: 'b' } })).Id;
    const other = (await nets.create({ Name: 'other', Driver: 'overlay' })).Id;
    const web = await c.createService({
      Name: 'web',
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox' },
        Networks: [{ Target: ov, Aliases: ['www'] }],
        Placement: { Constraints: ['node.id!=n3'] },
      },
      Mode: { Replicated: { Replicas: 2 } },
      EndpointSpec: { Mode: 'dnsrr' },
    });
    await c.createService({
      Name: 'api',
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox' },
        Networks: [{ Target: other }],
        Placement: { Constraints: ['node.id==n3'] },
      },
      Mode: { Replicated: { Replicas: 1 } },
    });
    const before = await nodeOverlay(c.store, 'n1');
    assert.deepEqual(
      before.networks.map((n) => n.name),
      ['ov'],
    );
    const net = before.networks[0];
    assert.equal(net?.vni, 4097);
    assert.equal(net?.info.labels?.a, 'b');
    assert.equal(net?.peers.length, 2);
    assert.deepEqual(net?.names, [], 'no task runs yet: no names');
    assert.match(net?.peers[0]?.mac ?? '', /^02:42:0a:00:00:0[0-9a-f]$/);
    assert.deepEqual(
      (await nodeOverlay(c.store, 'n3')).networks.map((n) => n.name),
      ['other'],
    );

    await c.agentsRun();
    const after = await nodeOverlay(c.store, 'n2');
    const names = after.networks[0]?.names ?? [];
    const tasks = await c.liveTasks(web);
    assert.equal(names.length, 2);
    for (const t of tasks) {
      const ip = t.NetworksAttachments?.[0]?.Addresses[0]?.split('/')[0];
      const entry = names.find((n) => n.ip === ip);
      assert.deepEqual(entry?.names, ['tasks.web', `web.${t.Slot}.${t.ID}`, 'web', 'www']);
    }
    // the api service (vip) is not on ov: no VIP of it here; on `other`, its VIP and its backend
    const n3 = await nodeOverlay(c.store, 'n3');
    const vip = n3.networks[0]?.vips[0];
    assert.match(vip?.vip ?? '', /^10\.0\.1\.2$/);
    assert.equal(vip?.backends.length, 1);
    assert.ok(n3.networks[0]?.names.some((n) => n.names.includes('api') && n.ip === vip?.vip));
    assert.equal(n3.ingress, undefined, 'no routing mesh while no port is published through it');

    // a port through the mesh: every node gets its sandbox's address on ingress, and the
    // other nodes' sandboxes as peers there
    const ingress = await nets.createIngress();
    await c.createService({
      Name: 'pub',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' } },
      Mode: { Replicated: { Replicas: 1 } },
      EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 8080 }] },
    });
    await c.settle();
    const n1 = await nodeOverlay(c.store, 'n1');
    assert.equal(n1.ingress?.networkId, ingress);
    assert.match(n1.ingress?.address ?? '', /^10\.0\.2\.\d+\/24$/);
    const ingressState = n1.networks.find((n) => n.id === ingress);
    assert.ok(ingressState, 'the ingress network is among the node’s');
    assert.ok((ingressState?.peers.length ?? 0) >= 3, 'the three sandboxes at least');
    await c.stop();
  });
});
