import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  forwardRules,
  masqueradeRule,
  masqueradeRules,
  ruleUpdate,
} from '../../../../src/engine/network/adapters/iptables.ops.js';
import {
  bridgePluginConfig,
  cniArgs,
  cniErrorMessage,
  parseAddResult,
} from '../../../../src/engine/network/cni.config.js';
import {
  listAllocations,
  lowestFree,
  macFromIpv4,
  parseAllocationFile,
} from '../../../../src/engine/network/ipam.allocations.js';

describe('CNI configuration', () => {
  it('configures the bridge plugin as a gateway with host-local IPAM (the engine masquerades)', () => {
    const conf = bridgePluginConfig({
      cniName: 'berth0',
      bridge: 'berth0',
      subnet: '172.18.0.0/16',
      gateway: '172.18.0.1',
      dataDir: '/var/lib/berth/network/ipam',
    });
    assert.deepEqual(conf, {
      cniVersion: '1.0.0',
      name: 'berth0',
      type: 'bridge',
      bridge: 'berth0',
      isGateway: true,
      ipMasq: false,
      hairpinMode: true,
      ipam: {
        type: 'host-local',
        ranges: [[{ subnet: '172.18.0.0/16', gateway: '172.18.0.1' }]],
        routes: [{ dst: '0.0.0.0/0' }],
        dataDir: '/var/lib/berth/network/ipam',
      },
    });
    // a release of an address nobody knows the gateway of leaves it out (host-local refuses "")
    const noGw = bridgePluginConfig({
      cniName: 'x',
      bridge: 'x',
      subnet: '10.0.0.0/24',
      gateway: '',
      dataDir: '/d',
    });
    assert.deepEqual((noGw.ipam as { ranges: unknown }).ranges, [[{ subnet: '10.0.0.0/24' }]]);
  });

  it('passes a requested address and MAC in CNI_ARGS', () => {
    assert.equal(cniArgs({}), undefined);
    assert.equal(cniArgs({ mac: '02:42:ac:11:00:05' }), 'IgnoreUnknown=1;MAC=02:42:ac:11:00:05');
    assert.equal(
      cniArgs({ ip: '172.17.0.5', mac: '02:42:ac:11:00:05' }),
      'IgnoreUnknown=1;IP=172.17.0.5;MAC=02:42:ac:11:00:05',
    );
  });

  it("reads the container's address, gateway and MAC from an ADD result", () => {
    // the bridge plugin's (containernetworking-plugins 1.1.1) answer, as recorded
    const result = {
      cniVersion: '1.0.0',
      interfaces: [
        { name: 'bexp0', mac: '62:a6:a4:1f:18:58' },
        { name: 'veth6b18747b', mac: '62:fb:11:06:fe:76' },
        { name: 'eth0', mac: '4e:fd:2d:1d:6e:c0', sandbox: '/tmp/net-work/ns/t1' },
      ],
      ips: [{ interface: 2, address: '10.99.0.2/24', gateway: '10.99.0.1' }],
      dns: {},
    };
    assert.deepEqual(parseAddResult(result, 'eth0'), {
      ipAddress: '10.99.0.2',
      prefixLen: 24,
      gateway: '10.99.0.1',
      macAddress: '4e:fd:2d:1d:6e:c0',
    });
    // IPv6 entries and other interfaces' addresses are not the container's IPv4 address
    const mixed = {
      interfaces: [{ name: 'eth0', mac: 'aa:bb:cc:dd:ee:ff', sandbox: '/ns' }],
      ips: [
        { interface: 0, address: 'fd00::2/64' },
        { interface: 0, address: '10.1.0.9/16', gateway: '10.1.0.1' },
      ],
    };
    assert.equal(parseAddResult(mixed, 'eth0').ipAddress, '10.1.0.9');
    assert.throws(() => parseAddResult({ interfaces: [], ips: [] }, 'eth0'), /no IPv4 address/);
    assert.throws(() => parseAddResult(undefined, 'eth0'), /no IPv4 address/);
  });

  it("words a plugin's error result as one message", () => {
    const stdout = JSON.stringify({
      code: 999,
      msg: 'failed to open netns "/nonexist"',
      details: 'no such file or directory',
    });
    assert.equal(
      cniErrorMessage('bridge', 'ADD', stdout, ''),
      'CNI bridge ADD: failed to open netns "/nonexist": no such file or directory',
    );
    assert.equal(cniErrorMessage('bridge', 'DEL', '', 'panic: boom\n'), 'CNI bridge DEL failed: panic: boom');
  });
});

