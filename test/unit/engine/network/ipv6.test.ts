import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bridgePluginConfig, parseAddResult } from '../../../../src/engine/network/cni.config.js';
import {
  canonicalIpv6,
  containsIp6,
  formatNetwork6,
  lowestFree6,
  overlaps6,
  parseCidr6,
} from '../../../../src/engine/network/ipv6.js';

describe('ipv6 addresses', () => {
  it('parses and prints addresses as Go does (RFC 5952)', () => {
    const cases: Array<[string, string | undefined]> = [
      ['::', '::'],
      ['::1', '::1'],
      ['FD42:1:0:0:0:0:0:2', 'fd42:1::2'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
      ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
      ['fe80:0:0:0:1::', 'fe80::1:0:0:0'],
      ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
      ['1::2::3', undefined],
      ['g::1', undefined],
      ['1:2:3:4:5:6:7:8:9', undefined],
      ['1:2:3', undefined],
      ['10.0.0.1', undefined],
    ];
    for (const [text, want] of cases) assert.equal(canonicalIpv6(text), want, text);
  });

  it('reads blocks, containment and overlap', () => {
    const a = parseCidr6('fd42:1::5/48');
    const b = parseCidr6('fd42:1:0:7::/64');
    const c = parseCidr6('fd42:2::/64');
    assert.ok(a && b && c);
    assert.equal(formatNetwork6(a), 'fd42:1::/48');
    assert.equal(overlaps6(a, b), true);
    assert.equal(overlaps6(a, c), false);
    assert.equal(containsIp6(b, parseCidr6('fd42:1:0:7::9')?.ip ?? 0n), true);
    assert.equal(parseCidr6('fd42::/129'), undefined);
  });

  it("picks dockerd's lowest free address (never the block's first)", () => {
    assert.equal(lowestFree6('fd42:1::/64', new Set(['fd42:1::1'])), 'fd42:1::2');
    assert.equal(lowestFree6('fd42:1::/64', new Set(['fd42:1::1', 'fd42:1::2'])), 'fd42:1::3');
    assert.equal(lowestFree6('fd42:1::/126', new Set(['fd42:1::1', 'fd42:1::2', 'fd42:1::3'])), undefined);
  });

  it('gives the bridge plugin an IPv6 range, a default route and the chosen addresses', () => {
    const config = bridgePluginConfig({
      cniName: 'br-x',
      bridge: 'br-x',
      subnet: '10.9.0.0/16',
      gateway: '10.9.0.1',
      subnet6: 'fd42:9::/64',
      gateway6: 'fd42:9::1',
      dataDir: '/d',
      ips: ['10.9.0.2', 'fd42:9::2'],
    }) as { ipam: { ranges: unknown; routes: unknown }; args: unknown };
    assert.deepEqual(config.ipam.ranges, [
      [{ subnet: '10.9.0.0/16', gateway: '10.9.0.1' }],
      [{ subnet: 'fd42:9::/64', gateway: 'fd42:9::1' }],
    ]);
    assert.deepEqual(config.ipam.routes, [{ dst: '0.0.0.0/0' }, { dst: '::/0' }]);
    assert.deepEqual(config.args, { cni: { ips: ['10.9.0.2', 'fd42:9::2'] } });
    const added = parseAddResult(
      {
        interfaces: [
          { name: 'br-x' },
          { name: 'veth1' },
          { name: 'eth0', mac: '02:42:0a:09:00:02', sandbox: '/n' },
        ],
        ips: [
          { interface: 2, address: '10.9.0.2/16', gateway: '10.9.0.1' },
          { interface: 2, address: 'fd42:9::2/64', gateway: 'fd42:9::1' },
        ],
      },
      'eth0',
    );
    assert.deepEqual(added, {
      ipAddress: '10.9.0.2',
      prefixLen: 16,
      gateway: '10.9.0.1',
      macAddress: '02:42:0a:09:00:02',
      ipv6Address: 'fd42:9::2',
      ipv6PrefixLen: 64,
      ipv6Gateway: 'fd42:9::1',
    });
  });
});
