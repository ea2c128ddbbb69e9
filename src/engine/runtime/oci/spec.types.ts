/**
 * The OCI runtime spec (config.json, opencontainers/runtime-spec 1.0.2), the part berth emits:
 * what buildSpec makes, what the driver writes into a bundle and reads back for exec, and what
 * `runtime update` takes. Field names are the spec's JSON names.
 */

export interface OciSpec {
  ociVersion: string;
  process: OciProcess;
  root: { path: string; readonly: boolean };
  hostname: string;
  mounts: OciMount[];
  linux: OciLinux;
  /** Runtime-specific settings, e.g. crun's `run.oci.seccomp_bpf_data` (the driver adds it). */
  annotations?: Record<string, string>;
}

export interface OciProcess {
  terminal: boolean;
  consoleSize?: { height: number; width: number };
  user: OciUser;
  args: string[];
  env: string[];
  cwd: string;
  capabilities: OciCapabilities;
  rlimits: OciRlimit[];
  noNewPrivileges: boolean;
  oomScoreAdj?: number;
  apparmorProfile?: string;
}

export interface OciUser {
  uid: number;
  gid: number;
  additionalGids?: number[];
}

/** Capability sets by name (`CAP_CHOWN`...); root gets effective and permitted too. */
export interface OciCapabilities {
  bounding: string[];
  effective?: string[];
  permitted?: string[];
  inheritable?: string[];
  ambient?: string[];
}

/** An rlimit; `-1` means unlimited (written as RLIM_INFINITY by specToJson). */
export interface OciRlimit {
  type: string;
  soft: number;
  hard: number;
}

export interface OciMount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

export interface OciNamespace {
  type: 'mount' | 'network' | 'uts' | 'pid' | 'ipc' | 'cgroup' | 'user';
  path?: string;
}

/** A device node (linux.devices). */
export interface OciDevice {
  path: string;
  type: 'c' | 'b' | 'p';
  major: number;
  minor: number;
  fileMode: number;
  uid: number;
  gid: number;
}

/** A device cgroup rule (linux.resources.devices); no type/major/minor: all of them. */
export interface OciDeviceRule {
  allow: boolean;
  type?: 'a' | 'c' | 'b';
  major?: number;
  minor?: number;
  access: string;
}

export interface OciLinux {
  sysctl: Record<string, string>;
  resources: OciResources;
  cgroupsPath: string;
  namespaces: OciNamespace[];
  devices: OciDevice[];
  maskedPaths: string[];
  readonlyPaths: string[];
  rootfsPropagation?: string;
  seccomp?: OciSeccomp;
}

export interface OciMemory {
  limit?: number;
  reservation?: number;
  swap?: number;
  swappiness?: number;
  disableOOMKiller?: boolean;
}

export interface OciCpu {
  shares?: number;
  quota?: number;
  period?: number;
  realtimeRuntime?: number;
  realtimePeriod?: number;
  cpus?: string;
  mems?: string;
}

export interface OciWeightDevice {
  major: number;
  minor: number;
  weight: number;
}

export interface OciThrottleDevice {
  major: number;
  minor: number;
  rate: number;
}

export interface OciBlockIO {
  weight?: number;
  weightDevice?: OciWeightDevice[];
  throttleReadBpsDevice?: OciThrottleDevice[];
  throttleWriteBpsDevice?: OciThrottleDevice[];
  throttleReadIOPSDevice?: OciThrottleDevice[];
  throttleWriteIOPSDevice?: OciThrottleDevice[];
}

/** linux.resources (also the body of `runtime update`, without devices). */
export interface OciResources {
  devices?: OciDeviceRule[];
  memory?: OciMemory;
  cpu?: OciCpu;
  pids?: { limit: number };
  blockIO?: OciBlockIO;
}

export interface OciSeccomp {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures?: string[];
  syscalls?: OciSyscall[];
}

export interface OciSyscall {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: Array<{ index: number; value: number; valueTwo?: number; op: string }>;
}
