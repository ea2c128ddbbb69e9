import { invalidParameter } from '../../common/errors.js';
import type { RaftSettings } from './etcd/etcd-args.js';
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
 * The spec of `POST /swarm/update`: the request's as given, as moby converts it onto an empty
 * cluster spec (the CLI and docker-py send the whole spec read before): a field left out or zero
 * stays zero (shown as dockerd shows it), and the defaults apply where it is used (effective*).
 */
export function specFromUpdate(update: SpecUpdate): SwarmSpec {
  const r = update.Raft ?? {};
  const ca = update.CAConfig ?? {};
  const log = update.TaskDefaults?.LogDriver;
  return {
    Name: update.Name || 'default',
    Labels: { ...(update.Labels ?? {}) },
    Orchestration: { TaskHistoryRetentionLimit: update.Orchestration?.TaskHistoryRetentionLimit ?? 0 },
    Raft: {
      ...(r.SnapshotInterval ? { SnapshotInterval: r.SnapshotInterval } : {}),
      KeepOldSnapshots: r.KeepOldSnapshots ?? 0,
      ...(r.LogEntriesForSlowFollowers ? { LogEntriesForSlowFollowers: r.LogEntriesForSlowFollowers } : {}),
      ElectionTick: r.ElectionTick ?? 0,
      HeartbeatTick: r.HeartbeatTick ?? 0,
    },
    Dispatcher: update.Dispatcher?.HeartbeatPeriod
      ? { HeartbeatPeriod: update.Dispatcher.HeartbeatPeriod }
      : {},
    CAConfig: {
      ...(ca.NodeCertExpiry ? { NodeCertExpiry: ca.NodeCertExpiry } : {}),
      ...(ca.ExternalCAs && ca.ExternalCAs.length > 0 ? { ExternalCAs: ca.ExternalCAs } : {}),
      ...(ca.SigningCACert ? { SigningCACert: ca.SigningCACert } : {}),
      ...(ca.SigningCAKey ? { SigningCAKey: ca.SigningCAKey } : {}),
      ...(ca.ForceRotate ? { ForceRotate: ca.ForceRotate } : {}),
    },
    TaskDefaults: log?.Name
      ? { LogDriver: { Name: log.Name, ...(log.Options ? { Options: { ...log.Options } } : {}) } }
      : {},
    EncryptionConfig: { AutoLockManagers: update.EncryptionConfig?.AutoLockManagers === true },
  };
}

const DEFAULTS = defaultSpec();

/** The Raft settings in force: a zero field is swarmkit's default. */
export function effectiveRaft(spec: SwarmSpec): RaftSettings {
  const r = spec.Raft;
  const d = DEFAULTS.Raft;
  return {
    SnapshotInterval: r.SnapshotInterval || (d.SnapshotInterval ?? 10000),
    KeepOldSnapshots: r.KeepOldSnapshots ?? 0,
    LogEntriesForSlowFollowers: r.LogEntriesForSlowFollowers || (d.LogEntriesForSlowFollowers ?? 500),
    HeartbeatTick: r.HeartbeatTick || d.HeartbeatTick,
    ElectionTick: r.ElectionTick || d.ElectionTick,
  };
}

/** Dispatcher.HeartbeatPeriod in force, in ms (0: the default 5 s). */
export function effectiveHeartbeatMs(spec: SwarmSpec): number {
  return Math.max(
    1000,
    (spec.Dispatcher.HeartbeatPeriod || (DEFAULTS.Dispatcher.HeartbeatPeriod ?? 5 * SECOND)) / 1e6,
  );
}

/** NodeCertExpiry in force, in ms (0: the default 90 days). */
export function effectiveCertExpiryMs(spec: SwarmSpec): number {
  return (spec.CAConfig.NodeCertExpiry || (DEFAULTS.CAConfig.NodeCertExpiry ?? 0)) / 1e6;
}

/** The checks swarmkit makes of a spec, in its words. */
export function validateSpec(spec: SwarmSpec): void {
  if (spec.Name !== 'default') throw invalidParameter('swarm spec must be named "default"');
  // zero: swarmkit's default
  const expiry = spec.CAConfig.NodeCertExpiry ?? 0;
  if (expiry !== 0 && expiry < MIN_CERT_EXPIRY)
    throw invalidParameter('minimum certificate expiry time is: 1h0m0s');
  if ((spec.Orchestration.TaskHistoryRetentionLimit ?? 0) < 0) {
    throw invalidParameter('task history retention limit must be non-negative');
  }
  const { HeartbeatTick, ElectionTick } = effectiveRaft(spec);
  if (HeartbeatTick < 0 || spec.Raft.ElectionTick < 0)
    throw invalidParameter('raft ticks must not be negative');
  if (ElectionTick <= HeartbeatTick) {
    throw invalidParameter('election tick must be greater than heartbeat tick');
  }
  // etcd refuses an election timeout below 5 heartbeats (its own check, made at member start)
  if (ElectionTick < 5 * HeartbeatTick) {
    throw invalidParameter('election tick must be at least 5 times the heartbeat tick (etcd)');
  }
  if (ElectionTick * 100 > 50_000) throw invalidParameter('election tick must be at most 500 (etcd: 50 s)');
  if ((spec.Raft.KeepOldSnapshots ?? 0) < 0)
    throw invalidParameter('keep old snapshots must be non-negative');
  if ((spec.Dispatcher.HeartbeatPeriod ?? 0) < 0)
    throw invalidParameter('heartbeat period must be non-negative');
  // as dockerd: the protocol is checked here, the URL only when a certificate is signed through it
  for (const ca of spec.CAConfig.ExternalCAs ?? []) {
    if (!ca || typeof ca !== 'object') throw invalidParameter('invalid external CA: null');
    if ((ca.Protocol ?? '').toLowerCase() !== 'cfssl') {
      throw invalidParameter(`invalid protocol: ${JSON.stringify(ca.Protocol ?? '')}`);
    }
  }
  if ((spec.CAConfig.ForceRotate ?? 0) < 0) throw invalidParameter('force rotate must be non-negative');
}
