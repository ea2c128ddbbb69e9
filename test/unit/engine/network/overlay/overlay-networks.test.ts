import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { EmbeddedDns } from '../../../../../src/engine/network/dns/embedded-dns.js';
import type { OverlayOps } from '../../../../../src/engine/network/overlay/overlay.ops.js';
import type { NodeOverlayState } from '../../../../../src/engine/network/overlay/overlay.types.js';
import { OverlayNetworks } from '../../../../../src/engine/network/overlay/overlay-networks.js';

/**
 * The node's overlay data plane against fake host calls: a namespace per network made on the
 * first task and removed with the last, peers of other nodes only, the gateway bridge and its
 * addresses, the DNS scope of a task (its networks' names, nobody else's), the sweep.
 */

class FakeOps implements OverlayOps {
  readonly calls: string[] = [];
  readonly namespaces = new Set<string>();
  readonly peers = new Map<string, string[]>();
  gwBridge?: { subnet: string };
  failPlug = false;

  async listNamespaces(prefix: string) {
    return [...this.namespaces].filter((n) => n.startsWith(prefix));
  }
  async ensureNetwork(ns: string, o: { vni: number; local: string; gateway: string }) {
    this.calls.push(`net ${ns} vni=${o.vni} local=${o.local} gw=${o.gateway}`);
    this.namespaces.add(ns);
  }
  async deleteNamespace(ns: string) {
    this.calls.push(`del ${ns}`);
    this.namespaces.delete(ns);
  }
  async setPeers(ns: string, _vni: number, peers: Array<{ ip: string; mac: string; node: string }>) {
    this.peers.set(
      ns,
      peers.map((p) => `${p.ip}@${p.node}`),
    );
  }
  async plugContainer(ns: string, netns: string, o: { ifname: string; address: string; mac: string }) {
    if (this.failPlug) throw new Error('veth failed');
    this.calls.push(`plug ${netns} ${o.ifname} ${o.address} ${o.mac} -> ${ns}`);
  }
  async ensureGwBridge(_name: string, o: { subnet: string }) {
    this.gwBridge = { subnet: o.subnet };
  }
  async deleteGwBridge(name: string, subnet: string) {
    this.calls.push(`delgw ${name} ${subnet}`);
    this.gwBridge = undefined;
  }
  async plugGateway(
    _bridge: string,
    netns: string,
    o: { ifname: string; address: string; defaultRoute?: boolean },
  ) {
    this.calls.push(`gw ${netns} ${o.ifname} ${o.address}${o.defaultRoute === false ? ' no-default' : ''}`);
  }
  async forgetMac() {}
  async unplugContainer(netns: string, ifname: string) {
    this.calls.push(`unplug ${netns} ${ifname}`);
  }
  async hasLink() {
    return this.gwBridge !== undefined;
  }
  async bridgeBlock() {
    return this.gwBridge?.subnet;
  }
}

const info = { created: '', labels: null, options: {}, attachable: false, internal: false, ingress: false };

function state(names: Array<{ names: string[]; ip: string }> = []): NodeOverlayState {
  return {
    local: '192.168.1.1',
    port: 4789,
    networks: [
      {
        id: 'netA',
        name: 'ova',
        info,
        vni: 4097,
        subnet: '10.0.1.0/24',
        gateway: '10.0.1.1',
        peers: [
          { ip: '10.0.1.3', mac: '02:42:0a:00:01:03', node: '192.168.1.1' },
          { ip: '10.0.1.4', mac: '02:42:0a:00:01:04', node: '192.168.1.2' },
        ],
        nodes: [],
        names,
        vips: [{ service: 's1', vip: '10.0.1.2', backends: ['10.0.1.4'] }],
      },
      {
        id: 'netB',
        name: 'ovb',
        info,
        vni: 4098,
        subnet: '10.0.2.0/24',
        gateway: '10.0.2.1',
        peers: [],
        nodes: [],
        names: [{ names: ['secret-b'], ip: '10.0.2.9' }],
        vips: [],
      },
    ],
  };
}

