import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import { setupBridge, validateBridgeName } from '../../../../src/engine/network/bridge.setup.js';
import { withHostLock } from '../../../../src/engine/network/host-lock.js';
import { createNetworkService, type NetworkService } from '../../../../src/engine/network/network.service.js';
import type { Endpoint, ReleaseTarget } from '../../../../src/engine/network/network.types.js';
import { parseFilters } from '../../../../src/http/query.js';
import { FakeCni, FakeFirewall, FakeLinks, FakeNetns, fakeNetworkOps, quietLog } from './fakes.js';

let dir: string;
/** Services the tests made: closed before their files go (a spare namespace may be under way). */
const made: NetworkService[] = [];
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-net-unit-'));
});
after(async () => {
  for (const s of made) await s.close();
  await rm(dir, { recursive: true, force: true });
});

/** The one endpoint of a sandbox attached to the default bridge. */
async function firstEndpoint(service: NetworkService): Promise<Endpoint> {
  const [ep] = await service.attach([{ network: 'bridge' }]).endpoints;
  if (!ep) throw new Error('no endpoint');
  return ep;
}

/** What releasing the sandbox of one endpoint needs. */
function target(ep: Endpoint): ReleaseTarget {
  return {
    sandboxId: ep.sandboxId,
    sandboxKey: ep.sandboxKey,
    plumbed: ep.bridge ? [{ ifname: ep.ifname ?? 'eth0', bridge: ep.bridge }] : [],
  };
}

describe('default bridge setup', () => {
  const opts = (links: FakeLinks, extra: Partial<Parameters<typeof setupBridge>[0]> = {}) => ({
    name: 'berth0',
    link: links,
    firewall: new FakeFirewall(),
    lockPath: join(dir, 'lock'),
    log: quietLog(),
    ...extra,
  });

  it('creates the bridge on the first default pool the host does not use, and lets it forward', async () => {
    const links = new FakeLinks();
    const firewall = new FakeFirewall();
    const s = await setupBridge({ ...opts(links), firewall });
    assert.deepEqual(s, {
      subnet: '172.18.0.0/16',
      gateway: '172.18.0.1',
      prefixLen: 16,
      name: 'berth0',
      gatewayInConfig: false,
    });
    assert.deepEqual(links.calls, ['ensure berth0 172.18.0.1/16 drop=0']);
    assert.deepEqual(firewall.calls, ['allow berth0 172.18.0.0/16']);
    // a second engine's bridge takes the next block (the first one's route is in use now)
    const other = await setupBridge(opts(links, { name: 'berth1' }));
    assert.equal(other.subnet, '172.19.0.0/16');
  });

  it('keeps the block chosen before, unless the host uses it by now', async () => {
    const links = new FakeLinks();
    const saved = {
      id: 'a'.repeat(64),
      created: 'x',
      name: 'berth0',
      subnet: '172.25.0.0/16',
      gateway: '172.25.0.1',
      gatewayInConfig: false,
    };
    assert.equal((await setupBridge(opts(links, { saved }))).subnet, '172.25.0.0/16');
    const busy = new FakeLinks();
    busy.used.push('172.25.3.0/24');
    assert.equal((await setupBridge(opts(busy, { saved }))).subnet, '172.18.0.0/16');
    // a bridge of another name does not reuse it
    assert.equal(
      (await setupBridge(opts(new FakeLinks(), { saved, name: 'other0' }))).subnet,
      '172.18.0.0/16',
    );
  });

  it("adopts an existing bridge's address, as dockerd does for docker0", async () => {
    const links = new FakeLinks();
    links.links.set('br9', { kind: 'bridge', addresses: [{ address: '10.50.0.1', prefixLen: 24 }] });
    const s = await setupBridge(opts(links, { name: 'br9' }));
    assert.deepEqual(
      { subnet: s.subnet, gateway: s.gateway, gatewayInConfig: s.gatewayInConfig },
      { subnet: '10.50.0.0/24', gateway: '10.50.0.1', gatewayInConfig: true },
    );
  });

  it('uses --bip, replacing other addresses of the bridge', async () => {
    const links = new FakeLinks();
    links.links.set('berth0', { kind: 'bridge', addresses: [{ address: '172.18.0.1', prefixLen: 16 }] });
    const s = await setupBridge(opts(links, { bip: '10.77.0.1/24' }));
    assert.equal(s.subnet, '10.77.0.0/24');
    assert.equal(s.gatewayInConfig, true);
    assert.deepEqual(links.links.get('berth0')?.addresses, [{ address: '10.77.0.1', prefixLen: 24 }]);
  });

  it('refuses bad names and links that are not bridges', async () => {
    for (const bad of ['', 'a'.repeat(16), 'a/b', 'a b', '-x']) {
      assert.throws(() => validateBridgeName(bad), /invalid bridge name/, bad);
    }
    validateBridgeName('berth0');
    validateBridgeName('bt0123abcd');
    const links = new FakeLinks();
    links.links.set('eth9', { kind: 'veth', addresses: [] });
    await assert.rejects(setupBridge(opts(links, { name: 'eth9' })), /is not a bridge/);
  });

  it('serialises engines through the host lock, which a dead holder (or a stale file) does not block', async () => {
    const lock = join(dir, 'serial.lock');
    const order: string[] = [];
    await Promise.all([
      withHostLock(lock, async () => {
        order.push('a+');
        await new Promise((r) => setTimeout(r, 50));
        order.push('a-');
      }),
      withHostLock(lock, async () => {
        order.push('b+');
        order.push('b-');
      }),
    ]);
    assert.ok(order.join(' ') === 'a+ a- b+ b-' || order.join(' ') === 'b+ b- a+ a-', order.join(' '));
    assert.equal(existsSync(lock), false);
    await writeFile(lock, `${process.pid}\n`); // a file left behind names a live pid: not a lock
    assert.equal(await withHostLock(lock, async () => 'taken'), 'taken');
  });
});

