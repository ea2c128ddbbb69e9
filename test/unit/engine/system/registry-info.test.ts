import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalCidr, registryInfo } from '../../../../src/engine/system/registry-info.js';

describe("docker info's RegistryConfig", () => {
  it('is what dockerd 20.10 shows for the same flags (recorded)', () => {
    // dockerd --insecure-registry 10.1.2.3/16 --insecure-registry 127.0.0.0/8 --insecure-registry
    // localhost:5000 --insecure-registry Reg.Example.com --insecure-registry fd00::/8
    // --insecure-registry 10.1.0.0/16 --registry-mirror https://m.example.com/ --registry-mirror http://x:1
    const insecure = [
      '127.0.0.0/8', // berth's default, first
      '10.1.2.3/16',
      '127.0.0.0/8',
      'localhost:5000',
      'Reg.Example.com',
      'fd00::/8',
      '10.1.0.0/16',
    ];
    assert.deepEqual(
      JSON.stringify(registryInfo(insecure, ['https://m.example.com/', 'http://x:1'])),
      JSON.stringify({
        AllowNondistributableArtifactsCIDRs: [],
        AllowNondistributableArtifactsHostnames: [],
        InsecureRegistryCIDRs: ['10.1.0.0/16', '127.0.0.0/8', 'fd00::/8'],
        IndexConfigs: {
          'Reg.Example.com': { Name: 'Reg.Example.com', Mirrors: [], Secure: false, Official: false },
          'docker.io': {
            Name: 'docker.io',
            Mirrors: ['https://m.example.com/', 'http://x:1/'],
            Secure: true,
            Official: true,
          },
          'localhost:5000': { Name: 'localhost:5000', Mirrors: [], Secure: false, Official: false },
        },
        Mirrors: ['https://m.example.com/', 'http://x:1/'],
      }),
    );
    // nothing given: loopback only, docker.io without mirrors
    assert.deepEqual(registryInfo(['127.0.0.0/8'], []).InsecureRegistryCIDRs, ['127.0.0.0/8']);
    assert.deepEqual(Object.keys(registryInfo(['127.0.0.0/8'], []).IndexConfigs), ['docker.io']);
  });

  it('reads CIDRs as Go net.ParseCIDR: the network, IPv6 in canonical form', () => {
    assert.equal(canonicalCidr('10.1.2.3/16'), '10.1.0.0/16');
    assert.equal(canonicalCidr('10.1.2.3'), undefined);
    assert.equal(canonicalCidr('reg:5000'), undefined);
    assert.equal(canonicalCidr('FD00:0:0:0::1/8'), 'fd00::/8');
    assert.equal(canonicalCidr('2001:db8:0:0:1:0:0:1/128'), '2001:db8::1:0:0:1/128');
    assert.equal(canonicalCidr('2001:db8::/33'), '2001:db8::/33');
    assert.equal(canonicalCidr('1:2:3:4:5:6:7:8/64'), '1:2:3:4::/64');
    assert.equal(canonicalCidr('::/0'), '::/0');
    assert.equal(canonicalCidr('10.0.0.0/33'), undefined);
    assert.equal(canonicalCidr('fd00::/129'), undefined);
  });
});
