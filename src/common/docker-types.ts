/**
 * Docker's API structures shared by several engine services (images, containers, runtime).
 * Field names and casing are Docker's, because these objects go over the wire and to disk as they
 * are. Every field is optional on input; services fill defaults.
 */

export type StringMap = Record<string, string>;
export type EmptyObjectMap = Record<string, Record<string, never>>;

export interface HealthConfig {
  Test?: string[];
  Interval?: number;
  Timeout?: number;
  StartPeriod?: number;
  StartInterval?: number;
  Retries?: number;
}

/** A container's `Config` (also the `config` section of an image config). */
export interface ContainerConfig {
  Hostname?: string;
  Domainname?: string;
  User?: string;
  AttachStdin?: boolean;
  AttachStdout?: boolean;
  AttachStderr?: boolean;
  ExposedPorts?: EmptyObjectMap | null;
  Tty?: boolean;
  OpenStdin?: boolean;
  StdinOnce?: boolean;
  Env?: string[] | null;
  Cmd?: string[] | null;
  Healthcheck?: HealthConfig | null;
  ArgsEscaped?: boolean;
  Image?: string;
  Volumes?: EmptyObjectMap | null;
  WorkingDir?: string;
  Entrypoint?: string[] | null;
  NetworkDisabled?: boolean;
  MacAddress?: string;
  OnBuild?: string[] | null;
  Labels?: StringMap | null;
  StopSignal?: string;
  StopTimeout?: number | null;
  Shell?: string[] | null;
}

export interface RestartPolicy {
  Name?: '' | 'no' | 'always' | 'unless-stopped' | 'on-failure';
  MaximumRetryCount?: number;
}

export interface Ulimit {
  Name: string;
  Soft: number;
  Hard: number;
}

export interface DeviceMapping {
  PathOnHost: string;
  PathInContainer: string;
  CgroupPermissions: string;
}

export interface WeightDevice {
  Path: string;
  Weight: number;
}

export interface ThrottleDevice {
  Path: string;
  Rate: number;
}

export interface PortBinding {
  HostIp?: string;
  HostPort?: string;
}

export interface LogConfig {
  Type?: string;
  Config?: StringMap;
}

/** A mount of HostConfig.Mounts (API >= 1.25). */
export interface MountSpec {
  /** `image` from API 1.48. */
  Type?: 'bind' | 'volume' | 'tmpfs' | 'npipe' | 'cluster' | 'image';
  Source?: string;
  Target?: string;
  ReadOnly?: boolean;
  Consistency?: string;
  BindOptions?: {
    Propagation?: string;
    NonRecursive?: boolean;
    CreateMountpoint?: boolean;
    /** API 1.44: a read-only bind stays read-only only at its top (submounts writable). */
    ReadOnlyNonRecursive?: boolean;
    /** API 1.44: fail when recursive read-only is not possible. */
    ReadOnlyForceRecursive?: boolean;
  };
  VolumeOptions?: {
    NoCopy?: boolean;
    Labels?: StringMap;
    DriverConfig?: { Name?: string; Options?: StringMap };
    /** API 1.45: a directory of the volume to mount instead of its root. */
    Subpath?: string;
  };
  /** `Options` (API 1.46): extra tmpfs options as [name] or [name, value]. */
  TmpfsOptions?: { SizeBytes?: number; Mode?: number; Options?: string[][] | null };
  /** API 1.48, mounts of type `image`: a directory of the image to mount instead of its root. */
  ImageOptions?: { Subpath?: string };
}

