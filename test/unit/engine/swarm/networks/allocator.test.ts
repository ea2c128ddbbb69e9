import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { networkKeys } from '../../../../../src/engine/swarm/networks/network-keys.js';
import { SwarmNetworks } from '../../../../../src/engine/swarm/networks/swarm-networks.js';
import { TestCluster } from '../orchestrator/harness.js';

/**
 * The leader's network allocator against the in-memory store: VIPs per network, task attachments
 * before placement, claims under P/ipam never handed out twice, released with their holders.
 */

async function withNetworks(c: TestCluster): Promise<{ ov: string; ingress: string; tiny: string }> {
  let n = 0;
  const nets = new SwarmNetworks({
    swarm: { managerStore: () => c.store, isManager: () => true },
    log: new Logger('error'),
    esp: async () => false,
    newId: () => `net${++n}`,
  });
  const ingress = await nets.createIngress();
  const ov = (await nets.create({ Name: 'ov', Driver: 'overlay' })).Id;
  // a /29: network, gateway, broadcast leave 5 addresses
  const tiny = (
    await nets.create({ Name: 'tiny', Driver: 'overlay', IPAM: { Config: [{ Subnet: '10.5.0.0/29' }] } })
  ).Id;
  await c.settle();
  return { ov, ingress, tiny };
}

async function claims(c: TestCluster): Promise<Record<string, string>> {
  const r = await c.store.range(networkKeys.ipamAll);
  return Object.fromEntries(r.kvs.map((kv) => [kv.key.slice(networkKeys.ipamAll.length), kv.value]));
}

const busybox = { ContainerSpec: { Image: 'busybox' } };

