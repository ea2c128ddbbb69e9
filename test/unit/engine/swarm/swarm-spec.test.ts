import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  defaultSpec,
  effectiveCertExpiryMs,
  effectiveHeartbeatMs,
  effectiveRaft,
  mergeSpec,
  specFromUpdate,
  validateSpec,
} from '../../../../src/engine/swarm/spec.js';

describe('swarm spec', () => {
  it("has swarmkit's defaults", () => {
    const s = defaultSpec();
    assert.equal(s.Orchestration.TaskHistoryRetentionLimit, 5);
    assert.deepEqual(s.Raft, {
      SnapshotInterval: 10000,
      KeepOldSnapshots: 0,
      LogEntriesForSlowFollowers: 500,
      ElectionTick: 10,
      HeartbeatTick: 1,
    });
    assert.equal(s.Dispatcher.HeartbeatPeriod, 5e9);
    assert.equal(s.CAConfig.NodeCertExpiry, 90 * 24 * 3600e9);
    validateSpec(s);
  });

  it('merges as moby: zero and absent keep, given values replace, autolock is always taken', () => {
    const base = mergeSpec(defaultSpec(), {
      EncryptionConfig: { AutoLockManagers: true },
      Labels: { a: '1' },
    });
    assert.equal(base.EncryptionConfig.AutoLockManagers, true);
    const next = mergeSpec(base, {
      Name: '',
      Labels: {},
      Raft: { SnapshotInterval: 0, KeepOldSnapshots: 3, ElectionTick: 20 },
      Orchestration: { TaskHistoryRetentionLimit: 0 },
      Dispatcher: { HeartbeatPeriod: 0 },
    });
    assert.deepEqual(next.Labels, { a: '1' });
    assert.equal(next.Raft.SnapshotInterval, 10000);
    assert.equal(next.Raft.KeepOldSnapshots, 3);
    assert.equal(next.Raft.ElectionTick, 20);
    assert.equal(next.Orchestration.TaskHistoryRetentionLimit, 0);
    assert.equal(next.Dispatcher.HeartbeatPeriod, 5e9);
    assert.equal(next.EncryptionConfig.AutoLockManagers, false);
    assert.equal(base.Raft.ElectionTick, 10, 'the spec merged into is not changed');
  });

  it('replaces the spec on update as moby does, zeros meaning the defaults where used', () => {
    const s = specFromUpdate({ Raft: { SnapshotInterval: 777 }, Labels: { a: 'b' } });
    assert.deepEqual(s, {
      Name: 'default',
      Labels: { a: 'b' },
      Orchestration: { TaskHistoryRetentionLimit: 0 },
      Raft: { SnapshotInterval: 777, KeepOldSnapshots: 0, ElectionTick: 0, HeartbeatTick: 0 },
      Dispatcher: {},
      CAConfig: {},
      TaskDefaults: {},
      EncryptionConfig: { AutoLockManagers: false },
    });
    validateSpec(s);
    assert.deepEqual(effectiveRaft(s), {
      SnapshotInterval: 777,
      KeepOldSnapshots: 0,
      LogEntriesForSlowFollowers: 500,
      HeartbeatTick: 1,
      ElectionTick: 10,
    });
    assert.equal(effectiveHeartbeatMs(s), 5000);
    assert.equal(effectiveCertExpiryMs(s), 90 * 24 * 3600 * 1000);
    assert.equal(effectiveHeartbeatMs(specFromUpdate({ Dispatcher: { HeartbeatPeriod: 2e9 } })), 2000);
  });

  it('refuses what swarmkit refuses', () => {
    const s = defaultSpec();
    assert.throws(() => validateSpec({ ...s, CAConfig: { NodeCertExpiry: 3599e9 } }), {
      kind: 'InvalidParameter',
      message: 'minimum certificate expiry time is: 1h0m0s',
    });
    assert.throws(() => validateSpec({ ...s, Name: 'x' }), /must be named "default"/);
    assert.throws(() => validateSpec({ ...s, Raft: { ...s.Raft, ElectionTick: 1 } }), /election tick/);
    assert.throws(() => validateSpec({ ...s, CAConfig: { ...s.CAConfig, ForceRotate: -1 } }), {
      kind: 'InvalidParameter',
    });
    const ext = (ExternalCAs: unknown) =>
      validateSpec({ ...s, CAConfig: { ...s.CAConfig, ExternalCAs: ExternalCAs as never } });
    assert.throws(() => ext([{ Protocol: 'acme', URL: 'http://x' }]), {
      message: 'invalid protocol: "acme"',
    });
    assert.throws(() => ext([null]), { kind: 'InvalidParameter' });
    ext([{ Protocol: 'CFSSL', URL: 'anything' }]);
    // a rotation is the update's to start (membership/cluster-settings.ts): the spec itself is fine
    validateSpec({ ...s, CAConfig: { ...s.CAConfig, ForceRotate: 1 } });
  });
});