export interface HostConfig {
  Binds?: string[] | null;
  ContainerIDFile?: string;
  LogConfig?: LogConfig;
  NetworkMode?: string;
  PortBindings?: Record<string, PortBinding[] | null> | null;
  RestartPolicy?: RestartPolicy;
  AutoRemove?: boolean;
  VolumeDriver?: string;
  VolumesFrom?: string[] | null;
  ConsoleSize?: [number, number] | null;
  Annotations?: StringMap | null;
  CapAdd?: string[] | null;
  CapDrop?: string[] | null;
  CgroupnsMode?: string;
  Dns?: string[] | null;
  DnsOptions?: string[] | null;
  DnsSearch?: string[] | null;
  ExtraHosts?: string[] | null;
  GroupAdd?: string[] | null;
  IpcMode?: string;
  Cgroup?: string;
  Links?: string[] | null;
  OomScoreAdj?: number;
  PidMode?: string;
  Privileged?: boolean;
  PublishAllPorts?: boolean;
  ReadonlyRootfs?: boolean;
  SecurityOpt?: string[] | null;
  StorageOpt?: StringMap | null;
  Tmpfs?: StringMap | null;
  UTSMode?: string;
  UsernsMode?: string;
  ShmSize?: number;
  Sysctls?: StringMap | null;
  Runtime?: string;
  Isolation?: string;
  // Resources
  CpuShares?: number;
  Memory?: number;
  NanoCpus?: number;
  CgroupParent?: string;
  BlkioWeight?: number;
  BlkioWeightDevice?: WeightDevice[] | null;
  BlkioDeviceReadBps?: ThrottleDevice[] | null;
  BlkioDeviceWriteBps?: ThrottleDevice[] | null;
  BlkioDeviceReadIOps?: ThrottleDevice[] | null;
  BlkioDeviceWriteIOps?: ThrottleDevice[] | null;
  CpuPeriod?: number;
  CpuQuota?: number;
  CpuRealtimePeriod?: number;
  CpuRealtimeRuntime?: number;
  CpusetCpus?: string;
  CpusetMems?: string;
  Devices?: DeviceMapping[] | null;
  DeviceCgroupRules?: string[] | null;
  DeviceRequests?: unknown[] | null;
  KernelMemory?: number;
  KernelMemoryTCP?: number;
  MemoryReservation?: number;
  MemorySwap?: number;
  MemorySwappiness?: number | null;
  OomKillDisable?: boolean | null;
  PidsLimit?: number | null;
  Ulimits?: Ulimit[] | null;
  CpuCount?: number;
  CpuPercent?: number;
  IOMaximumIOps?: number;
  IOMaximumBandwidth?: number;
  Mounts?: MountSpec[] | null;
  MaskedPaths?: string[] | null;
  ReadonlyPaths?: string[] | null;
  Init?: boolean | null;
}

export interface EndpointIPAMConfig {
  IPv4Address?: string;
  IPv6Address?: string;
  LinkLocalIPs?: string[] | null;
}

export interface EndpointSettings {
  IPAMConfig?: EndpointIPAMConfig | null;
  Links?: string[] | null;
  Aliases?: string[] | null;
  MacAddress?: string;
  DriverOpts?: StringMap | null;
  NetworkID?: string;
  EndpointID?: string;
  Gateway?: string;
  IPAddress?: string;
  IPPrefixLen?: number;
  IPv6Gateway?: string;
  GlobalIPv6Address?: string;
  GlobalIPv6PrefixLen?: number;
  DNSNames?: string[] | null;
  /** API 1.48: the endpoint with the highest gives the default gateway. */
  GwPriority?: number;
}

/** The JSON of an image config blob (OCI image config, with Docker's extra fields). */
export interface ImageConfigFile {
  architecture: string;
  os: string;
  variant?: string;
  'os.version'?: string;
  created?: string;
  author?: string;
  config?: ContainerConfig;
  container?: string;
  container_config?: ContainerConfig;
  docker_version?: string;
  comment?: string;
  rootfs: { type: 'layers'; diff_ids: string[] };
  history?: ImageHistoryEntry[];
}

export interface ImageHistoryEntry {
  created?: string;
  created_by?: string;
  author?: string;
  comment?: string;
  empty_layer?: boolean;
}

export const MediaTypes = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  dockerSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayer: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  dockerForeignLayer: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  ociEmpty: 'application/vnd.oci.empty.v1+json',
} as const;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  urls?: string[];
  annotations?: StringMap;
  platform?: {
    architecture: string;
    os: string;
    variant?: string;
    'os.version'?: string;
    'os.features'?: string[];
  };
  artifactType?: string;
}