describe('network allocator', () => {
  it('gives a vip service a VIP per network and each task an address before it is placed', async () => {
    const c = await TestCluster.start(['n1', 'n2']);
    const { ov, ingress } = await withNetworks(c);
    const id = await c.createService({
      TaskTemplate: { ...busybox, Networks: [{ Target: ov }] },
      Mode: { Replicated: { Replicas: 3 } },
      EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 8080 }] },
    });
    const svc = await c.service(id);
    assert.deepEqual(svc.Endpoint?.VirtualIPs, [
      { NetworkID: ov, Addr: '10.0.1.2/24' },
      { NetworkID: ingress, Addr: '10.0.0.2/24' },
    ]);
    const tasks = await c.liveTasks(id);
    assert.equal(tasks.length, 3);
    const addrs = tasks.map((t) =>
      (t.NetworksAttachments ?? []).map((a) => `${a.Network.ID}=${a.Addresses[0]}`),
    );
    const ingressAddrs = addrs.flat().filter((a) => a.startsWith(`${ingress}=`));
    assert.equal(new Set(ingressAddrs).size, 3);
    for (const a of ingressAddrs) assert.match(a, /=10\.0\.0\.\d+\/24$/);
    assert.deepEqual(
      addrs
        .flat()
        .filter((a) => a.startsWith(`${ov}=`))
        .sort(),
      [`${ov}=10.0.1.3/24`, `${ov}=10.0.1.4/24`, `${ov}=10.0.1.5/24`],
    );
    assert.ok(tasks.every((t) => t.Status.State === 'assigned'));
    const att = tasks[0]?.NetworksAttachments?.[0]?.Network;
    assert.equal(att?.Spec.Name, 'ov');
    assert.equal(att?.DriverState.Options['com.docker.network.driver.overlay.vxlanid_list'], '4097');
    const held = await claims(c);
    assert.equal(held[`${ov}/10.0.1.1`], JSON.stringify({ kind: 'gateway' }));
    // while a port is published through the mesh, each node's ingress sandbox has an address
    const sandboxes = Object.entries(held)
      .filter(([k, v]) => k.startsWith(`${ingress}/`) && v.includes('"node"'))
      .map(([, v]) => (JSON.parse(v) as { node: string }).node)
      .sort();
    assert.deepEqual(sandboxes, ['n1', 'n2']);
    assert.equal(held[`${ov}/10.0.1.2`], JSON.stringify({ kind: 'vip', service: id }));
    for (const t of tasks) {
      const ip = t.NetworksAttachments?.[0]?.Addresses[0]?.split('/')[0];
      assert.equal(held[`${ov}/${ip}`], JSON.stringify({ kind: 'task', task: t.ID }));
    }
    await c.stop();
  });

  it('dnsrr services get no VIP; addresses go back when tasks and services go, and are never given twice', async () => {
    const c = await TestCluster.start(['n1']);
    const { ov } = await withNetworks(c);
    const a = await c.createService({
      TaskTemplate: { ...busybox, Networks: [{ Target: ov }], RestartPolicy: { Delay: 0 } },
      Mode: { Replicated: { Replicas: 2 } },
      EndpointSpec: { Mode: 'dnsrr' },
    });
    assert.equal((await c.service(a)).Endpoint?.VirtualIPs, undefined);
    await c.agentsRun();
    const first = await c.liveTasks(a);
    const failed = first[0];
    assert.ok(failed);
    await c.fail(failed.ID);
    await c.agentsRun();
    const all = await c.tasks(a);
    const ips = all.map((t) => t.NetworksAttachments?.[0]?.Addresses[0]);
    assert.equal(new Set(ips).size, ips.length, `no address twice: ${ips.join(' ')}`);
    await c.removeService(a);
    await c.agentsRun();
    await c.settle();
    assert.deepEqual(await c.tasks(a), []);
    assert.deepEqual(
      Object.keys(await claims(c)).filter((k) => k.startsWith(`${ov}/`)),
      [`${ov}/10.0.1.1`],
    );
    await c.stop();
  });

  it('leaves a task unplaced while its network has no address left, and places it once one is free', async () => {
    const c = await TestCluster.start(['n1']);
    const { tiny } = await withNetworks(c);
    // 10.5.0.2-.6: one VIP and four tasks fit; the fifth waits
    const id = await c.createService({
      TaskTemplate: { ...busybox, Networks: [{ Target: tiny }] },
      Mode: { Replicated: { Replicas: 5 } },
    });
    let live = await c.liveTasks(id);
    assert.equal(live.filter((t) => t.Status.State === 'assigned').length, 4);
    const waiting = live.filter((t) => t.Status.State === 'pending');
    assert.equal(waiting.length, 1);
    assert.equal(waiting[0]?.NetworksAttachments, undefined);
    await c.updateService(
      id,
      (s) => {
        s.EndpointSpec = { Mode: 'dnsrr' };
      },
      false,
    );
    await c.settle();
    live = await c.liveTasks(id);
    assert.equal(live.filter((t) => t.Status.State === 'assigned').length, 5, 'the VIP went back');
    await c.stop();
  });

  it('network objects: next block of the pool, VNIs from 4097, ingress 4096, the gateway claimed', async () => {
    const c = await TestCluster.start([]);
    await c.store.put(
      '/berth/swarm/v1/cluster',
      JSON.stringify({ Spec: {}, DefaultAddrPool: ['10.20.0.0/16'], SubnetSize: 26 }),
    );
    const nets = new SwarmNetworks({
      swarm: { managerStore: () => c.store, isManager: () => true },
      log: new Logger('error'),
      esp: async () => false,
    });
    await nets.createIngress();
    await nets.create({ Name: 'a', Driver: 'overlay' });
    await nets.create({ Name: 'b', Driver: 'overlay' });
    const list = await nets.list(new Map());
    const byName = Object.fromEntries(list.map((n) => [n.Name, n]));
    assert.deepEqual(byName.ingress?.IPAM.Config, [{ Subnet: '10.20.0.0/26', Gateway: '10.20.0.1' }]);
    assert.deepEqual(byName.a?.IPAM.Config, [{ Subnet: '10.20.0.64/26', Gateway: '10.20.0.65' }]);
    assert.deepEqual(byName.b?.IPAM.Config, [{ Subnet: '10.20.0.128/26', Gateway: '10.20.0.129' }]);
    assert.equal(byName.ingress?.Options['com.docker.network.driver.overlay.vxlanid_list'], '4096');
    assert.equal(byName.a?.Options['com.docker.network.driver.overlay.vxlanid_list'], '4097');
    assert.equal(byName.b?.Options['com.docker.network.driver.overlay.vxlanid_list'], '4098');
    await nets.remove('a');
    const c2 = await nets.create({ Name: 'c', Driver: 'overlay' });
    const cview = await nets.find(c2.Id);
    assert.equal(
      cview?.Options['com.docker.network.driver.overlay.vxlanid_list'],
      '4097',
      'a freed VNI is reused',
    );
    assert.deepEqual(cview?.IPAM.Config, [{ Subnet: '10.20.0.64/26', Gateway: '10.20.0.65' }]);
    await assert.rejects(nets.create({ Name: 'e', Driver: 'overlay', Options: { encrypted: '' } }), /no ESP/);
    await assert.rejects(nets.create({ Name: 'b', Driver: 'overlay' }), /already exists/);
    const keysLeft = (await c.store.range(networkKeys.ipamAll)).kvs.map((kv) => kv.key);
    assert.equal(keysLeft.length, 3, 'one gateway claim per network, none of the removed one');
    await c.stop();
  });
});
