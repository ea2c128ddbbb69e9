import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { localNetworkFacts } from '../../../../../src/engine/swarm/networks/local-facts.js';

describe("an overlay's Containers and Peers on a node that has it", () => {
  it('names containers by their settings, keeps their own endpoint IDs, shows the ingress sandbox', async () => {
    const stable = 'a'.repeat(64);
    const facts = await localNetworkFacts(
      'net1',
      {
        endpoints: [
          { sandbox: 'task-container', endpointId: stable, mac: '02:42:0a:00:01:03', ipv4: '10.0.1.3/24' },
          { sandbox: 'plain', endpointId: stable, mac: '02:42:0a:00:01:04', ipv4: '10.0.1.4/24' },
          { sandbox: 'gone', endpointId: stable, mac: '02:42:0a:00:01:05', ipv4: '10.0.1.5/24' },
          {
            sandbox: 'ingress-sbox',
            name: 'ingress-endpoint',
            endpointId: stable,
            mac: '02:42:0a:00:00:02',
            ipv4: '10.0.0.2/24',
          },
        ],
        peers: [{ name: 'host-one', ip: '192.168.1.1' }],
      },
      async (id) =>
        id === 'task-container'
          ? { Name: '/web.1.abc', NetworkSettings: { Networks: null } }
          : id === 'plain'
            ? {
                Name: '/plain',
                NetworkSettings: {
                  Networks: {
                    other: { NetworkID: 'net2', EndpointID: 'x' },
                    ov: { NetworkID: 'net1', EndpointID: 'own' },
                  },
                },
              }
            : undefined,
    );
    assert.deepEqual(facts.peers, [{ Name: 'host-one', IP: '192.168.1.1' }]);
    assert.deepEqual(Object.keys(facts.containers), ['task-container', 'plain', 'ingress-sbox']);
    assert.deepEqual(facts.containers['task-container'], {
      Name: 'web.1.abc',
      EndpointID: stable,
      MacAddress: '02:42:0a:00:01:03',
      IPv4Address: '10.0.1.3/24',
      IPv6Address: '',
    });
    assert.equal(facts.containers.plain?.EndpointID, 'own');
    assert.equal(facts.containers['ingress-sbox']?.Name, 'ingress-endpoint');
  });
});
