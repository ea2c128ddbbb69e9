import { invalidParameter, notImplemented } from '../../common/errors.js';
import type { SpecUpdate, SwarmSpec } from './swarm.types.js';

/** The Swarm spec's defaults, merge rules and checks (swarmkit's and moby's). */

const SECOND = 1_000_000_000;
const HOUR = 3600 * SECOND;
/** swarmkit's minimum NodeCertExpiry. */
const MIN_CERT_EXPIRY = HOUR;

export function defaultSpec(): SwarmSpec {
  return {
    Name: 'default',
    Labels: {},
    Orchestration: { TaskHistoryRetentionLimit: 5 },
    Raft: {
      SnapshotInterval: 10000,
      KeepOldSnapshots: 0,
      LogEntriesForSlowFollowers: 500,
      ElectionTick: 10,
      HeartbeatTick: 1,
    },
    Dispatcher: { HeartbeatPeriod: 5 * SECOND },
    CAConfig: { NodeCertExpiry: 90 * 24 * HOUR },
    TaskDefaults: {},
    EncryptionConfig: { AutoLockManagers: false },
  };
}

/**
 * `update` applied to `spec` as moby merges a request's spec into the cluster's: a field that is
 * zero, empty or absent keeps its value; AutoLockManagers is always the request's.
 */
export function mergeSpec(spec: SwarmSpec, update: SpecUpdate): SwarmSpec {
  const out: SwarmSpec = structuredClone(spec);
  if (update.Name) out.Name = update.Name;
  if (update.Labels && Object.keys(update.Labels).length > 0) out.Labels = { ...update.Labels };
  const o = update.Orchestration;
  if (o?.TaskHistoryRetentionLimit !== undefined && o.TaskHistoryRetentionLimit !== null) {
    out.Orchestration.TaskHistoryRetentionLimit = o.TaskHistoryRetentionLimit;
  }
  const r = update.Raft;
  if (r?.SnapshotInterval) out.Raft.SnapshotInterval = r.SnapshotInterval;
  if (r?.KeepOldSnapshots !== undefined && r.KeepOldSnapshots !== null)
    out.Raft.KeepOldSnapshots = r.KeepOldSnapshots;
  if (r?.LogEntriesForSlowFollowers) out.Raft.LogEntriesForSlowFollowers = r.LogEntriesForSlowFollowers;
  if (r?.HeartbeatTick) out.Raft.HeartbeatTick = r.HeartbeatTick;
  if (r?.ElectionTick) out.Raft.ElectionTick = r.ElectionTick;
  if (update.Dispatcher?.HeartbeatPeriod) out.Dispatcher.HeartbeatPeriod = update.Dispatcher.HeartbeatPeriod;
  const ca = update.CAConfig;
  if (ca?.NodeCertExpiry) out.CAConfig.NodeCertExpiry = ca.NodeCertExpiry;
  if (ca?.ExternalCAs && ca.ExternalCAs.length > 0) out.CAConfig.ExternalCAs = ca.ExternalCAs;
  if (ca?.SigningCACert) out.CAConfig.SigningCACert = ca.SigningCACert;
  if (ca?.SigningCAKey) out.CAConfig.SigningCAKey = ca.SigningCAKey;
  if (ca?.ForceRotate) out.CAConfig.ForceRotate = ca.ForceRotate;
  const log = update.TaskDefaults?.LogDriver;
  if (log?.Name) {
    out.TaskDefaults.LogDriver = { Name: log.Name, ...(log.Options ? { Options: { ...log.Options } } : {}) };
  }
  out.EncryptionConfig.AutoLockManagers = update.EncryptionConfig?.AutoLockManagers === true;
  return out;
}

/**
 * The checks swarmkit makes of a spec, in its words; and what berth does not do yet (an external
 * CA, a root CA rotation), refused rather than stored and ignored.
 */
export function validateSpec(spec: SwarmSpec, previous?: SwarmSpec): void {
  if (spec.Name !== 'default') throw invalidParameter('swarm spec must be named "default"');
  const expiry = spec.CAConfig.NodeCertExpiry ?? 0;
  if (expiry < MIN_CERT_EXPIRY) throw invalidParameter('minimum certificate expiry time is: 1h0m0s');
  if ((spec.Orchestration.TaskHistoryRetentionLimit ?? 0) < 0) {
    throw invalidParameter('task history retention limit must be non-negative');
  }
  const { HeartbeatTick, ElectionTick, SnapshotInterval } = spec.Raft;
  if (HeartbeatTick < 1) throw invalidParameter('heartbeat tick must be greater than 0');
  if (ElectionTick <= HeartbeatTick) {
    throw invalidParameter('election tick must be greater than heartbeat tick');
  }
  // etcd refuses an election timeout below 5 heartbeats (its own check, made at member start)
  if (ElectionTick < 5 * HeartbeatTick) {
    throw invalidParameter('election tick must be at least 5 times the heartbeat tick (etcd)');
  }
  if (ElectionTick * 100 > 50_000) throw invalidParameter('election tick must be at most 500 (etcd: 50 s)');
  if (SnapshotInterval < 1) throw invalidParameter('snapshot interval must be greater than 0');
  if ((spec.Raft.KeepOldSnapshots ?? 0) < 0)
    throw invalidParameter('keep old snapshots must be non-negative');
  if ((spec.Dispatcher.HeartbeatPeriod ?? 0) < 0)
    throw invalidParameter('heartbeat period must be non-negative');
  if (spec.CAConfig.ExternalCAs && spec.CAConfig.ExternalCAs.length > 0) {
    throw notImplemented('external CAs are not supported by this engine yet');
  }
  if (spec.CAConfig.SigningCACert || spec.CAConfig.SigningCAKey) {
    throw notImplemented('root CA rotation is not supported by this engine yet');
  }
  if ((spec.CAConfig.ForceRotate ?? 0) !== (previous?.CAConfig.ForceRotate ?? 0)) {
    throw notImplemented('root CA rotation is not supported by this engine yet');
  }
}
