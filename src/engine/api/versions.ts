/**
 * The one module that knows which API versions berth serves and which fields exist at which
 * version. Handlers ask it; nothing else compares version strings.
 */
export const MIN_API_VERSION = '1.24';
/**
 * Advertised maximum: the newest in moby's api/swagger.yaml; every version up to it is really
 * served (docs/api-versions.md says what each changes). docker CLI 29 needs >= 1.44; CLI 28 speaks 1.50.
 */
export const MAX_API_VERSION = '1.56';

/** `major.minor` as one comparable number, memoised: a handful of version strings recur per request. */
const ordinals = new Map<string, number>();
function ordinal(v: string): number {
  let n = ordinals.get(v);
  if (n === undefined) {
    const [major = 0, minor = 0] = v.split('.').map(Number);
    n = major * 2 ** 32 + Math.min(minor, 2 ** 32 - 1);
    if (ordinals.size < 1024) ordinals.set(v, n);
  }
  return n;
}

export function compareVersions(a: string, b: string): number {
  return ordinal(a) - ordinal(b);
}

export function versionAtLeast(version: string, min: string): boolean {
  return compareVersions(version, min) >= 0;
}

export function versionBefore(version: string, bound: string): boolean {
  return compareVersions(version, bound) < 0;
}

/**
 * Compare dotted versions segment by segment (`1.41.0` = `1.41`, `2` > `1.44`), as dockerd's
 * versions.compare does for the version in a request's path.
 */
