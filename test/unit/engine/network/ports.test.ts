import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HostPortSockets } from '../../../../src/engine/network/adapters/port-sockets.js';
import { PortAllocator } from '../../../../src/engine/network/ports/port-allocator.js';
import { PortPublisher, type PublishTarget } from '../../../../src/engine/network/ports/port-publisher.js';
import {
  bridgeRulesInput,
  hasBridgeRules,
  removalInput,
} from '../../../../src/engine/network/ports/port-rules.js';
import { portRequests, portsMap } from '../../../../src/engine/network/ports/port-spec.js';
import { FakePortRules, FakePortSockets, quietLog } from './fakes.js';

const target = (owner: string, ip = '172.18.0.2'): PublishTarget => ({
  owner,
  endpointName: owner,
  endpointId: 'e'.repeat(64),
  bridge: 'br0',
  subnet: '172.18.0.0/16',
  ip,
});

function publisher(range = { start: 32768, end: 32770 }) {
  const rules = new FakePortRules();
  const sockets = new FakePortSockets();
  const p = new PortPublisher({ log: quietLog(), rules, sockets, allocator: new PortAllocator(range) });
  return { p, rules, sockets };
}

describe('port requests (PortBindings, PublishAllPorts, ExposedPorts)', () => {
  it('a binding without HostIp publishes on 0.0.0.0 and its :: twin; a host address alone', () => {
    const r = portRequests(
      [],
      { '80/tcp': [{ HostIp: '', HostPort: '8080' }], '53/udp': [{ HostIp: '127.0.0.1' }] },
      false,
    );
    assert.deepEqual(r, [
      { containerPort: 53, proto: 'udp', hostIp: '127.0.0.1', hostPortStart: 0, hostPortEnd: 0 },
      { containerPort: 80, proto: 'tcp', hostIp: '0.0.0.0', hostPortStart: 8080, hostPortEnd: 8080 },
      { containerPort: 80, proto: 'tcp', hostIp: '::', hostPortStart: 8080, hostPortEnd: 8080, twinOf: 1 },
    ]);
  });
  it('publishes sctp ports as dockerd does (tcp, udp and sctp; other protocols left out)', () => {
    const r = portRequests([], { '9000/sctp': [{ HostIp: '127.0.0.1', HostPort: '9000' }] }, false);
    assert.deepEqual(r, [
      { containerPort: 9000, proto: 'sctp', hostIp: '127.0.0.1', hostPortStart: 9000, hostPortEnd: 9000 },
    ]);
    const input = bridgeRulesInput(
      {
        bridge: 'br0',
        subnet: '172.18.0.0/16',
        rules: [
          { proto: 'sctp', hostIp: '127.0.0.1', hostPort: 9000, ip: '172.18.0.2', containerPort: 9000 },
        ],
      },
      true,
    );
    assert.match(input, /-p sctp -m sctp --dport 9000 -j DNAT --to-destination 172\.18\.0\.2:9000/);
  });

  it("refuses sctp on a kernel without it with docker-proxy's words, and holds nothing", async () => {
    const none = new HostPortSockets('/nonexistent/sctp');
    await assert.rejects(none.bind('sctp', '0.0.0.0', 9000, { ip: '172.18.0.2', port: 9000 }), {
      code: 'EPROTONOSUPPORT',
    });
    const rules = new FakePortRules();
    const p = new PortPublisher({ log: quietLog(), rules, sockets: none, allocator: new PortAllocator() });
    const requests = portRequests([], { '9000/sctp': [{ HostIp: '', HostPort: '9000' }] }, false);
    await assert.rejects(p.publish(target('s'), requests), (err: Error) => {
      assert.match(
        err.message,
        /driver failed programming external connectivity on endpoint s .*Error starting userland proxy: protocol not supported$/,
      );
      return true;
    });
    assert.deepEqual(p.published('s'), []);
    assert.equal(p.allocator.isTaken('sctp', '0.0.0.0', 9000), false);
    // with SCTP in the kernel: the rules carry it (Node holds no SCTP socket)
    const withSctp = new HostPortSockets('/proc/self');
    const holder = await withSctp.bind('sctp', '0.0.0.0', 9000, { ip: '172.18.0.2', port: 9000 });
    await holder.close();
  });

  it('-P publishes exposed ports without a binding; ranges and IPv6 host addresses', () => {
    const r = portRequests(
      ['80/tcp', '443/tcp'],
      { '443/tcp': [{ HostIp: '[::1]', HostPort: '8000-8010' }] },
      true,
    );
    assert.deepEqual(
      r.map((x) => [x.containerPort, x.hostIp, x.hostPortStart, x.hostPortEnd]),
      [
        [80, '0.0.0.0', 0, 0],
        [80, '::', 0, 0],
        [443, '::1', 8000, 8010],
      ],
    );
    // exposed ports are not published without -P
    assert.deepEqual(portRequests(['80/tcp'], {}, false), []);
    // a container range with a host range of the same size maps port to port
    const ranged = portRequests([], { '80-81/tcp': [{ HostIp: '127.0.0.1', HostPort: '9000-9001' }] }, false);
    assert.deepEqual(
      ranged.map((x) => [x.containerPort, x.hostPortStart, x.hostPortEnd]),
      [
        [80, 9000, 9000],
        [81, 9001, 9001],
      ],
    );
    assert.throws(() => portRequests([], { '80/tcp': [{ HostIp: 'nope' }] }, false), /invalid IP address/);
  });
  it('NetworkSettings.Ports: exposed ports null, published ones with their bindings', () => {
    assert.deepEqual(
      portsMap(
        ['7000/tcp'],
        ['80/tcp'],
        [
          { containerPort: 80, proto: 'tcp', hostIp: '0.0.0.0', hostPort: 8080 },
          { containerPort: 80, proto: 'tcp', hostIp: '::', hostPort: 8080 },
        ],
      ),
      {
        '7000/tcp': null,
        '80/tcp': [
          { HostIp: '0.0.0.0', HostPort: '8080' },
          { HostIp: '::', HostPort: '8080' },
        ],
      },
    );
  });
});

