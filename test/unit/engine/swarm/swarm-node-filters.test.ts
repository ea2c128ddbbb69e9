import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { filterNodes } from '../../../../src/engine/swarm/nodes/node-filters.js';
import type { SwarmNode } from '../../../../src/engine/swarm/swarm.types.js';

function node(
  id: string,
  hostname: string,
  role: 'manager' | 'worker',
  labels: Record<string, string>,
): SwarmNode {
  const tls = { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' };
  return {
    ID: id,
    Version: { Index: 1 },
    CreatedAt: '',
    UpdatedAt: '',
    Spec: { Labels: labels, Role: role, Availability: 'active' },
    Description: {
      Hostname: hostname,
      Platform: { Architecture: 'x86_64', OS: 'linux' },
      Resources: { NanoCPUs: 1, MemoryBytes: 1 },
      Engine: { EngineVersion: '0.1.0', Labels: { zone: 'a' }, Plugins: [] },
      TLSInfo: tls,
    },
    Status: { State: 'ready', Addr: '10.0.0.1' },
  };
}

const nodes = [
  node('abc111', 'host1', 'manager', { disk: 'ssd' }),
  node('abd222', 'host2', 'worker', { disk: 'hdd' }),
  node('xyz333', 'other', 'worker', {}),
];
const ids = (f: Record<string, string[]>) => filterNodes(nodes, new Map(Object.entries(f))).map((n) => n.ID);

describe('node filters', () => {
  it('matches id and name by prefix, role, membership, labels; values OR, filters AND', () => {
    assert.deepEqual(ids({}), ['abc111', 'abd222', 'xyz333']);
    assert.deepEqual(ids({ id: ['ab'] }), ['abc111', 'abd222']);
    assert.deepEqual(ids({ name: ['host'] }), ['abc111', 'abd222']);
    assert.deepEqual(ids({ role: ['worker'] }), ['abd222', 'xyz333']);
    assert.deepEqual(ids({ role: ['worker'], name: ['host'] }), ['abd222']);
    assert.deepEqual(ids({ 'node.label': ['disk'] }), ['abc111', 'abd222']);
    assert.deepEqual(ids({ 'node.label': ['disk=ssd'] }), ['abc111']);
    assert.deepEqual(ids({ 'node.label': ['disk!=ssd'] }), ['abd222', 'xyz333']);
    assert.deepEqual(ids({ 'node.label': ['disk=ssd', 'disk=hdd'] }), ['abc111', 'abd222']);
    assert.deepEqual(ids({ label: ['zone=a'] }), ['abc111', 'abd222', 'xyz333']);
    assert.deepEqual(ids({ label: ['zone=b'] }), []);
    assert.deepEqual(ids({ membership: ['accepted'] }), ['abc111', 'abd222', 'xyz333']);
    assert.deepEqual(ids({ membership: ['pending'] }), []);
  });

  it('refuses unknown filters and values with 400', () => {
    assert.throws(() => ids({ colour: ['red'] }), {
      kind: 'InvalidParameter',
      message: "invalid filter 'colour'",
    });
    assert.throws(() => ids({ role: ['boss'] }), { kind: 'InvalidParameter' });
    assert.throws(() => ids({ membership: ['maybe'] }), { kind: 'InvalidParameter' });
  });
});