describe('host-local allocations', () => {
  it('reads the container ID and interface of each address file', async () => {
    assert.deepEqual(parseAllocationFile('abc\r\neth0'), { containerId: 'abc', ifname: 'eth0' });
    assert.deepEqual(parseAllocationFile('abc'), { containerId: 'abc', ifname: '' });
    const dir = await mkdtemp(join(tmpdir(), 'berth-ipam-'));
    try {
      await mkdir(join(dir, 'berth0'));
      await writeFile(join(dir, 'berth0', '172.18.0.2'), 'sb1\r\neth0');
      await writeFile(join(dir, 'berth0', '172.18.0.3'), 'sb2\r\neth0');
      await writeFile(join(dir, 'berth0', 'last_reserved_ip.0'), '172.18.0.3');
      await writeFile(join(dir, 'berth0', 'lock'), '');
      const found = (await listAllocations(dir)).sort((a, b) => a.ip.localeCompare(b.ip));
      assert.deepEqual(found, [
        { network: 'berth0', ip: '172.18.0.2', containerId: 'sb1', ifname: 'eth0' },
        { network: 'berth0', ip: '172.18.0.3', containerId: 'sb2', ifname: 'eth0' },
      ]);
      assert.deepEqual(await listAllocations(join(dir, 'missing')), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("hands out dockerd's next address: the lowest free one, never the gateway; MACs made of it", () => {
    assert.equal(lowestFree('172.17.0.0/16', '172.17.0.1', new Set()), '172.17.0.2');
    assert.equal(
      lowestFree('172.17.0.0/16', '172.17.0.1', new Set(['172.17.0.2', '172.17.0.4'])),
      '172.17.0.3',
    );
    assert.equal(lowestFree('10.0.0.0/30', '10.0.0.1', new Set(['10.0.0.2'])), undefined);
    assert.equal(lowestFree('10.0.0.0/24', '10.0.0.254', new Set()), '10.0.0.1');
    assert.equal(macFromIpv4('172.17.0.2'), '02:42:ac:11:00:02');
    assert.equal(macFromIpv4('10.255.1.200'), '02:42:0a:ff:01:c8');
  });
});

describe('iptables rules', () => {
  it("lets the bridge forward and the replies come back, isolated from berth's other bridges, marked with its comment", () => {
    const c = '-m comment --comment "berth bridge berth0"';
    assert.deepEqual(forwardRules('berth0'), [
      `BERTH-FORWARD -o berth0 -m conntrack --ctstate RELATED,ESTABLISHED ${c} -j ACCEPT`,
      `BERTH-FORWARD -i berth0 -o berth0 ${c} -j ACCEPT`,
      `BERTH-FORWARD -i berth0 ! -o berth0 ${c} -j ACCEPT`,
      `BERTH-ISOLATION-STAGE-1 -i berth0 ! -o berth0 ${c} -j BERTH-ISOLATION-STAGE-2`,
      `BERTH-ISOLATION-STAGE-2 -o berth0 ${c} -j DROP`,
    ]);
  });

  it('fences Internal networks in their blocks, drops traffic within a network without icc', () => {
    const c = '-m comment --comment "berth bridge br-1"';
    const rules = forwardRules('br-1', { internal: true, icc: false, subnets: ['10.9.0.0/24'] });
    assert.ok(rules.includes(`BERTH-FORWARD -i br-1 -o br-1 ${c} -j DROP`));
    assert.ok(!rules.some((r) => r.includes('! -o br-1 -m comment --comment "berth bridge br-1" -j ACCEPT')));
    assert.ok(rules.includes(`BERTH-ISOLATION-STAGE-1 -i br-1 ! -d 10.9.0.0/24 ${c} -j DROP`));
    assert.ok(rules.includes(`BERTH-ISOLATION-STAGE-1 -o br-1 ! -s 10.9.0.0/24 ${c} -j DROP`));
    assert.deepEqual(masqueradeRules('br-1', '10.9.0.0/24', { internal: true }), []);
    assert.deepEqual(masqueradeRules('br-1', '10.9.0.0/24', { masquerade: false }), []);
    assert.equal(
      masqueradeRules('br-1', '10.9.0.0/24', { subnets: ['10.9.0.0/24', '10.8.0.0/24'] }).length,
      2,
    );
  });

  it('masquerades what leaves the block through another interface', () => {
    assert.equal(
      masqueradeRule('berth0', '172.18.0.0/16'),
      'POSTROUTING -s 172.18.0.0/16 ! -o berth0 -m comment --comment "berth bridge berth0" -j MASQUERADE',
    );
  });

  it('adds the missing rules first and deletes stale ones of the same bridge only', () => {
    const [replies = '', accept = ''] = forwardRules('bt1');
    const other = forwardRules('bt10')[0] ?? '';
    const have = ['-P FORWARD DROP', `-A ${other}`, `-A ${replies}`, '-A FORWARD -j DOCKER-USER'].join('\n');
    // all there: nothing to do
    assert.equal(ruleUpdate('filter', `${have}\n-A ${accept}`, [accept, replies], 'bt1'), undefined);
    // one missing: inserted at the top of its chain
    assert.equal(
      ruleUpdate('filter', have, [accept, replies], 'bt1'),
      ['*filter', `-I BERTH-FORWARD 1${accept.slice('BERTH-FORWARD'.length)}`, 'COMMIT', ''].join('\n'),
    );
    // a block that changed: the old rule goes, the new one comes
    const nat = `-P POSTROUTING ACCEPT\n-A ${masqueradeRule('bt1', '10.1.0.0/24')}\n-A ${masqueradeRule('bt10', '10.2.0.0/24')}`;
    assert.equal(
      ruleUpdate('nat', nat, [masqueradeRule('bt1', '10.3.0.0/24')], 'bt1'),
      [
        '*nat',
        `-D ${masqueradeRule('bt1', '10.1.0.0/24')}`,
        `-I POSTROUTING 1${masqueradeRule('bt1', '10.3.0.0/24').slice('POSTROUTING'.length)}`,
        'COMMIT',
        '',
      ].join('\n'),
    );
    // removal: every rule of the bridge, no other
    assert.equal(
      ruleUpdate('nat', nat, [], 'bt1'),
      ['*nat', `-D ${masqueradeRule('bt1', '10.1.0.0/24')}`, 'COMMIT', ''].join('\n'),
    );
  });
});
