import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import { planNetwork } from '../../../../src/engine/network/network.create.js';
import { createNetworkService } from '../../../../src/engine/network/network.service.js';
import { parseFilters } from '../../../../src/http/query.js';
import { FakeCni, FakeFirewall, FakeLinks, FakeNetns, quietLog } from './fakes.js';

const none = () => false;

describe('network create requests (planNetwork)', () => {
  it("refuses what dockerd refuses, with dockerd's status kinds and words", () => {
    const cases: Array<[Record<string, unknown>, string, string | RegExp]> = [
      [{ Name: '' }, 'InvalidParameter', 'network name must not be empty'],
      [{ Name: 'host' }, 'Forbidden', 'operation is not permitted on predefined host network'],
      [{ Name: 'x', Driver: 'nope' }, 'NotFound', 'plugin "nope" not found'],
      [{ Name: 'x', Driver: 'host' }, 'Forbidden', 'only one instance of "host" network is allowed'],
      [{ Name: 'x', IPAM: { Driver: 'dhcp' } }, 'NotFound', 'plugin "dhcp" not found'],
      [{ Name: 'x', IPAM: { Config: [{ Subnet: '10.0.0.0' }] } }, 'InvalidParameter', /invalid subnet/],
      [
        { Name: 'x', IPAM: { Config: [{ Subnet: '10.0.0.0/24', Gateway: '10.1.0.1' }] } },
        'InvalidParameter',
        'failed to allocate gateway (10.1.0.1): Requested address is out of range',
      ],
      [
        { Name: 'x', IPAM: { Config: [{ Subnet: '10.0.0.0/24', IPRange: '10.1.0.0/25' }] } },
        'InvalidParameter',
        /not within subnet/,
      ],
      [
        { Name: 'x', IPAM: { Config: [{ Subnet: '10.0.0.0/16' }, { Subnet: '10.0.1.0/24' }] } },
        'Forbidden',
        /Pool overlaps/,
      ],
      [
        { Name: 'x', Options: { 'com.docker.network.bridge.enable_icc': 'maybe' } },
        'InvalidParameter',
        /enable_icc/,
      ],
      [{ Name: 'x', Options: { 'com.docker.network.driver.mtu': '9' } }, 'InvalidParameter', /invalid MTU/],
      [
        { Name: 'x', Options: { 'com.docker.network.bridge.name': 'a/b' } },
        'InvalidParameter',
        /invalid bridge name/,
      ],
      [{ Name: 'x', EnableIPv6: true }, 'Forbidden', /could not find an available, non-overlapping IPv6/],
      [
        {
          Name: 'x',
          EnableIPv6: true,
          IPAM: { Config: [{ Subnet: 'fd42:1::/64' }, { Subnet: 'fd42:2::/64' }] },
        },
        'Forbidden',
        /doesn't support multiple subnets/,
      ],
      [
        { Name: 'x', EnableIPv6: true, IPAM: { Config: [{ Subnet: 'fd42:4::/64', Gateway: 'fd43::1' }] } },
        'InvalidParameter',
        /no matching subnet for gateway fd43::1/,
      ],
      [
        {
          Name: 'x',
          EnableIPv6: true,
          IPAM: { Config: [{ Subnet: 'fd42:4::/64', IPRange: 'fd42:5::/80' }] },
        },
        'InvalidParameter',
        /not within subnet/,
      ],
      [
        { Name: 'x', EnableIPv6: true, IPAM: { Config: [{ Subnet: 'fd42:4::/127' }] } },
        'InvalidParameter',
        /too small/,
      ],
    ];
    for (const [body, kind, message] of cases) {
      assert.throws(() => planNetwork(body, none), { kind, message }, JSON.stringify(body));
    }
    assert.throws(() => planNetwork({ Name: 'a' }, (n) => n === 'a'), {
      kind: 'Conflict',
      message: 'network with name a already exists',
    });
  });

  it('reads an IPv6 block as dockerd 20.10 keeps it (stored without EnableIPv6)', () => {
    const plan = planNetwork(
      {
        Name: 'n',
        EnableIPv6: true,
        IPAM: { Config: [{ Subnet: 'fd42:3::5/64', IPRange: 'fd42:3:0:0::/80', Gateway: 'fd42:3:0::fe' }] },
      },
      none,
    );
    assert.deepEqual(plan.ipv6, [{ Subnet: 'fd42:3::5/64', IPRange: 'fd42:3::/80', Gateway: 'fd42:3::fe' }]);
    assert.equal(plan.enableIPv6, true);
    const stored = planNetwork({ Name: 'n', IPAM: { Config: [{ Subnet: 'fd42:6::/64' }] } }, none);
    assert.equal(stored.enableIPv6, false);
    assert.deepEqual(stored.ipv6, [{ Subnet: 'fd42:6::/64' }]);
  });

  it('reads the options and blocks', () => {
    const plan = planNetwork(
      {
        Name: 'n',
        Internal: true,
        Labels: { a: 'b' },
        IPAM: {
          Config: [
            { Subnet: '10.5.0.7/24', IPRange: '10.5.0.128/25', AuxiliaryAddresses: { r: '10.5.0.9' } },
          ],
        },
        Options: {
          'com.docker.network.bridge.enable_icc': 'false',
          'com.docker.network.bridge.enable_ip_masquerade': '0',
          'com.docker.network.driver.mtu': '1400',
          'com.docker.network.bridge.name': 'mybr0',
        },
      },
      none,
    );
    assert.equal(plan.internal, true);
    assert.equal(plan.icc, false);
    assert.equal(plan.masquerade, false);
    assert.equal(plan.mtu, 1400);
    assert.equal(plan.bridgeName, 'mybr0');
    assert.deepEqual(plan.ipv4, [
      { Subnet: '10.5.0.0/24', IPRange: '10.5.0.128/25', AuxiliaryAddresses: { r: '10.5.0.9' } },
    ]);
  });
});

