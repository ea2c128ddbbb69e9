import { invalidParameter } from '../../../common/errors.js';
import type { InitRequest, JoinRequest, NodeSpecUpdate, SpecUpdate } from '../../swarm/swarm.types.js';
import {
  array,
  bool,
  decodeStruct,
  duration,
  type Fields,
  goInt,
  int64,
  named,
  str,
  stringMap,
  strings,
  struct,
  uint32,
  uint64,
} from './go-json.js';

/** The bodies of POST /swarm/init and /swarm/update as moby declares them (api/types/swarm), decoded as Go does. */

const specFields: Fields = {
  Name: str,
  Labels: stringMap,
  Orchestration: struct('swarm.OrchestrationConfig', { TaskHistoryRetentionLimit: int64 }),
  Raft: struct('swarm.RaftConfig', {
    SnapshotInterval: uint64,
    KeepOldSnapshots: uint64,
    LogEntriesForSlowFollowers: uint64,
    ElectionTick: goInt,
    HeartbeatTick: goInt,
  }),
  Dispatcher: struct('swarm.DispatcherConfig', { HeartbeatPeriod: duration }),
  CAConfig: struct('swarm.CAConfig', {
    NodeCertExpiry: duration,
    ExternalCAs: array(
      '[]*swarm.ExternalCA',
      struct('swarm.ExternalCA', {
        Protocol: named('swarm.ExternalCAProtocol'),
        URL: str,
        Options: stringMap,
        CACert: str,
      }),
    ),
    SigningCACert: str,
    SigningCAKey: str,
    ForceRotate: uint64,
  }),
  TaskDefaults: struct('swarm.TaskDefaults', {
    LogDriver: struct('swarm.Driver', { Name: str, Options: stringMap }),
  }),
  EncryptionConfig: struct('swarm.EncryptionConfig', { AutoLockManagers: bool }),
};

const initFields: Fields = {
  ListenAddr: str,
  AdvertiseAddr: str,
  DataPathAddr: str,
  DataPathPort: uint32,
  DefaultAddrPool: strings,
  ForceNewCluster: bool,
  Spec: struct('swarm.Spec', specFields),
  AutoLockManagers: bool,
  Availability: named('swarm.NodeAvailability'),
  SubnetSize: uint32,
};

const joinFields: Fields = {
  ListenAddr: str,
  AdvertiseAddr: str,
  DataPathAddr: str,
  RemoteAddrs: strings,
  JoinToken: str,
  Availability: named('swarm.NodeAvailability'),
};

const nodeSpecFields: Fields = {
  Name: str,
  Labels: stringMap,
  Role: named('swarm.NodeRole'),
  Availability: named('swarm.NodeAvailability'),
};

function object(value: unknown, go: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    const kind = Array.isArray(value) ? 'array' : typeof value;
    throw invalidParameter(`json: cannot unmarshal ${kind} into Go value of type ${go}`);
  }
  return value as Record<string, unknown>;
}

export function decodeInitRequest(value: unknown): InitRequest {
  return decodeStruct(object(value, 'swarm.InitRequest'), initFields, 'InitRequest', []) as InitRequest;
}

export function decodeJoinRequest(value: unknown): JoinRequest {
  return decodeStruct(object(value, 'swarm.JoinRequest'), joinFields, 'JoinRequest', []) as JoinRequest;
}

export function decodeNodeSpec(value: unknown): NodeSpecUpdate {
  return decodeStruct(object(value, 'swarm.NodeSpec'), nodeSpecFields, 'NodeSpec', []) as NodeSpecUpdate;
}

export function decodeSwarmSpec(value: unknown): SpecUpdate {
  return decodeStruct(object(value, 'swarm.Spec'), specFields, 'Spec', []) as SpecUpdate;
}