describe('port allocator', () => {
  it('hands out ephemeral ports in turn from the range, wrapping, skipping taken ones', () => {
    const a = new PortAllocator({ start: 100, end: 102 });
    assert.equal(a.next('tcp', '0.0.0.0', 0, 0), 100);
    a.take('tcp', '0.0.0.0', 100);
    assert.equal(a.next('tcp', '0.0.0.0', 0, 0), 101);
    a.take('tcp', '0.0.0.0', 101);
    a.release('tcp', '0.0.0.0', 100);
    assert.equal(a.next('tcp', '0.0.0.0', 0, 0), 102);
    a.take('tcp', '0.0.0.0', 102);
    assert.equal(a.next('tcp', '0.0.0.0', 0, 0), 100);
    a.take('tcp', '0.0.0.0', 100);
    assert.equal(a.next('tcp', '0.0.0.0', 0, 0), undefined);
    // per protocol and address
    assert.equal(a.next('udp', '0.0.0.0', 0, 0), 100);
    // a fixed range from its start
    assert.equal(a.next('tcp', '127.0.0.1', 8000, 8010), 8000);
  });
});

describe('port rules', () => {
  const rules = [
    { proto: 'tcp' as const, hostIp: '127.0.0.1', hostPort: 8080, ip: '172.18.0.2', containerPort: 80 },
  ];
  it('installs the chains and jumps once, then only refills the chains', () => {
    const first = bridgeRulesInput({ bridge: 'br0', subnet: '172.18.0.0/16', rules }, false);
    assert.match(
      first,
      /^\*nat\n:BERTH-DNAT-br0 - \[0:0\]\n:BERTH-POST-br0 - \[0:0\]\n-I PREROUTING 1 -m addrtype --dst-type LOCAL/,
    );
    assert.match(
      first,
      /-A BERTH-DNAT-br0 -d 127\.0\.0\.1\/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172\.18\.0\.2:80/,
    );
    assert.match(first, /-A BERTH-POST-br0 -s 127\.0\.0\.0\/8 -o br0 -j MASQUERADE/);
    assert.match(
      first,
      /-A BERTH-FWD-br0 -d 172\.18\.0\.2\/32 ! -i br0 -o br0 -p tcp -m tcp --dport 80 -j ACCEPT/,
    );
    assert.match(
      first,
      /\*raw\n-I PREROUTING 1 -i br0 -d 127\.0\.0\.0\/8 -m comment --comment "berth ports br0" -j DROP/,
    );
    const again = bridgeRulesInput({ bridge: 'br0', subnet: '172.18.0.0/16', rules }, true);
    assert.doesNotMatch(again, /-I /);
    const gone = bridgeRulesInput({ bridge: 'br0', subnet: '172.18.0.0/16', rules: [] }, true);
    assert.match(
      gone,
      /-D PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "berth ports br0" -j BERTH-DNAT-br0/,
    );
    assert.match(gone, /-X BERTH-DNAT-br0/);
    assert.equal(bridgeRulesInput({ bridge: 'br0', subnet: '172.18.0.0/16', rules: [] }, false), '');
  });
  it('finds and removes what iptables-save shows of a bridge, and nothing of another', () => {
    const save = [
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':BERTH-DNAT-br0 - [0:0]',
      ':BERTH-DNAT-br1 - [0:0]',
      '-A PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "berth ports br0" -j BERTH-DNAT-br0',
      '-A PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "berth ports br1" -j BERTH-DNAT-br1',
      'COMMIT',
      '*raw',
      '-A PREROUTING -i br0 -d 127.0.0.0/8 -m comment --comment "berth ports br0" -j DROP',
      'COMMIT',
    ].join('\n');
    assert.equal(hasBridgeRules(save, 'br0'), true);
    assert.equal(hasBridgeRules(save, 'br2'), false);
    assert.equal(
      removalInput(save, 'br0'),
      [
        '*nat',
        '-D PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "berth ports br0" -j BERTH-DNAT-br0',
        '-F BERTH-DNAT-br0',
        '-X BERTH-DNAT-br0',
        'COMMIT',
        '*raw',
        '-D PREROUTING -i br0 -d 127.0.0.0/8 -m comment --comment "berth ports br0" -j DROP',
        'COMMIT',
        '',
      ].join('\n'),
    );
    assert.equal(removalInput(save, 'br2'), '');
  });
});