describe('user-defined networks (service, fake host)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-netcreate-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('makes, attaches in order, picks addresses as dockerd, refuses to remove in use, prunes', async () => {
    const events = new EventsService();
    const links = new FakeLinks();
    const firewall = new FakeFirewall();
    const cni = new FakeCni();
    const s = await createNetworkService({
      dataRoot: join(dir, 'data'),
      execRoot: join(dir, 'exec'),
      bridge: 'berth0',
      events,
      log: quietLog(),
      ops: { cni, netns: new FakeNetns(), link: links, firewall },
      lockPath: join(dir, 'lock'),
    });
    const { Id } = await s.create({
      Name: 'web',
      IPAM: {
        Config: [{ Subnet: '10.7.0.0/24', IPRange: '10.7.0.64/26', AuxiliaryAddresses: { x: '10.7.0.65' } }],
      },
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
    });
    const bridge = `br-${Id.slice(0, 12)}`;
    assert.ok(links.links.has(bridge));
    assert.ok(firewall.calls.includes(`allow ${bridge} 10.7.0.0/24 internal=false icc=false masq=true`));
    const auto = await s.create({ Name: 'auto', Internal: true });
    const autoView = s.inspect('auto') as { IPAM: { Config: Array<{ Subnet: string; Gateway: string }> } };
    // 172.17 is the fake host's, 172.18 the default bridge's
    assert.deepEqual(autoView.IPAM.Config, [{ Subnet: '172.19.0.0/16', Gateway: '172.19.0.1' }]);
    assert.deepEqual((s.inspect('web') as { IPAM: { Config: unknown[] } }).IPAM.Config, [
      { Subnet: '10.7.0.0/24', IPRange: '10.7.0.64/26', AuxiliaryAddresses: { x: '10.7.0.65' } },
    ]);

    const att = s.attach([{ network: 'web' }, { network: 'auto' }, { network: 'web2' }]);
    await assert.rejects(att.endpoints, { message: 'network web2 not found' });
    // what a failed start does: the interfaces made so far go with the sandbox
    assert.deepEqual(
      att.plumbed.map((p) => p.ifname),
      ['eth0', 'eth1'],
    );
    await s.release(att);
    const mark = cni.calls.length;
    const [a, b] = await s.attach([{ network: 'web' }, { network: auto.Id.slice(0, 8) }]).endpoints;
    assert.ok(a && b);
    assert.equal(a.ipAddress, '10.7.0.66', 'the range, skipping its first address and the aux one');
    assert.equal(a.ifname, 'eth0');
    assert.equal(b.ifname, 'eth1');
    assert.equal(b.network, 'auto');
    const config = (i: number) =>
      cni.calls.slice(mark).filter((c) => c.command === 'ADD' && c.ifname !== 'lo')[i]?.config;
    // the main network has the default route, the second none; an Internal network never
    assert.deepEqual((config(0) as { ipam: { routes: unknown[] } }).ipam.routes, [{ dst: '0.0.0.0/0' }]);
    assert.deepEqual((config(1) as { ipam: { routes: unknown[] } }).ipam.routes, []);
    await assert.rejects(s.attach([{ network: 'web', ipv4Address: '10.7.0.66' }]).endpoints, {
      message: 'Address already in use',
    });
    assert.throws(() => s.checkEndpoint('auto', { ipv4Address: '172.19.0.9' }), /user configured subnets/);
    assert.throws(() => s.checkEndpoint('bridge', { aliases: true }), /network-scoped alias/);

    s.setContainerSource(() => [{ id: 'c'.repeat(64), name: 'x', endpoint: a }]);
    await assert.rejects(s.remove('web'), { kind: 'Forbidden', message: /has active endpoints/ });
    const names = (f: string) => s.list(parseFilters(f)).map((n) => n.Name);
    assert.deepEqual(names('{"dangling":["true"]}'), ['auto']);
    assert.deepEqual(names('{"type":["custom"]}'), ['web', 'auto']);
    assert.deepEqual(await s.prune(new Map()), { NetworksDeleted: ['auto'] });
    assert.equal(links.links.has(bridge), true);
    s.setContainerSource(() => []);
    await s.remove('web');
    assert.equal(links.links.has(bridge), false);
    assert.ok(firewall.calls.includes(`remove ${bridge}`));
    assert.deepEqual(
      events.past(0n).map((e) => `${e.Action} ${e.Actor.Attributes.name ?? ''}`),
      ['create web', 'create auto', 'destroy auto', 'prune ', 'destroy web'],
    );
    await s.close();
  });

  it('gives interfaces of an IPv6 network both addresses (IPAM or --ip6), its range and route; refuses as dockerd', async () => {
    const links = new FakeLinks();
    const firewall = new FakeFirewall();
    const cni = new FakeCni();
    const s = await createNetworkService({
      dataRoot: join(dir, 'v6', 'data'),
      execRoot: join(dir, 'v6', 'exec'),
      bridge: 'berth0',
      events: new EventsService(),
      log: quietLog(),
      ops: { cni, netns: new FakeNetns(), link: links, firewall },
      lockPath: join(dir, 'v6', 'lock'),
    });
    const { Id } = await s.create({
      Name: 'six',
      EnableIPv6: true,
      IPAM: {
        Config: [
          { Subnet: '10.8.0.0/24' },
          { Subnet: 'fd42:8::/64', AuxiliaryAddresses: { r: 'fd42:8::2' } },
        ],
      },
    });
    const bridge = `br-${Id.slice(0, 12)}`;
    assert.ok(links.calls.includes(`address6 ${bridge} fd42:8::1/64`), links.calls.join('\n'));
    assert.ok(
      firewall.calls.some((c) => c.startsWith(`allow ${bridge} 10.8.0.0/24`) && c.endsWith('v6=fd42:8::/64')),
    );
    // the implicit IPv6 gateway is not shown, as dockerd
    assert.deepEqual((s.inspect('six') as { IPAM: { Config: unknown[] } }).IPAM.Config, [
      { Subnet: '10.8.0.0/24' },
      { Subnet: 'fd42:8::/64', AuxiliaryAddresses: { r: 'fd42:8::2' } },
    ]);
    const [a] = await s.attach([{ network: 'six' }]).endpoints;
    assert.equal(a?.ipv6Address, 'fd42:8::3', 'the lowest free address: not the gateway, not the aux one');
    assert.equal(a?.ipv6PrefixLen, 64);
    assert.equal(a?.ipv6Gateway, 'fd42:8::1');
    const add = cni.calls.find((c) => c.command === 'ADD')?.config as {
      ipam: { ranges: unknown[]; routes: unknown[] };
      args: unknown;
    };
    assert.deepEqual(add.ipam.ranges[1], [{ subnet: 'fd42:8::/64', gateway: 'fd42:8::1' }]);
    assert.deepEqual(add.ipam.routes, [{ dst: '0.0.0.0/0' }, { dst: '::/0' }]);
    assert.deepEqual(add.args, { cni: { ips: ['10.8.0.2', 'fd42:8::3'] } });
    const [b] = await s.attach([{ network: 'six', ipv6Address: 'fd42:8:0::99' }]).endpoints;
    assert.equal(b?.ipv6Address, 'fd42:8::99');
    await assert.rejects(s.attach([{ network: 'six', ipv6Address: 'fd42:8::99' }]).endpoints, {
      kind: 'Conflict',
      message: 'Address already in use',
    });
    await assert.rejects(s.attach([{ network: 'six', ipv6Address: 'fd42:9::5' }]).endpoints, {
      message: "Invalid address fd42:9::5: It does not belong to any of this network's subnets",
    });
    assert.throws(
      () => s.checkEndpoint('bridge', { ipv6Address: 'fd42:8::7' }),
      /user defined networks only/,
    );
    assert.equal(s.ipv6Enabled('six'), true);
    assert.equal(s.ipv6Enabled('bridge'), false);
    await assert.rejects(
      s.create({ Name: 'clash', EnableIPv6: true, IPAM: { Config: [{ Subnet: 'fd42:8::/80' }] } }),
      { kind: 'Forbidden', message: /Pool overlaps/ },
    );
    await s.close();
  });
});