describe('network service', () => {
  const make = async (
    name: string,
    extra: { bridge?: string | null; cni?: FakeCni; netns?: FakeNetns } = {},
  ) => {
    const root = join(dir, name);
    const events = new EventsService();
    const cni = extra.cni ?? new FakeCni();
    const netns = extra.netns ?? new FakeNetns();
    const service = await createNetworkService({
      dataRoot: join(root, 'data'),
      execRoot: join(root, 'exec'),
      bridge: extra.bridge === undefined ? 'berth0' : extra.bridge,
      events,
      log: quietLog(),
      ops: fakeNetworkOps(cni, netns),
      lockPath: join(root, 'lock'),
    });
    made.push(service);
    return { service, events, cni, netns, root };
  };

  it('attaches a sandbox: namespace file (lo up), bridge ADD in it, the endpoint from the result', async () => {
    const { service, cni, netns, root } = await make('attach');
    const att = service.attach([{ network: 'bridge', macAddress: '02:42:0a:00:00:09' }]);
    assert.equal(att.sandboxKey, join(root, 'exec', 'netns', att.sandboxId.slice(0, 12)));
    await att.ready;
    assert.ok(netns.live.has(att.sandboxKey));
    const [ep] = await att.endpoints;
    assert.ok(ep);
    assert.equal(ep.network, 'bridge');
    assert.equal(ep.networkId, service.networkId('bridge'));
    assert.equal(ep.ipAddress, '172.18.0.2');
    assert.equal(ep.prefixLen, 16);
    assert.equal(ep.gateway, '172.18.0.1');
    assert.match(ep.endpointId, /^[0-9a-f]{64}$/);
    assert.deepEqual(cni.calls.map((c) => [c.command, c.ifname, c.containerId, c.netns, c.args]).sort(), [
      ['ADD', 'eth0', att.sandboxId, att.sandboxKey, 'IgnoreUnknown=1;IP=172.18.0.2;MAC=02:42:0a:00:00:09'],
    ]);
    const conf = cni.calls.find((c) => c.ifname === 'eth0')?.config as {
      name: string;
      bridge: string;
      ipam: { dataDir: string };
    };
    assert.equal(conf.name, 'berth0');
    assert.equal(conf.bridge, 'berth0');
    assert.equal(conf.ipam.dataDir, join(root, 'data', 'network', 'ipam'));
  });

  it("releases a stopped container's sandbox: the namespace, then host-local's files, no DEL", async () => {
    const cni = new FakeCni();
    const { service, netns, root } = await make('release-direct', { cni });
    const ep = await firstEndpoint(service);
    const other = await firstEndpoint(service);
    cni.calls.length = 0;
    await service.release({
      ...target(ep),
      plumbed: target(ep).plumbed.map((p) => ({ ...p, addresses: [ep.ipAddress] })),
    });
    assert.deepEqual(cni.calls, []);
    assert.equal(netns.live.has(ep.sandboxKey), false);
    // only its own file goes (another sandbox's stays)
    assert.deepEqual(await readdir(join(root, 'data', 'network', 'ipam', 'berth0')), [other.ipAddress]);
  });

  it('releases without addresses (a sweep): bridge DEL in the namespace, then the namespace; only IPAM when the namespace is unusable', async () => {
    const cni = new FakeCni();
    const { service, netns, root } = await make('release', { cni });
    const ep = await firstEndpoint(service);
    cni.calls.length = 0;
    await service.release(target(ep));
    assert.deepEqual(
      cni.calls.map((c) => [c.command, c.netns, c.containerId]),
      [['DEL', ep.sandboxKey, ep.sandboxId]],
    );
    assert.equal(netns.live.has(ep.sandboxKey), false);
    assert.deepEqual(await readdir(join(root, 'data', 'network', 'ipam', 'berth0')), []);
    // a DEL that cannot enter the namespace is retried without it (the address goes all the same)
    const ep2 = await firstEndpoint(service);
    cni.calls.length = 0;
    cni.fail = (_p, call) => (call.netns ? new Error('unknown FS magic') : undefined);
    await service.release(target(ep2));
    assert.deepEqual(
      cni.calls.map((c) => c.netns),
      [ep2.sandboxKey, ''],
    );
    assert.equal(netns.live.has(ep2.sandboxKey), false);
  });

  it('sweeps addresses and namespaces no running container holds, keeping restored ones', async () => {
    const cni = new FakeCni();
    const netns = new FakeNetns();
    const first = await make('sweep', { cni, netns });
    const kept = await firstEndpoint(first.service);
    const lost = await firstEndpoint(first.service);
    // a new engine process: it knows the kept endpoint (a running container's record), not the lost
    const second = await make('sweep', { cni, netns });
    second.service.restore(kept);
    const stray = join(first.root, 'exec', 'netns', '0123456789ab');
    await netns.create(stray);
    await second.service.sweep();
    assert.ok(netns.live.has(kept.sandboxKey));
    assert.equal(netns.live.has(lost.sandboxKey), false);
    assert.equal(netns.live.has(stray), false);
    const ipam = join(first.root, 'data', 'network', 'ipam', 'berth0');
    const files = await readdir(ipam);
    assert.deepEqual(files, [kept.ipAddress]);
    assert.equal((await readFile(join(ipam, kept.ipAddress), 'utf8')).split('\r\n')[0], kept.sandboxId);
    // a sandbox nobody recorded but with processes in it (a container the engine could not load)
    const inhabited = await firstEndpoint(second.service);
    const third = await make('sweep', { cni, netns });
    third.service.restore(kept);
    netns.busy.add(inhabited.sandboxKey);
    await third.service.sweep();
    assert.ok(netns.live.has(inhabited.sandboxKey));
    assert.deepEqual((await readdir(ipam)).sort(), [kept.ipAddress, inhabited.ipAddress].sort());
  });

  it('keeps network IDs and the block across restarts (networks.json)', async () => {
    const a = await make('ids');
    const b = await make('ids');
    for (const n of ['bridge', 'host', 'none'] as const) {
      assert.match(a.service.networkId(n), /^[0-9a-f]{64}$/);
      assert.equal(b.service.networkId(n), a.service.networkId(n));
    }
    assert.equal(b.service.bridge?.subnet, a.service.bridge?.subnet);
  });

  it('finds networks by ID, name or unique ID prefix; an ambiguous prefix is a 400 as dockerd', async () => {
    // IDs that share a prefix, as saved by an earlier run
    const root = join(dir, 'ambiguous');
    await mkdir(join(root, 'data', 'network'), { recursive: true });
    const created = new Date().toISOString();
    await writeFile(
      join(root, 'data', 'network', 'networks.json'),
      JSON.stringify({
        host: { id: `ab1${'0'.repeat(61)}`, created },
        none: { id: `ab2${'0'.repeat(61)}`, created },
      }),
    );
    const { service } = await make('ambiguous', { bridge: null });
    assert.equal(service.inspect('ab1').Name, 'host');
    assert.throws(() => service.inspect('ab'), {
      message: 'network ab is ambiguous (2 matches found based on ID prefix)',
    });
    assert.throws(() => service.inspect('host', { scope: 'swarm' }), { message: 'network host not found' });
    await assert.rejects(service.remove('none'), {
      message: 'none is a pre-defined network and cannot be removed',
    });
    assert.deepEqual(await service.prune(new Map()), { NetworksDeleted: null });
  });

  it('answers GET /networks and /networks/{id} for bridge, host and none, with filters', async () => {
    const { service } = await make('views');
    const ep = await firstEndpoint(service);
    service.setContainerSource(() => [{ id: 'c'.repeat(64), name: 'web', endpoint: ep }]);
    const names = (f = '') => service.list(parseFilters(f || null)).map((n) => n.Name);
    assert.deepEqual(names(), ['bridge', 'host', 'none']);
    assert.deepEqual(names('{"driver":["null"]}'), ['none']);
    assert.deepEqual(names('{"name":["^b"]}'), ['bridge']);
    assert.deepEqual(names('{"type":["custom"]}'), []);
    assert.throws(() => names('{"bogus":["x"]}'), /invalid filter 'bogus'/);
    assert.throws(() => names('{"type":["x"]}'), /invalid filter/);
    const list = service.list(new Map());
    assert.deepEqual(list[0]?.Containers, {});
    const bridge = service.inspect('bridge');
    assert.deepEqual(Object.keys(bridge), [
      'Name',
      'Id',
      'Created',
      'Scope',
      'Driver',
      'EnableIPv4',
      'EnableIPv6',
      'IPAM',
      'Internal',
      'Attachable',
      'Ingress',
      'ConfigFrom',
      'ConfigOnly',
      'Containers',
      'Options',
      'Labels',
      'Status',
    ]);
    // the IPAM state: network, broadcast, gateway and the endpoint's address taken
    assert.deepEqual(bridge.Status, {
      IPAM: { Subnets: { '172.18.0.0/16': { IPsInUse: 4, DynamicIPsAvailable: 65536 - 4 } } },
    });
    assert.deepEqual(service.inspect('none').Status, { IPAM: {} });
    assert.ok(!('Status' in (list[0] ?? {})), 'the list has no Status');
    assert.deepEqual(bridge.IPAM, {
      Driver: 'default',
      Options: null,
      Config: [{ Subnet: '172.18.0.0/16' }],
    });
    assert.deepEqual(bridge.Containers, {
      ['c'.repeat(64)]: {
        Name: 'web',
        EndpointID: ep.endpointId,
        MacAddress: ep.macAddress,
        IPv4Address: `${ep.ipAddress}/16`,
        IPv6Address: '',
      },
    });
    assert.equal((bridge.Options as Record<string, string>)['com.docker.network.bridge.name'], 'berth0');
    assert.equal(service.inspect(service.networkId('host').slice(0, 5)).Name, 'host');
    assert.equal(service.inspect('none').Driver, 'null');
    assert.throws(() => service.inspect('nope'), { message: 'network nope not found' });
  });

  it("announces connect and disconnect as dockerd's network events", async () => {
    const { service, events } = await make('events');
    service.announce('connect', 'c1', 'bridge');
    service.announce('disconnect', 'c1', 'none');
    assert.deepEqual(
      events.past(0n).map((e) => [e.Type, e.Action, e.Actor.ID, e.Actor.Attributes]),
      [
        [
          'network',
          'connect',
          service.networkId('bridge'),
          { container: 'c1', name: 'bridge', type: 'bridge' },
        ],
        ['network', 'disconnect', service.networkId('none'), { container: 'c1', name: 'none', type: 'null' }],
      ],
    );
  });

  it('has no bridge with --bridge none', async () => {
    const { service } = await make('nobridge', { bridge: null });
    assert.equal(service.bridge, null);
    assert.deepEqual(
      service.list(new Map()).map((n) => n.Name),
      ['host', 'none'],
    );
    await assert.rejects(service.attach([{ network: 'bridge' }]).endpoints, /network bridge not found/);
    assert.throws(() => service.inspect('bridge'), { message: 'network bridge not found' });
  });
});
