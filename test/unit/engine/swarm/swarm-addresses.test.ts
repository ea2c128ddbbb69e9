import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  detectAdvertiseAddress,
  type HostInterface,
  parseHostPort,
  resolveAddresses,
} from '../../../../src/engine/swarm/addresses.js';

const lo: HostInterface = {
  name: 'lo',
  up: true,
  loopback: true,
  kind: '',
  addresses: [
    { ip: '127.0.0.1', family: 4, scope: 'host' },
    { ip: '::1', family: 6, scope: 'host' },
  ],
};
const eth0: HostInterface = {
  name: 'eth0',
  up: true,
  loopback: false,
  kind: '',
  addresses: [
    { ip: '192.0.2.2', family: 4, scope: 'global' },
    { ip: 'fd00::2', family: 6, scope: 'global' },
    { ip: 'fe80::1', family: 6, scope: 'link' },
  ],
};
const bridge = (name: string, ip: string): HostInterface => ({
  name,
  up: true,
  loopback: false,
  kind: 'bridge',
  addresses: [{ ip, family: 4, scope: 'global' }],
});
const lister = (...list: HostInterface[]) => ({ list: async () => list });

describe('swarm advertise address', () => {
  it('takes the one global address, leaving out loopback, bridges and interfaces that are down', async () => {
    const down: HostInterface = {
      ...eth0,
      name: 'eth1',
      up: false,
      addresses: [{ ip: '10.1.1.1', family: 4, scope: 'global' }],
    };
    const found = await detectAdvertiseAddress(
      lister(lo, eth0, bridge('docker0', '172.17.0.1'), bridge('berth0', '172.18.0.1'), down),
    );
    assert.equal(found, '192.0.2.2');
  });

  it('takes an interface with only IPv6', async () => {
    const v6only: HostInterface = { ...eth0, addresses: [{ ip: 'fd00::9', family: 6, scope: 'global' }] };
    assert.equal(await detectAdvertiseAddress(lister(lo, v6only)), 'fd00::9');
  });

  it("refuses to choose between interfaces, in dockerd's words", async () => {
    const eth1: HostInterface = {
      ...eth0,
      name: 'eth1',
      addresses: [{ ip: '198.51.100.7', family: 4, scope: 'global' }],
    };
    await assert.rejects(detectAdvertiseAddress(lister(eth0, eth1)), {
      kind: 'InvalidParameter',
      message:
        'could not choose an IP address to advertise since this system has multiple addresses on different interfaces (192.0.2.2 on eth0 and 198.51.100.7 on eth1)',
    });
    await assert.rejects(detectAdvertiseAddress(lister(lo)), /could not find the system's IP address/);
  });

  it('reads addr:port, [v6]:port, iface:port and a host alone', () => {
    assert.deepEqual(parseHostPort('0.0.0.0:2377', 'ListenAddr', 2377), { host: '0.0.0.0', port: 2377 });
    assert.deepEqual(parseHostPort('127.0.0.1', 'ListenAddr', 2377), { host: '127.0.0.1', port: 2377 });
    assert.deepEqual(parseHostPort('eth0:4000', 'ListenAddr', 2377), { host: 'eth0', port: 4000 });
    assert.deepEqual(parseHostPort('[fd00::2]:4000', 'ListenAddr', 2377), { host: 'fd00::2', port: 4000 });
    assert.deepEqual(parseHostPort('fd00::2', 'ListenAddr', 2377), { host: 'fd00::2', port: 2377 });
    assert.deepEqual(parseHostPort(':4000', 'ListenAddr', 2377), { host: '0.0.0.0', port: 4000 });
    assert.throws(
      () => parseHostPort('bogus::x', 'ListenAddr', 2377),
      /^BerthError|invalid ListenAddr "bogus::x"/,
    );
    assert.throws(() => parseHostPort('1.2.3.4:70000', 'ListenAddr', 2377), /invalid port/);
    assert.throws(() => parseHostPort('a b:1', 'ListenAddr', 2377), /not an IP address or an interface name/);
  });

  it('advertises the listen address when it is specific, else what is given or found', async () => {
    const l = lister(lo, eth0);
    assert.deepEqual(await resolveAddresses({ ListenAddr: '127.0.0.1:3000' }, l), {
      listenHost: '127.0.0.1',
      listenPort: 3000,
      advertiseHost: '127.0.0.1',
      advertisePort: 3000,
      dataPathAddr: '127.0.0.1',
    });
    const found = await resolveAddresses({}, l);
    assert.equal(found.advertiseHost, '192.0.2.2');
    assert.equal(found.listenPort, 2377);
    const byName = await resolveAddresses({ AdvertiseAddr: 'eth0:5000', DataPathAddr: '10.9.9.9' }, l);
    assert.equal(byName.advertiseHost, '192.0.2.2');
    assert.equal(byName.advertisePort, 5000);
    assert.equal(byName.dataPathAddr, '10.9.9.9');
    await assert.rejects(resolveAddresses({ AdvertiseAddr: '0.0.0.0' }, l), /must be a specific address/);
  });
});