export function compareDotted(a: string, b: string): number {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (Number(x[i]) || 0) - (Number(y[i]) || 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The `major.minor` the gates compare (`1.41.0` -> `1.41`). */
export function majorMinor(v: string): string {
  const [major = '0', minor = '0'] = v.split('.');
  return `${Number(major) || 0}.${Number(minor) || 0}`;
}

/**
 * Field and behaviour gates by version, named for what they decide. Add a gate here rather than
 * comparing versions in a handler.
 */
export const gates = {
  /** Container list/inspect: status `removing`; HostConfig.AutoRemove, Mounts, Init, etc. */
  removingState: '1.25',
  /** Image inspect: RootFS.BaseLayer dropped, OsVersion added. */
  imageOsVersion: '1.25',
  /** Stats: cpu_stats.online_cpus. */
  onlineCpus: '1.27',
  /** attach/ws: binary frames from 1.28, text frames before. */
  attachWsBinary: '1.28',
  /** Wait: `condition` parameter. */
  waitCondition: '1.30',
  /** Image create: `platform`. */
  imagePlatform: '1.32',
  /** Build: the `platform` parameter (ignored before). */
  buildPlatform: '1.32',
  /** Logs `until`; exec WorkingDir; /version Platform/Components. */
  logsUntil: '1.35',
  /** Events: exec_die. */
  execDie: '1.36',
  /** Container create defaults HostConfig.IpcMode to private. */
  ipcPrivateDefault: '1.40',
  /** Image list/inspect: VirtualSize omitted from this version on. */
  imageVirtualSizeOmitted: '1.44',
  /** Image list: singular `filter` parameter removed. */
  imagesNoSingularFilter: '1.41',
  /** HostConfig.CgroupnsMode; /info CgroupVersion. */
  cgroupns: '1.41',
  /** Image inspect drops Container/ContainerConfig fields... kept until 1.44 (removed in 1.45). */
  imageContainerConfig: '1.45',
  /** Container create: MacAddress on endpoint settings; healthcheck StartInterval. */
  endpointMacAddress: '1.44',
  /** Container create: `platform` query. */
  containerCreatePlatform: '1.41',
  /** Wait: an unknown `condition` is a 400 (ignored before). */
  waitConditionChecked: '1.42',
  /** Stop/restart `signal`; KernelMemory ignored at create and omitted from inspect when unset. */
  stopSignalParam: '1.42',
  kernelMemoryOmitted: '1.42',
  /** Image list: `shared-size` fills SharedSize. */
  imageListSharedSize: '1.42',
  /** attach/logs: Content-Type application/vnd.docker.multiplexed-stream for framed streams. */
  multiplexedStreamType: '1.42',
  /** attach/ws honours stdin/stdout/stderr (all streams before). */
  attachWsStreams: '1.42',
  /** GET /containers/{id}/stats: `one-shot` answers the first sample at once. */
  statsOneShot: '1.41',
  /** GET /system/df: `type` picks the kinds of object reported (all of them before). */
  diskUsageType: '1.42',
  /** HostConfig.Annotations. */
  containerAnnotations: '1.43',
  /** Endpoint settings DNSNames in container inspect/list. */
  endpointDnsNames: '1.44',
  /**
   * Volumes: dockerd 20.10 answers `CreatedAt` and `Options` and reads DELETE's `force` at every
   * version, so they have no gates.
   * POST /volumes/prune removes only anonymous volumes unless the `all` filter says otherwise.
   */
  volumePruneAnonymousOnly: '1.42',
  /** POST /volumes/prune: the `all` filter (before: `Invalid filter 'all'`, as dockerd 20.10). */
  volumePruneAllFilter: '1.42',
  /** Swarm endpoints outside a swarm: 503 from here on (docker 1.13), 406 before (docker 1.12). */
  swarmUnavailable: '1.25',
  /** POST /swarm/init: DefaultAddrPool and SubnetSize (ignored before, as moby does). */
  swarmDefaultAddrPool: '1.39',
  /** POST /swarm/init: DataPathPort (ignored before). */
  swarmDataPathPort: '1.40',
  /** Secrets and configs: `Templating` (create refuses it before, as dockerd; reads drop it). */
  swarmTemplating: '1.37',
  /** Start with a request body (HostConfig) refused from 1.24. */
  startNoBody: '1.24',

  /** Exec create/start: ConsoleSize (dropped before). */
  execConsoleSize: '1.42',
  /** Container update: PidsLimit (ignored before). */
  updatePidsLimit: '1.40',

  // ---- 1.45 (docker 26) ----
  /** Container create: Mounts[].VolumeOptions.Subpath (a 400 before). */
  volumeSubpath: '1.45',
  /** Endpoint Aliases without the container's short ID on user-defined networks (added before). */
  aliasesWithoutShortId: '1.45',

  // ---- 1.46 (docker 27.0) ----
  /** Container list: HostConfig.Annotations (inspect has them from 1.43). */
  listAnnotations: '1.46',
  /** Events: image `create` events (left out of the stream before). */
  imageCreateEvents: '1.46',

  // ---- 1.47 (docker 27.2) ----
  /** Image list: `manifests` (containerd image store only: nothing to list here). */
  imageListManifests: '1.47',
  /** /info: RegistryConfig.AllowNondistributableArtifacts* left out from here on. */
  infoNondistributableOmitted: '1.47',

  // ---- 1.48 (docker 28.0) ----
  /** Container create: Mounts of type `image`; GwPriority on endpoints (zeroed before). */
  imageMounts: '1.48',
  endpointGwPriority: '1.48',
  /** Container create: the warning for VolumeDriver with `volume` Mounts. */
  volumeDriverWarning: '1.48',
  /** Container create: interface sysctls in HostConfig.Sysctls refused (migrated with a warning before). */
  interfaceSysctlsRefused: '1.48',
  /** Image inspect: `manifests`; history: `platform`. */
  imageInspectManifests: '1.48',
  imageHistoryPlatform: '1.48',
  /** Image save and load: `platform` (one). */
  imageArchivePlatform: '1.48',
  /** Build prune: reserved-space, max-used-space, min-free-space (keep-storage before). */
  buildPruneSpace: '1.48',

  // ---- 1.49 (docker 28.1) ----
  /** Image inspect: `platform`. */
  imageInspectPlatform: '1.49',
  /** /info: FirewallBackend; the *Commit.Expected fields left out. */
  infoFirewallBackend: '1.49',

  // ---- 1.50 (docker 28.2, the docker CLI 28's version) ----
  /** Image delete: `platforms`. */
  imageDeletePlatforms: '1.50',
  /** /info: BridgeNfIptables/BridgeNfIp6tables left out. */
  infoBridgeNfOmitted: '1.50',
  /** Image inspect: the legacy Config fields (Hostname, AttachStdin...) left out. */
  imageConfigTrimmed: '1.50',

  // ---- 1.51 (docker 28.3) ----
  /** Image list: Containers is the real count (-1 before). */
  imageListContainers: '1.51',

  // ---- 1.52 (docker 29.0) ----
  /**
   * Container inspect: NetworkSettings is {SandboxID, SandboxKey, Ports, Networks} (the bridge's
   * address fields, Bridge, HairpinMode, LinkLocal* and Secondary* before); Config.OnBuild and
   * the container-wide Config.MacAddress left out; KernelMemoryTCP gone.
   */
  networkSettingsTrimmed: '1.52',
  /** Container list: Health {Status, FailingStreak}. */
  listHealth: '1.52',
  /** Container create: Config.MacAddress ignored (migrated to the endpoint before). */
  containerMacIgnored: '1.52',
  /** Container create: a warning for empty port-binding lists. */
  emptyPortBindingsWarning: '1.52',
  /** Stats: os_type. */
  statsOsType: '1.52',
  /** Events: no legacy status/id/from keys; application/jsonl by default. */
  eventsModern: '1.52',
  /** /system/df: ImageUsage, ContainerUsage, VolumeUsage, BuildCacheUsage and `verbose`. */
  diskUsageSummaries: '1.52',
  /** Image inspect: Parent, Comment, DockerVersion, Author and empty Config fields left out when empty. */
  imageInspectOmitEmpty: '1.52',
  /** Network list: no Containers key; network inspect: Status.IPAM.Subnets. */
  networkStatus: '1.52',
  /** /info: KernelMemoryTCP gone. */
  infoKernelMemoryTcpOmitted: '1.52',

  // ---- 1.54 (docker 29.3) ----
  /** Image list: `identity` (needs manifests=1). Container logs: `format=json` (experimental). */
  imageListIdentity: '1.54',
  logsJsonFormat: '1.54',

  // ---- 1.55 (docker 29.6) ----
  /** Container update: the blkio device limits (ignored before). */
  updateBlkioDevices: '1.55',

  // ---- gates for changes dockerd made at some version without a router check ----
  /**
   * Image list: untagged images without the fake `<none>:<none>` / `<none>@<none>`, and empty
   * RepoTags/RepoDigests as [] (docker 24's router; dockerd 20.10 made the fakes below it).
   */
  imageListNoneTags: '1.43',
  /** Image inspect: Created left out when the image config has none (0001-01-01T00:00:00Z before). */
  imageCreatedOmitEmpty: '1.44',
  /** /info: CDISpecDirs (docker 25; [] without CDI). */
  infoCdiSpecDirs: '1.44',
  /** /info: BridgeNfIptables/BridgeNfIp6tables always false (docker 28.0 stopped reading them). */
  infoBridgeNfFalse: '1.48',
  /** Network list and inspect: EnableIPv4 (docker 28.0; true, berth's networks all have IPv4). */
  networkEnableIPv4: '1.48',
} as const;
