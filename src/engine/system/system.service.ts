import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/fs/atomic.js';
import { rfc3339Nano } from '../../common/time.js';
import { BERTH_VERSION } from '../../common/version.js';
import type { ContainerCounts } from '../containers/service.types.js';
import type { EventsService } from '../events/events.service.js';
import { inactiveSwarmInfo, type SwarmInfo } from '../swarm/swarm.types.js';
import { backingFilesystem, type HostFacts, openFileDescriptors, readHostFacts } from './host.js';
import { INDEX_SERVER_ADDRESS, registryInfo } from './registry-info.js';

export const ENGINE_VERSION = BERTH_VERSION;

/** What the system service reads from the other services; each is optional until wired. */
export interface SystemSources {
  containers?: () => ContainerCounts;
  images?: () => Promise<number>;
  runtimes: Array<{
    name: string;
    path: string;
    version: () => Promise<{ version: string; commit: string }>;
  }>;
  defaultRuntime: string;
  securityOptions?: () => string[];
  /** Warnings of the other parts for /info (the API listeners': plain tcp://, TLS without verification). */
  warnings?: () => string[];
  /** /info's Swarm (the swarm service's); absent: not in a swarm. */
  swarm?: () => Promise<SwarmInfo>;
}

export interface SystemConfig {
  dataRoot: string;
  experimental: boolean;
  debug: boolean;
  /** The registries now (read at each /info: a reload may change them). */
  registries: () => { insecureRegistries: readonly string[]; registryMirrors: readonly string[] };
  liveRestore: boolean;
  /** The API versions the engine serves (the API layer's range), for /version. */
  apiVersions: { min: string; max: string };
}

/** /info and /version: true figures from the host and the other services. */
export class SystemService {
  private hostFacts?: HostFacts;
  private engineId = '';

  constructor(
    private readonly config: SystemConfig,
    private readonly sources: SystemSources,
    private readonly events: EventsService,
  ) {}

  async init(): Promise<void> {
    this.hostFacts = await readHostFacts();
    this.engineId = await loadOrCreateEngineId(join(this.config.dataRoot, 'engine-id'));
  }

  get id(): string {
    return this.engineId;
  }

  /** The host's name (/info's Name). */
  get name(): string {
    return this.facts().hostname;
  }

  private facts(): HostFacts {
    if (!this.hostFacts) throw new Error('system service not initialised');
    return this.hostFacts;
  }

  async version(): Promise<Record<string, unknown>> {
    const f = this.facts();
    const arch = goArch(f.architecture);
    const components: Array<Record<string, unknown>> = [
      {
        Name: 'Engine',
        Version: ENGINE_VERSION,
        Details: {
          ApiVersion: this.config.apiVersions.max,
          Arch: arch,
          BuildTime: '',
          Experimental: String(this.config.experimental),
          GitCommit: '',
          GoVersion: `node${process.versions.node}`,
          KernelVersion: f.kernelVersion,
          MinAPIVersion: this.config.apiVersions.min,
          Os: 'linux',
        },
      },
    ];
    for (const rt of this.sources.runtimes) {
      const v = await rt.version();
      components.push({ Name: rt.name, Version: v.version, Details: { GitCommit: v.commit } });
    }
    return {
      Platform: { Name: 'berth' },
      Components: components,
      Version: ENGINE_VERSION,
      ApiVersion: this.config.apiVersions.max,
      MinAPIVersion: this.config.apiVersions.min,
      GitCommit: '',
      GoVersion: `node${process.versions.node}`,
      Os: 'linux',
      Arch: arch,
      KernelVersion: f.kernelVersion,
    };
  }

