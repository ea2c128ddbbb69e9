/**
 * Services as moby's API shows them (api/types/swarm/service.go, container.go, network.go,
 * task.go's TaskSpec). A spec is stored and returned exactly as given: every field optional, no
 * defaults added unless the request asks for `insertDefaults`. Durations are nanoseconds.
 */

import type { HealthConfig } from '../../../common/docker-types.js';
import type { Version } from '../swarm.types.js';

export interface Driver {
  Name?: string;
  Options?: Record<string, string>;
}

export interface Mount {
  Type?: 'bind' | 'volume' | 'tmpfs' | 'npipe' | 'cluster';
  Source?: string;
  Target?: string;
  ReadOnly?: boolean;
  Consistency?: string;
  BindOptions?: { Propagation?: string; NonRecursive?: boolean; CreateMountpoint?: boolean };
  VolumeOptions?: {
    NoCopy?: boolean;
    Labels?: Record<string, string>;
    DriverConfig?: Driver;
    Subpath?: string;
  };
  TmpfsOptions?: { SizeBytes?: number; Mode?: number; Options?: string[][] };
}

export interface FileTarget {
  Name?: string;
  UID?: string;
  GID?: string;
  Mode?: number;
}

export interface SecretReference {
  File?: FileTarget;
  SecretID?: string;
  SecretName?: string;
}

export interface ConfigReference {
  File?: FileTarget;
  Runtime?: Record<string, never>;
  ConfigID?: string;
  ConfigName?: string;
}

export interface Privileges {
  CredentialSpec?: { Config?: string; File?: string; Registry?: string };
  SELinuxContext?: { Disable?: boolean; User?: string; Role?: string; Type?: string; Level?: string };
  Seccomp?: { Mode?: string; Profile?: string };
  AppArmor?: { Mode?: string };
  NoNewPrivileges?: boolean;
}

export interface Ulimit {
  Name: string;
  Soft: number;
  Hard: number;
}

export interface ContainerSpec {
  Image?: string;
  Labels?: Record<string, string>;
  Command?: string[];
  Args?: string[];
  Hostname?: string;
  Env?: string[];
  Dir?: string;
  User?: string;
  Groups?: string[];
  Privileges?: Privileges;
  Init?: boolean | null;
  StopSignal?: string;
  TTY?: boolean;
  OpenStdin?: boolean;
  ReadOnly?: boolean;
  Mounts?: Mount[];
  StopGracePeriod?: number;
  Healthcheck?: HealthConfig;
  /** "IP host…" lines. */
  Hosts?: string[];
  DNSConfig?: { Nameservers?: string[]; Search?: string[]; Options?: string[] };
  Secrets?: SecretReference[];
  Configs?: ConfigReference[];
  Isolation?: string;
  Sysctls?: Record<string, string>;
  CapabilityAdd?: string[];
  CapabilityDrop?: string[];
  Ulimits?: Ulimit[];
  OomScoreAdj?: number;
}

export interface GenericResource {
  NamedResourceSpec?: { Kind: string; Value: string };
  DiscreteResourceSpec?: { Kind: string; Value: number };
}

export interface Resources {
  Limits?: { NanoCPUs?: number; MemoryBytes?: number; Pids?: number };
  Reservations?: { NanoCPUs?: number; MemoryBytes?: number; GenericResources?: GenericResource[] };
}

export type RestartCondition = 'none' | 'on-failure' | 'any';

export interface RestartPolicy {
  Condition?: RestartCondition;
  Delay?: number;
  MaxAttempts?: number;
  Window?: number;
}

export interface Placement {
  Constraints?: string[];
  Preferences?: { Spread?: { SpreadDescriptor: string } }[];
  MaxReplicas?: number;
  Platforms?: { Architecture?: string; OS?: string }[];
}

export interface NetworkAttachmentConfig {
  /** A network's ID (a name given at create is stored as the ID). */
  Target?: string;
  Aliases?: string[];
  DriverOpts?: Record<string, string>;
}

