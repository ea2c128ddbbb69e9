import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatIpv4, overlaps, parseCidr, parseIpv4 } from '../../../../src/engine/network/ipv4.js';
import { subnetStatus } from '../../../../src/engine/network/network.views.js';
import {
  choiceFromAddress,
  DEFAULT_POOLS,
  parseBip,
  pickSubnet,
} from '../../../../src/engine/network/subnet.js';

describe('ipv4', () => {
  it('parses and formats addresses and blocks', () => {
    assert.equal(parseIpv4('172.18.0.1'), 0xac120001);
    assert.equal(formatIpv4(0xac120001), '172.18.0.1');
    assert.equal(formatIpv4(0xffffffff), '255.255.255.255');
    for (const bad of ['1.2.3', '1.2.3.256', 'a.b.c.d', '1.2.3.4.5', '01.2.3.4x']) {
      assert.equal(parseIpv4(bad), undefined, bad);
    }
    assert.deepEqual(parseCidr('10.1.2.3/8'), { ip: 0x0a010203, prefixLen: 8 });
    assert.deepEqual(parseCidr('10.1.2.3'), { ip: 0x0a010203, prefixLen: 32 });
    assert.equal(parseCidr('10.1.2.3/33'), undefined);
  });

  it('tells overlapping blocks apart', () => {
    const c = (s: string) => parseCidr(s) ?? assert.fail(s);
    assert.equal(overlaps(c('172.17.0.0/16'), c('172.17.5.0/24')), true);
    assert.equal(overlaps(c('172.17.0.0/16'), c('172.18.0.0/16')), false);
    assert.equal(overlaps(c('10.0.0.0/8'), c('10.200.0.1/32')), true);
    assert.equal(overlaps(c('0.0.0.0/0'), c('192.168.1.0/24')), true);
    assert.equal(overlaps(c('192.168.0.0/20'), c('192.168.16.0/20')), false);
  });
});

describe('subnet choice', () => {
  it("offers dockerd's default pools in order: 172.17-31/16, then 192.168.x.0/20", () => {
    assert.equal(DEFAULT_POOLS.length, 31);
    assert.equal(DEFAULT_POOLS[0], '172.17.0.0/16');
    assert.equal(DEFAULT_POOLS[14], '172.31.0.0/16');
    assert.equal(DEFAULT_POOLS[15], '192.168.0.0/20');
    assert.equal(DEFAULT_POOLS[30], '192.168.240.0/20');
  });

  it('picks the first pool no route or address of the host touches', () => {
    assert.deepEqual(pickSubnet([]), { subnet: '172.17.0.0/16', gateway: '172.17.0.1', prefixLen: 16 });
    // dockerd's docker0 and the host's own network
    assert.deepEqual(pickSubnet(['172.17.0.0/16', '192.0.2.0/24', '172.17.0.1/16']), {
      subnet: '172.18.0.0/16',
      gateway: '172.18.0.1',
      prefixLen: 16,
    });
    // a route inside a pool takes the whole pool
    assert.equal(pickSubnet(['172.17.0.0/16', '172.18.3.0/24']).subnet, '172.19.0.0/16');
    // a wide route covers many pools
    const taken = ['172.16.0.0/12'];
    assert.deepEqual(pickSubnet(taken), { subnet: '192.168.0.0/20', gateway: '192.168.0.1', prefixLen: 20 });
    assert.equal(pickSubnet([...taken, '192.168.0.0/19']).subnet, '192.168.32.0/20');
    // unparsable entries are ignored
    assert.equal(pickSubnet(['nonsense', 'fe80::/64']).subnet, '172.17.0.0/16');
  });

  it("fails with dockerd's message when every pool is taken", () => {
    assert.throws(
      () => pickSubnet(['172.16.0.0/12', '192.168.0.0/16']),
      (err: Error & { kind?: string }) =>
        err.kind === 'InvalidParameter' &&
        /could not find an available, non-overlapping IPv4 address pool/.test(err.message),
    );
  });

  it('reads --bip as the bridge address in its block, refusing what is not a host address', () => {
    assert.deepEqual(parseBip('172.30.5.1/16'), {
      subnet: '172.30.0.0/16',
      gateway: '172.30.5.1',
      prefixLen: 16,
    });
    assert.deepEqual(parseBip('10.9.0.254/24'), {
      subnet: '10.9.0.0/24',
      gateway: '10.9.0.254',
      prefixLen: 24,
    });
    for (const bad of [
      '172.30.0.1',
      '172.30.0.0/16',
      '172.30.255.255/16',
      '10.0.0.1/31',
      'x/16',
      '300.1.1.1/8',
    ]) {
      assert.throws(() => parseBip(bad), /invalid --bip/, bad);
    }
  });

  it('turns a found bridge address into its block', () => {
    assert.deepEqual(choiceFromAddress('172.17.0.1', 16), {
      subnet: '172.17.0.0/16',
      gateway: '172.17.0.1',
      prefixLen: 16,
    });
    assert.equal(choiceFromAddress('bogus', 16), undefined);
  });
});

describe('network status (API 1.52 Status.IPAM.Subnets)', () => {
  it('counts what libnetwork IPAM holds: network, broadcast, gateway, endpoints', () => {
    assert.deepEqual(subnetStatus('172.17.0.0/16', '172.17.0.1', []), {
      IPsInUse: 3,
      DynamicIPsAvailable: 65533,
    });
    assert.deepEqual(
      subnetStatus('10.0.0.0/24', '10.0.0.1', ['10.0.0.2', '10.0.0.3', '10.0.0.3', '192.168.0.9']),
      {
        IPsInUse: 5,
        DynamicIPsAvailable: 251,
      },
    );
    // a /31 reserves neither end (RFC 3021)
    assert.deepEqual(subnetStatus('10.0.0.0/31', '', []), { IPsInUse: 0, DynamicIPsAvailable: 2 });
  });
});