  /**
   * Every field /info has at some API version, in dockerd's order, with true values (the API
   * layer leaves out what the request's version does not have).
   */
  async info(): Promise<Record<string, unknown>> {
    const f = this.facts();
    const registries = this.config.registries();
    const counts = this.sources.containers?.() ?? { total: 0, running: 0, paused: 0, stopped: 0 };
    const images = (await this.sources.images?.()) ?? 0;
    const runtimes: Record<string, { path: string }> = {};
    let runcCommit = '';
    for (const rt of this.sources.runtimes) {
      runtimes[rt.name] = { path: rt.path };
      if (rt.name === this.sources.defaultRuntime) runcCommit = (await rt.version()).commit;
    }
    return {
      ID: this.engineId,
      Containers: counts.total,
      ContainersRunning: counts.running,
      ContainersPaused: counts.paused,
      ContainersStopped: counts.stopped,
      Images: images,
      Driver: 'overlay2',
      DriverStatus: [
        ['Backing Filesystem', await backingFilesystem(this.config.dataRoot)],
        ['Supports d_type', 'true'],
        ['Native Overlay Diff', 'true'],
        ['userxattr', 'false'],
      ],
      Plugins: {
        Volume: ['local'],
        Network: ['bridge', 'host', 'null'],
        Authorization: null,
        Log: ['json-file', 'local'],
      },
      MemoryLimit: f.cgroup.memoryLimit,
      SwapLimit: f.cgroup.swapLimit,
      KernelMemory: f.cgroup.kernelMemory,
      KernelMemoryTCP: f.cgroup.kernelMemoryTcp,
      CpuCfsPeriod: f.cgroup.cpuCfsPeriod,
      CpuCfsQuota: f.cgroup.cpuCfsQuota,
      CPUShares: f.cgroup.cpuShares,
      CPUSet: f.cgroup.cpuSet,
      PidsLimit: f.cgroup.pidsLimit,
      IPv4Forwarding: f.ipv4Forwarding,
      BridgeNfIptables: f.bridgeNfIptables,
      BridgeNfIp6tables: f.bridgeNfIp6tables,
      Debug: this.config.debug,
      NFd: await openFileDescriptors(),
      OomKillDisable: f.cgroup.oomKillDisable,
      NGoroutines: process.getActiveResourcesInfo().length,
      SystemTime: rfc3339Nano(),
      LoggingDriver: 'json-file',
      CgroupDriver: 'cgroupfs',
      CgroupVersion: f.cgroupVersion,
      NEventsListener: this.events.listenerCount(),
      KernelVersion: f.kernelVersion,
      OperatingSystem: f.operatingSystem,
      OSVersion: f.osVersion,
      OSType: 'linux',
      Architecture: f.architecture,
      IndexServerAddress: INDEX_SERVER_ADDRESS,
      RegistryConfig: registryInfo(registries.insecureRegistries, registries.registryMirrors),
      NCPU: f.ncpu,
      MemTotal: f.memTotal,
      GenericResources: null,
      DockerRootDir: this.config.dataRoot,
      HttpProxy: process.env.HTTP_PROXY ?? process.env.http_proxy ?? '',
      HttpsProxy: process.env.HTTPS_PROXY ?? process.env.https_proxy ?? '',
      NoProxy: process.env.NO_PROXY ?? process.env.no_proxy ?? '',
      Name: f.hostname,
      Labels: [],
      ExperimentalBuild: this.config.experimental,
      ServerVersion: ENGINE_VERSION,
      Runtimes: runtimes,
      DefaultRuntime: this.sources.defaultRuntime,
      Swarm: (await this.sources.swarm?.()) ?? inactiveSwarmInfo(),
      LiveRestoreEnabled: this.config.liveRestore,
      Isolation: '',
      InitBinary: 'docker-init',
      ContainerdCommit: { ID: '', Expected: '' },
      RuncCommit: { ID: runcCommit, Expected: runcCommit },
      InitCommit: { ID: '', Expected: '' },
      SecurityOptions: this.sources.securityOptions?.() ?? [],
      // the bridge's rules are iptables' (no nftables, no firewalld, no userland proxy)
      FirewallBackend: { Driver: 'iptables' },
      // no CDI devices: dockerd's empty list
      CDISpecDirs: [],
      Warnings: nullWhenEmpty([
        ...(this.sources.warnings?.() ?? []),
        ...(f.ipv4Forwarding ? [] : ['WARNING: IPv4 forwarding is disabled']),
      ]),
    };
  }
}

function nullWhenEmpty(list: string[]): string[] | null {
  return list.length > 0 ? list : null;
}

function goArch(machine: string): string {
  return machine === 'x86_64' ? 'amd64' : machine === 'aarch64' ? 'arm64' : machine;
}

/** dockerd's engine ID: 12 groups of 4 base32 characters, made once and kept in the data root. */
async function loadOrCreateEngineId(path: string): Promise<string> {
  try {
    const id = (await readFile(path, 'utf8')).trim();
    if (id) return id;
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
  }
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const bytes = randomBytes(48);
  let raw = '';
  for (const b of bytes) raw += alphabet[b % 32];
  const id = raw.match(/.{4}/g)?.join(':') ?? raw;
  await writeFileAtomic(path, `${id}\n`);
  return id;
}