describe('port publisher', () => {
  it('binds, writes the rules (IPv4 only: IPv6 is relayed) and lets everything go', async () => {
    const { p, rules, sockets } = publisher();
    const got = await p.publish(target('c1'), portRequests([], { '80/tcp': [{ HostPort: '8080' }] }, false));
    assert.deepEqual(got, [
      { containerPort: 80, proto: 'tcp', hostIp: '0.0.0.0', hostPort: 8080 },
      { containerPort: 80, proto: 'tcp', hostIp: '::', hostPort: 8080 },
    ]);
    assert.deepEqual([...sockets.bound.keys()], ['tcp 0.0.0.0 8080', 'tcp :: 8080']);
    assert.equal(sockets.bound.get('tcp :: 8080')?.ip, '172.18.0.2');
    assert.equal(rules.inputs.length, 1);
    assert.match(rules.inputs[0] ?? '', /--dport 8080 -j DNAT --to-destination 172\.18\.0\.2:80/);
    assert.doesNotMatch(rules.inputs[0] ?? '', /::/);
    assert.equal(rules.localnet.get('br0'), true);
    await p.unpublish('c1');
    assert.equal(sockets.bound.size, 0);
    assert.match(rules.inputs[1] ?? '', /-X BERTH-DNAT-br0/);
    assert.equal(rules.localnet.get('br0'), false);
  });
  it('a port of the engine: "port is already allocated"; of the host: docker-proxy words; nothing left', async () => {
    const { p, rules, sockets } = publisher();
    await p.publish(
      target('c1'),
      portRequests([], { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '8080' }] }, false),
    );
    await assert.rejects(
      p.publish(
        target('c2', '172.18.0.3'),
        portRequests([], { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '8080' }] }, false),
      ),
      /^SystemError: driver failed programming external connectivity on endpoint c2 \(e{64}\): Bind for 127\.0\.0\.1:8080 failed: port is already allocated$/,
    );
    sockets.hostTaken.add('udp 0.0.0.0 9999');
    const before = rules.inputs.length;
    await assert.rejects(
      p.publish(
        target('c3', '172.18.0.4'),
        portRequests(
          [],
          { '53/udp': [{ HostPort: '9999' }], '22/tcp': [{ HostIp: '127.0.0.1', HostPort: '2222' }] },
          false,
        ),
      ),
      /Error starting userland proxy: listen udp4 0\.0\.0\.0:9999: bind: address already in use/,
    );
    // 22/tcp was bound before 53/udp failed: let go; no rule written for c3
    assert.deepEqual([...sockets.bound.keys()], ['tcp 127.0.0.1 8080']);
    assert.equal(rules.inputs.length, before);
    assert.deepEqual(p.published('c3'), []);
  });
  it('ephemeral ports: the next one the host lets the engine bind; the IPv6 twin skipped without IPv6', async () => {
    const { p, sockets } = publisher({ start: 40000, end: 40005 });
    sockets.noIpv6 = true;
    sockets.hostTaken.add('tcp 0.0.0.0 40000');
    const got = await p.publish(target('c1'), portRequests(['80/tcp'], {}, true));
    assert.deepEqual(got, [{ containerPort: 80, proto: 'tcp', hostIp: '0.0.0.0', hostPort: 40001 }]);
    const next = await p.publish(target('c2', '172.18.0.3'), portRequests(['80/tcp'], {}, true));
    assert.equal(next[0]?.hostPort, 40002);
  });
  it('a failed rules write lets go of the ports and the next write starts from iptables-save', async () => {
    const { p, rules, sockets } = publisher();
    rules.fail = true;
    // what a write cut short left (iptables-restore applies table by table)
    rules.saveText = '*nat\n:BERTH-DNAT-br0 - [0:0]\nCOMMIT\n';
    await assert.rejects(
      p.publish(
        target('c1'),
        portRequests([], { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '8080' }] }, false),
      ),
      /driver failed programming external connectivity on endpoint c1 .*iptables-restore: failed/,
    );
    assert.equal(sockets.bound.size, 0);
    rules.fail = false;
    await p.publish(
      target('c1'),
      portRequests([], { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '8080' }] }, false),
    );
    assert.match(rules.inputs.at(-2) ?? '', /-X BERTH-DNAT-br0/);
    assert.match(rules.inputs.at(-1) ?? '', /-I PREROUTING 1/);
  });
  it('restore after an engine restart: ports taken and bound again, leftovers of gone containers removed', async () => {
    const { p, rules, sockets } = publisher();
    await p.restore(target('c1'), [{ containerPort: 80, proto: 'tcp', hostIp: '127.0.0.1', hostPort: 8080 }]);
    rules.saveText = [
      '*nat',
      ':BERTH-DNAT-br0 - [0:0]',
      '-A PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "berth ports br0" -j BERTH-DNAT-br0',
      '-A BERTH-DNAT-br0 -d 127.0.0.1/32 -p tcp -m tcp --dport 9090 -j DNAT --to-destination 172.18.0.9:80',
      'COMMIT',
    ].join('\n');
    await p.reconcile([{ bridge: 'br0', subnet: '172.18.0.0/16' }]);
    assert.deepEqual([...sockets.bound.keys()], ['tcp 127.0.0.1 8080']);
    assert.match(rules.inputs[0] ?? '', /-X BERTH-DNAT-br0/);
    assert.match(rules.inputs[1] ?? '', /--dport 8080 /);
    assert.doesNotMatch(rules.inputs[1] ?? '', /9090/);
    assert.equal(p.allocator.isTaken('tcp', '127.0.0.1', 8080), true);
  });
  it('batches the writes of publishes made together into few iptables-restore runs', async () => {
    const { p, rules } = publisher();
    await Promise.all(
      [1, 2, 3, 4].map((i) =>
        p.publish(
          target(`c${i}`, `172.18.0.${i + 1}`),
          portRequests([], { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: `808${i}` }] }, false),
        ),
      ),
    );
    assert.ok(rules.inputs.length <= 2, `${rules.inputs.length} writes`);
    assert.equal((rules.inputs.at(-1)?.match(/-j DNAT/g) ?? []).length, 4);
    // an exit and the next start: the release's write waits and one write does both
    const before = rules.inputs.length;
    const released = p.unpublish('c1');
    await p.publish(
      target('c5', '172.18.0.9'),
      portRequests([], { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '8081' }] }, false),
    );
    await released;
    assert.equal(rules.inputs.length, before + 1);
    assert.doesNotMatch(rules.inputs.at(-1) ?? '', /172\.18\.0\.2:80/);
    assert.match(rules.inputs.at(-1) ?? '', /172\.18\.0\.9:80/);
  });
});