function setup() {
  const ops = new FakeOps();
  const dns = new EmbeddedDns({ log: new Logger('error') });
  const overlay = new OverlayNetworks({
    engineKey: '/exec',
    ops,
    link: { usedBlocks: async () => ['172.17.0.0/16', '192.168.1.0/24'] },
    dns,
    log: new Logger('error'),
    dnsPort: 0,
  });
  return { ops, dns, overlay };
}

describe('overlay networks of a node (fake host calls)', () => {
  it('tells network inspect its local endpoints and peers while the network is plumbed here', async () => {
    const { overlay, dns } = setup();
    const st = state();
    const netA = st.networks[0];
    assert.ok(netA);
    netA.nodes = [
      { name: 'host-one', ip: '192.168.1.1' },
      { name: 'host-two', ip: '192.168.1.2' },
    ];
    await overlay.sync(st);
    assert.equal(overlay.localFacts('netA'), undefined, 'not plumbed: nothing local');
    await overlay.attach({
      taskId: 't1',
      containerId: 'c1',
      netns: '/proc/10/ns/net',
      attachments: [{ networkId: 'netA', address: '10.0.1.3/24' }],
    });
    await overlay.attach({
      taskId: 'ingress-sbox',
      netns: '/run/netns/ingress',
      gateway: false,
      attachments: [{ networkId: 'netA', address: '10.0.1.7/24' }],
    });
    const facts = overlay.localFacts('netA');
    assert.deepEqual(facts?.peers, netA.nodes);
    const [task, sbox] = facts?.endpoints ?? [];
    assert.equal(task?.sandbox, 'c1');
    assert.equal(task?.name, undefined, 'a container is named by its own settings');
    assert.equal(task?.ipv4, '10.0.1.3/24');
    assert.equal(task?.mac, '02:42:0a:00:01:03');
    assert.match(task?.endpointId ?? '', /^[0-9a-f]{64}$/);
    assert.deepEqual(
      { sandbox: sbox?.sandbox, name: sbox?.name, ipv4: sbox?.ipv4 },
      { sandbox: 'ingress-sbox', name: 'ova-endpoint', ipv4: '10.0.1.7/24' },
    );
    assert.equal(overlay.localFacts('netB'), undefined);
    await overlay.detach('t1');
    await overlay.detach('ingress-sbox');
    assert.equal(overlay.localFacts('netA'), undefined, 'gone with its last endpoint');
    await dns.close();
  });

  it('plugs a container that keeps its default network (host-mode ports) from eth1, without taking its default route', async () => {
    const { ops, overlay, dns } = setup();
    await overlay.sync(state());
    await overlay.attach({
      taskId: 't1',
      netns: '/proc/10/ns/net',
      keepsDefaultNetwork: true,
      attachments: [{ networkId: 'netA', address: '10.0.1.3/24' }],
    });
    const ns = overlay.namespaceOf(4097);
    assert.ok(
      ops.calls.includes(`plug /proc/10/ns/net eth1 10.0.1.3/24 02:42:0a:00:01:03 -> ${ns}`),
      ops.calls.join('\n'),
    );
    assert.ok(ops.calls.includes('gw /proc/10/ns/net eth2 172.18.0.2/16 no-default'), ops.calls.join('\n'));
    await dns.close();
  });

  it('plumbs a network on its first task, with the other nodes as peers, and removes it with its last', async () => {
    const { ops, overlay, dns } = setup();
    await overlay.sync(state());
    assert.equal(ops.namespaces.size, 0, 'nothing before a task needs it');
    const gw = await overlay.gatewayAddress();
    assert.equal(gw, '172.18.0.1', 'the first free default pool');
    await overlay.attach({
      taskId: 't1',
      netns: '/proc/10/ns/net',
      attachments: [{ networkId: 'netA', address: '10.0.1.3/24' }],
    });
    await overlay.attach({
      taskId: 't2',
      netns: '/proc/11/ns/net',
      attachments: [{ networkId: 'netA', address: '10.0.1.5/24' }],
    });
    const ns = overlay.namespaceOf(4097);
    assert.match(ns, /^berth-ov-[0-9a-f]{6}-4097$/);
    assert.deepEqual([...ops.namespaces], [ns]);
    assert.deepEqual(ops.peers.get(ns), ['10.0.1.4@192.168.1.2'], 'only attachments on other nodes');
    assert.ok(ops.calls.includes(`net ${ns} vni=4097 local=192.168.1.1 gw=10.0.1.1`));
    assert.ok(ops.calls.includes(`plug /proc/10/ns/net eth0 10.0.1.3/24 02:42:0a:00:01:03 -> ${ns}`));
    assert.ok(ops.calls.includes('gw /proc/10/ns/net eth1 172.18.0.2/16'));
    assert.ok(ops.calls.includes('gw /proc/11/ns/net eth1 172.18.0.3/16'));
    assert.deepEqual(overlay.vipsFor('t1'), [{ service: 's1', vip: '10.0.1.2', backends: ['10.0.1.4'] }]);

    // a new picture: the peers follow
    const next = state();
    next.networks[0]?.peers.push({ ip: '10.0.1.6', mac: '02:42:0a:00:01:06', node: '192.168.1.3' });
    await overlay.sync(next);
    assert.deepEqual(ops.peers.get(ns), ['10.0.1.4@192.168.1.2', '10.0.1.6@192.168.1.3']);

    await overlay.detach('t1');
    assert.deepEqual([...ops.namespaces], [ns], 'still used by t2');
    await overlay.detach('t2');
    assert.deepEqual([...ops.namespaces], []);
    await dns.close();
  });

  it('answers a task the names of its own networks only, by its gateway-bridge address', async () => {
    const { overlay, dns } = setup();
    await overlay.sync(state([{ names: ['tasks.web', 'web'], ip: '10.0.1.4' }]));
    await overlay.attach({
      taskId: 't1',
      netns: '/proc/10/ns/net',
      attachments: [{ networkId: 'netA', address: '10.0.1.3/24' }],
    });
    const scope = dns.records.scope('swarm-gwbridge', '172.18.0.2');
    assert.deepEqual(scope, ['swarm-gwbridge', 'netA']);
    assert.deepEqual(dns.records.lookup(scope, 'web', 4).addresses, ['10.0.1.4']);
    assert.deepEqual(dns.records.lookup(scope, 'tasks.web', 4).addresses, ['10.0.1.4']);
    assert.equal(dns.records.lookup(scope, 'secret-b', 4).found, false, 'netB is not this task’s');
    assert.deepEqual(dns.records.scope('swarm-gwbridge', '10.9.9.9'), [], 'a stranger sees nothing');
    await dns.close();
  });

  it('a failed plug leaves nothing half-known; the sweep removes what an earlier engine left', async () => {
    const { ops, overlay, dns } = setup();
    await overlay.sync(state());
    ops.failPlug = true;
    await assert.rejects(
      overlay.attach({
        taskId: 't1',
        netns: '/proc/10/ns/net',
        attachments: [{ networkId: 'netA', address: '10.0.1.3/24' }],
      }),
      /veth failed/,
    );
    await overlay.detach('t1');
    assert.deepEqual([...ops.namespaces], [], 'the namespace made for it went with it');
    await assert.rejects(
      overlay.attach({
        taskId: 't2',
        netns: '/proc/12/ns/net',
        attachments: [{ networkId: 'nope', address: '10.0.9.3/24' }],
      }),
      /not known on this node yet/,
    );
    ops.namespaces.add(overlay.namespaceOf(4099));
    ops.namespaces.add('berth-ov-000000-4097');
    await overlay.sweep();
    assert.deepEqual([...ops.namespaces], ['berth-ov-000000-4097'], "another engine's namespace stays");
    assert.ok(ops.calls.some((c) => c.startsWith('delgw docker_gwbridge 172.18.0.0/16')));
    assert.equal(ops.gwBridge, undefined);
    await dns.close();
  });
});
