import { invalidParameter } from '../../../common/errors.js';
import type { ServiceSpec } from '../../swarm/services/service.types.js';
import { mountFields } from './containers.schema.js';
import {
  array,
  bool,
  decodeStruct,
  duration,
  type Fields,
  fileMode,
  float32,
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

/** The body of POST /services/create and /services/{id}/update: moby's swarm.ServiceSpec, decoded as Go does. */

const empty = { k: 'empty' } as const;

const driver = struct('swarm.Driver', { Name: str, Options: stringMap });
const networks = array(
  '[]swarm.NetworkAttachmentConfig',
  struct('swarm.NetworkAttachmentConfig', { Target: str, Aliases: strings, DriverOpts: stringMap }),
);

const fileTarget = (go: string) => struct(go, { Name: str, UID: str, GID: str, Mode: fileMode });

/** moby's mount.Mount, as for a container's HostConfig.Mounts. */
const mount = struct('mount.Mount', mountFields);

const containerSpec = struct('swarm.ContainerSpec', {
  Image: str,
  Labels: stringMap,
  Command: strings,
  Args: strings,
  Hostname: str,
  Env: strings,
  Dir: str,
  User: str,
  Groups: strings,
  Privileges: struct('swarm.Privileges', {
    CredentialSpec: struct('swarm.CredentialSpec', { Config: str, File: str, Registry: str }),
    SELinuxContext: struct('swarm.SELinuxContext', {
      Disable: bool,
      User: str,
      Role: str,
      Type: str,
      Level: str,
    }),
    Seccomp: struct('swarm.SeccompOpts', { Mode: named('swarm.SeccompMode'), Profile: named('[]uint8') }),
    AppArmor: struct('swarm.AppArmorOpts', { Mode: named('swarm.AppArmorMode') }),
    NoNewPrivileges: bool,
  }),
  Init: bool,
  StopSignal: str,
  TTY: bool,
  OpenStdin: bool,
  ReadOnly: bool,
  Mounts: array('[]mount.Mount', mount),
  StopGracePeriod: duration,
  Healthcheck: struct('container.HealthConfig', {
    Test: strings,
    Interval: duration,
    Timeout: duration,
    StartPeriod: duration,
    StartInterval: duration,
    Retries: goInt,
  }),
  Hosts: strings,
  DNSConfig: struct('swarm.DNSConfig', { Nameservers: strings, Search: strings, Options: strings }),
  Secrets: array(
    '[]*swarm.SecretReference',
    struct('swarm.SecretReference', {
      File: fileTarget('swarm.SecretReferenceFileTarget'),
      SecretID: str,
      SecretName: str,
    }),
  ),
  Configs: array(
    '[]*swarm.ConfigReference',
    struct('swarm.ConfigReference', {
      File: fileTarget('swarm.ConfigReferenceFileTarget'),
      Runtime: empty,
      ConfigID: str,
      ConfigName: str,
    }),
  ),
  Isolation: named('container.Isolation'),
  Sysctls: stringMap,
  CapabilityAdd: strings,
  CapabilityDrop: strings,
  Ulimits: array('[]*units.Ulimit', struct('units.Ulimit', { Name: str, Hard: int64, Soft: int64 })),
  OomScoreAdj: int64,
});

const updateConfig = (go: string) =>
  struct(go, {
    Parallelism: uint64,
    Delay: duration,
    FailureAction: named('swarm.FailureAction'),
    Monitor: duration,
    MaxFailureRatio: float32,
    Order: named('swarm.UpdateOrder'),
  });

const specFields: Fields = {
  Name: str,
  Labels: stringMap,
  TaskTemplate: struct('swarm.TaskSpec', {
    ContainerSpec: containerSpec,
    PluginSpec: struct('runtime.PluginSpec', {
      Name: str,
      Remote: str,
      Privileges: array(
        '[]*runtime.PluginPrivilege',
        struct('runtime.PluginPrivilege', { Name: str, Description: str, Value: strings }),
      ),
      Disabled: bool,
      Env: strings,
    }),
    NetworkAttachmentSpec: struct('swarm.NetworkAttachmentSpec', { ContainerID: str }),
    Resources: struct('swarm.ResourceRequirements', {
      Limits: struct('swarm.Limit', { NanoCPUs: int64, MemoryBytes: int64, Pids: int64 }),
      Reservations: struct('swarm.Resources', {
        NanoCPUs: int64,
        MemoryBytes: int64,
        GenericResources: array(
          '[]swarm.GenericResource',
          struct('swarm.GenericResource', {
            NamedResourceSpec: struct('swarm.NamedGenericResource', { Kind: str, Value: str }),
            DiscreteResourceSpec: struct('swarm.DiscreteGenericResource', { Kind: str, Value: int64 }),
          }),
        ),
      }),
    }),
    RestartPolicy: struct('swarm.RestartPolicy', {
      Condition: named('swarm.RestartPolicyCondition'),
      Delay: duration,
      MaxAttempts: uint64,
      Window: duration,
    }),
    Placement: struct('swarm.Placement', {
      Constraints: strings,
      Preferences: array(
        '[]swarm.PlacementPreference',
        struct('swarm.PlacementPreference', {
          Spread: struct('swarm.SpreadOver', { SpreadDescriptor: str }),
        }),
      ),
      MaxReplicas: uint64,
      Platforms: array('[]swarm.Platform', struct('swarm.Platform', { Architecture: str, OS: str })),
    }),
    Networks: networks,
    LogDriver: driver,
    ForceUpdate: uint64,
    Runtime: named('swarm.RuntimeType'),
  }),
  Mode: struct('swarm.ServiceMode', {
    Replicated: struct('swarm.ReplicatedService', { Replicas: uint64 }),
    Global: empty,
    ReplicatedJob: struct('swarm.ReplicatedJob', { MaxConcurrent: uint64, TotalCompletions: uint64 }),
    GlobalJob: empty,
  }),
  UpdateConfig: updateConfig('swarm.UpdateConfig'),
  RollbackConfig: updateConfig('swarm.UpdateConfig'),
  Networks: networks,
  EndpointSpec: struct('swarm.EndpointSpec', {
    Mode: named('swarm.ResolutionMode'),
    Ports: array(
      '[]swarm.PortConfig',
      struct('swarm.PortConfig', {
        Name: str,
        Protocol: named('swarm.PortConfigProtocol'),
        TargetPort: uint32,
        PublishedPort: uint32,
        PublishMode: named('swarm.PortConfigPublishMode'),
      }),
    ),
  }),
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A key of `obj` matched as Go matches a field name (exact, else ignoring case). */
function hasKey(obj: Record<string, unknown>, name: string): boolean {
  return Object.keys(obj).some((k) => k === name || k.toLowerCase() === name.toLowerCase());
}

/**
 * Fields of another mode sent inside a mode (`Global: {Replicas: 2}`, `Replicated: {MaxConcurrent: 1}`):
 * Go drops them silently; berth refuses them (issue 14 §10), in the CLI's words.
 */
function checkModeFields(body: Record<string, unknown>): void {
  const mode = Object.entries(body).find(([k]) => k.toLowerCase() === 'mode')?.[1];
  if (!isObject(mode)) return;
  for (const [key, value] of Object.entries(mode)) {
    if (!isObject(value)) continue;
    const kind = key.toLowerCase();
    if ((kind === 'global' || kind === 'globaljob') && hasKey(value, 'Replicas')) {
      throw invalidParameter('replicas can only be used with replicated or replicated-job mode');
    }
    if (kind !== 'replicatedjob' && (hasKey(value, 'MaxConcurrent') || hasKey(value, 'TotalCompletions'))) {
      throw invalidParameter(
        'max-concurrent and total-completions can only be used with replicated-job mode',
      );
    }
  }
}

export function decodeServiceSpec(value: unknown): ServiceSpec {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) {
    const what = Array.isArray(value) ? 'array' : typeof value;
    throw invalidParameter(`json: cannot unmarshal ${what} into Go value of type swarm.ServiceSpec`);
  }
  const spec = decodeStruct(value, specFields, 'ServiceSpec', []) as ServiceSpec;
  checkModeFields(value);
  return spec;
}