export interface TaskSpec {
  ContainerSpec?: ContainerSpec;
  /** Plugin and network-attachment runtimes: accepted only as swarmkit does (see validation). */
  PluginSpec?: unknown;
  NetworkAttachmentSpec?: { ContainerID: string };
  Resources?: Resources;
  RestartPolicy?: RestartPolicy;
  Placement?: Placement;
  Networks?: NetworkAttachmentConfig[];
  LogDriver?: Driver;
  /** Incremented to force a rolling update with an unchanged spec. */
  ForceUpdate?: number;
  Runtime?: string;
}

export interface ServiceMode {
  Replicated?: { Replicas?: number };
  Global?: Record<string, never>;
  ReplicatedJob?: { MaxConcurrent?: number; TotalCompletions?: number };
  GlobalJob?: Record<string, never>;
}

export type FailureAction = 'pause' | 'continue' | 'rollback';

export interface UpdateConfig {
  Parallelism?: number;
  Delay?: number;
  FailureAction?: FailureAction;
  Monitor?: number;
  MaxFailureRatio?: number;
  Order?: 'stop-first' | 'start-first';
}

export interface PortConfig {
  Name?: string;
  Protocol?: 'tcp' | 'udp' | 'sctp';
  TargetPort?: number;
  PublishedPort?: number;
  PublishMode?: 'ingress' | 'host';
}

export interface EndpointSpec {
  Mode?: 'vip' | 'dnsrr';
  Ports?: PortConfig[];
}

export interface ServiceSpec {
  Name?: string;
  Labels?: Record<string, string>;
  TaskTemplate?: TaskSpec;
  Mode?: ServiceMode;
  UpdateConfig?: UpdateConfig;
  RollbackConfig?: UpdateConfig;
  /** Deprecated top-level networks (moved into TaskTemplate by old clients). */
  Networks?: NetworkAttachmentConfig[];
  EndpointSpec?: EndpointSpec;
}

export type UpdateState =
  | 'updating'
  | 'paused'
  | 'completed'
  | 'rollback_started'
  | 'rollback_paused'
  | 'rollback_completed';

export interface UpdateStatus {
  State?: UpdateState;
  StartedAt?: string;
  CompletedAt?: string;
  Message?: string;
}

export interface Endpoint {
  Spec?: EndpointSpec;
  /** The ports with their assigned PublishedPort. */
  Ports?: PortConfig[];
  VirtualIPs?: { NetworkID: string; Addr: string }[];
}

export interface ServiceStatus {
  RunningTasks: number;
  DesiredTasks: number;
  CompletedTasks: number;
}

export interface JobStatus {
  JobIteration: Version;
  LastExecution?: string;
}

export interface Service {
  ID: string;
  Version: Version;
  CreatedAt: string;
  UpdatedAt: string;
  Spec: ServiceSpec;
  PreviousSpec?: ServiceSpec;
  Endpoint: Endpoint;
  UpdateStatus?: UpdateStatus;
  /** Only with `status=true` (API 1.41+). */
  ServiceStatus?: ServiceStatus;
  JobStatus?: JobStatus;
}

/**
 * What `P/services/<id>` holds: the Service without Version (that is the key's mod_revision)
 * and ServiceStatus (counted from the tasks when asked), plus private fields the API strips.
 */
export interface StoredService extends Omit<Service, 'Version' | 'ServiceStatus'> {
  _: {
    /**
     * Bumped on every change that replaces tasks (TaskTemplate, ForceUpdate, ports, networks;
     * not Labels or Replicas alone): a task made from an older spec version is out of date
     * (the CLI's `_up-to-date` filter, the updater).
     */
    specVersion: number;
    /** Whether the registry auth of the create/update is kept for the agents (base64 JSON). */
    registryAuth?: string;
  };
}
