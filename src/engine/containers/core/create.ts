import { hostname as osHostname } from 'node:os';
import { join } from 'node:path';
import type { ContainerConfig, HostConfig, ImageConfigFile } from '../../../common/docker-types.js';
import { invalidParameter, notFound } from '../../../common/errors.js';
import { randomId } from '../../../common/ids.js';
import { rfc3339Nano } from '../../../common/time.js';
import type { ImageRecord, ImageResolver } from '../../images/images.types.js';
import { defaultMaskedPaths, defaultReadonlyPaths, defaultShmSize } from '../../runtime/index.js';
import { Container, emptyState } from './container.js';
import type { ContainerEvents } from './events.js';
import { CONTAINER_INIT } from './init-layer.js';
import { normalizeName } from './names.js';
import type { ContainerSnapshots, LinkTarget, MountsPort, NetworkPort } from './ports.js';
import type { ContainerRecord, MountPoint, NetworkingConfig } from './record.types.js';
import type { ContainerSet } from './set.js';
import type { ContainerStore } from './store.js';
import { KNOWN_RUNTIMES, validateConfig, validateHostConfig, validateNetworkingConfig } from './validate.js';

/** What the API layer passes to create. */
export interface CreateRequest {
  name?: string;
  platform?: string;
  config: ContainerConfig & { HostConfig?: HostConfig; NetworkingConfig?: NetworkingConfig };
  hostConfig: HostConfig;
  networkingConfig: NetworkingConfig;
  /** What the request's API version decides (the API layer works it out). */
  options: CreateOptions;
}

/** Create behaviour that depends on the client's API version, as plain choices. */
export interface CreateOptions {
  /** HostConfig.IpcMode when none is given: `private` (API 1.40+) or `shareable` before. */
  defaultIpcMode: 'private' | 'shareable';
  /** Whether HostConfig.KernelMemory is taken (before API 1.42; dropped from then on). */
  kernelMemory: boolean;
  /**
   * Read-only binds are read-only at their top only, their submounts writable (before API 1.44);
   * recursively read-only otherwise (BindOptions.ReadOnlyNonRecursive chooses per Mount).
   */
  readOnlyNonRecursive: boolean;
  /** NetworkMode `default` (or none) is recorded as `bridge` when the engine has one (API 1.45, dockerd 26). */
  defaultNetworkIsBridge: boolean;
}

export interface CreateResult {
  Id: string;
  Warnings: string[];
}

export interface CreateDeps {
  set: ContainerSet;
  store: ContainerStore;
  events: ContainerEvents;
  images: ImageResolver;
  snapshots: ContainerSnapshots;
  /** The engine's default runtime (HostConfig.Runtime when none is given). */
  runtimeName: string;
  net: Pick<NetworkPort, 'checkCreate' | 'keptLinks' | 'registerLinks' | 'defaultNetworkMode'>;
  mounts: Pick<MountsPort, 'resolve' | 'abandon'>;
}

function envKey(e: string): string {
  const i = e.indexOf('=');
  return i < 0 ? e : e.slice(0, i);
}

/** Merge the image's config into the container's, as dockerd does at create. */
export function mergeImageConfig(user: ContainerConfig, image: ContainerConfig | undefined): ContainerConfig {
  const out: ContainerConfig = { ...user };
  if (!image) return out;
  if (!out.User) out.User = image.User ?? '';
  if (image.ExposedPorts) out.ExposedPorts = { ...image.ExposedPorts, ...(out.ExposedPorts ?? {}) };
  if (!out.Env || out.Env.length === 0) out.Env = image.Env ? [...image.Env] : out.Env;
  else {
    const keys = new Set(out.Env.map(envKey));
    for (const e of image.Env ?? []) if (!keys.has(envKey(e))) out.Env.push(e);
  }
  if (image.Labels) out.Labels = { ...image.Labels, ...(out.Labels ?? {}) };
  if (!out.Entrypoint || out.Entrypoint.length === 0) {
    if (!out.Cmd || out.Cmd.length === 0) {
      out.Cmd = image.Cmd ?? out.Cmd;
      if (image.ArgsEscaped) out.ArgsEscaped = image.ArgsEscaped;
    }
    if (out.Entrypoint === undefined || out.Entrypoint === null) out.Entrypoint = image.Entrypoint ?? null;
  }
  if (!out.Healthcheck) {
    if (image.Healthcheck) out.Healthcheck = { ...image.Healthcheck };
  } else if (image.Healthcheck) {
    const hc = { ...out.Healthcheck };
    if (!hc.Test || hc.Test.length === 0) hc.Test = image.Healthcheck.Test;
    if (!hc.Interval) hc.Interval = image.Healthcheck.Interval;
    if (!hc.Timeout) hc.Timeout = image.Healthcheck.Timeout;
    if (!hc.StartPeriod) hc.StartPeriod = image.Healthcheck.StartPeriod;
    if (!hc.Retries) hc.Retries = image.Healthcheck.Retries;
    out.Healthcheck = hc;
  }
  if (!out.WorkingDir) out.WorkingDir = image.WorkingDir ?? '';
  if (image.Volumes) out.Volumes = { ...image.Volumes, ...(out.Volumes ?? {}) };
  if (!out.StopSignal && image.StopSignal) out.StopSignal = image.StopSignal;
  if (!out.Shell && image.Shell) out.Shell = image.Shell;
  if (image.OnBuild && !out.OnBuild) out.OnBuild = null;
  return out;
}

/** Path and Args of the process: entrypoint then cmd (`--entrypoint ""` clears the entrypoint). */
export function entrypointAndArgs(config: ContainerConfig): { path: string; args: string[] } {
  let entrypoint = config.Entrypoint ?? [];
  if (entrypoint.length === 1 && entrypoint[0] === '') entrypoint = [];
  const cmd = config.Cmd ?? [];
  const all = [...entrypoint, ...cmd];
  if (all.length === 0) throw invalidParameter('No command specified');
  return { path: all[0] ?? '', args: all.slice(1) };
}

function checkPlatform(
  platform: string | undefined,
  image: ImageConfigFile,
  ref: string,
  warnings: string[],
): void {
  const host = {
    os: 'linux',
    arch: process.arch === 'x64' ? 'amd64' : process.arch === 'arm64' ? 'arm64' : process.arch,
  };
  const actual = `${image.os}/${image.architecture}${image.variant ? `/${image.variant}` : ''}`;
  if (!platform) {
    if (image.os !== host.os || image.architecture !== host.arch) {
      warnings.push(
        `The requested image's platform (${actual}) does not match the detected host platform (${host.os}/${host.arch}) and no specific platform was requested`,
      );
    }
    return;
  }
  const parts = platform.toLowerCase().split('/');
  if (parts.length > 3 || !parts[0]) throw invalidParameter(`invalid platform: ${platform}`);
  const [os, arch, variant] = parts;
  const normArch = arch === 'x86_64' || arch === 'x86-64' ? 'amd64' : arch === 'aarch64' ? 'arm64' : arch;
  if (
    os !== image.os ||
    (normArch && normArch !== image.architecture) ||
    (variant && variant !== image.variant)
  ) {
    throw notFound(
      `image with reference ${ref} was found but does not match the specified platform: wanted ${platform}, actual: ${actual}`,
    );
  }
}

/** dockerd's adaptContainerSettings and the defaults inspect shows. */
function normalizeHostConfig(hc: HostConfig, o: CreateOptions, runtimeName: string): HostConfig {
  const out: HostConfig = { ...hc };
  // By default, MemorySwap is twice Memory (dockerd stores it so)
  // twice Memory, as dockerd; where that leaves int64 (a Memory of 2^62 or more), unlimited
  if ((out.Memory ?? 0) > 0 && !out.MemorySwap) {
    const twice = BigInt(out.Memory ?? 0) * 2n;
    out.MemorySwap = twice > 2n ** 63n - 1n ? -1 : Number(twice);
  }
  if (!out.NetworkMode) out.NetworkMode = 'default';
  if (!out.LogConfig?.Type) out.LogConfig = { Type: 'json-file', Config: out.LogConfig?.Config ?? {} };
  if (!out.LogConfig.Config) out.LogConfig = { ...out.LogConfig, Config: {} };
  if (!out.RestartPolicy?.Name)
    out.RestartPolicy = { Name: 'no', MaximumRetryCount: out.RestartPolicy?.MaximumRetryCount ?? 0 };
  if (!out.ShmSize) out.ShmSize = defaultShmSize;
  if (!out.IpcMode) out.IpcMode = o.defaultIpcMode;
  if (!out.CgroupnsMode) out.CgroupnsMode = 'host';
  if (!out.Runtime) out.Runtime = runtimeName;
  if (!o.kernelMemory) delete out.KernelMemory;
  if (!out.Privileged) {
    if (!out.MaskedPaths) out.MaskedPaths = [...defaultMaskedPaths];
    if (!out.ReadonlyPaths) out.ReadonlyPaths = [...defaultReadonlyPaths];
  }
  if (out.Dns === undefined || out.Dns === null) out.Dns = [];
  if (out.DnsOptions === undefined || out.DnsOptions === null) out.DnsOptions = [];
  if (out.DnsSearch === undefined || out.DnsSearch === null) out.DnsSearch = [];
  if (!out.ConsoleSize) out.ConsoleSize = [0, 0];
  // As dockerd: -1 swappiness and a non-positive pids limit mean "unset".
  if (out.MemorySwappiness === -1) out.MemorySwappiness = null;
  if (out.PidsLimit !== undefined && out.PidsLimit !== null && out.PidsLimit <= 0) out.PidsLimit = null;
  if (out.OomKillDisable === undefined || out.OomKillDisable === null) out.OomKillDisable = false;
  return out;
}

/**
 * Checks that need other containers or services: `container:` modes, the network mode and links
 * (the network room's), volumes (the mounts room's, later). `container:<name|id>` modes are stored
 * with the full ID (dockerd's adaptSharedNamespaceContainer), so that renaming the other container
 * breaks nothing. What create refers to must exist. A missing one is a 400, not a 404: the docker CLI takes any
 * 404 from create for a missing image and goes to pull it (dockerd creates such a container and
 * fails its start with the 404; berth refuses at once, with the same words).
 */
function checkReferences(d: CreateDeps, hc: HostConfig, nc: NetworkingConfig): LinkTarget[] {
  if (hc.VolumesFrom !== undefined && hc.VolumesFrom !== null && !Array.isArray(hc.VolumesFrom)) {
    throw invalidParameter('VolumesFrom must be an array of strings');
  }
  for (const ref of hc.VolumesFrom ?? [])
    if (typeof ref !== 'string') throw invalidParameter('VolumesFrom must be an array of strings');
  for (const field of ['NetworkMode', 'PidMode', 'IpcMode'] as const) {
    const v = hc[field] ?? '';
    if (v.startsWith('container:'))
      hc[field] = `container:${d.set.resolveForCreate(v.slice('container:'.length))}`;
  }
  return d.net.checkCreate(hc, nc);
}

export async function createContainer(d: CreateDeps, req: CreateRequest): Promise<CreateResult> {
  const { config: body } = req;
  const hcIn: HostConfig = { ...(req.hostConfig ?? {}) };
  // a legacy body's HostConfig and NetworkingConfig are not part of the container's Config
  const { HostConfig: _hc, NetworkingConfig: _nc, ...user }: typeof body = body;
  if (req.options.defaultNetworkIsBridge && (!hcIn.NetworkMode || hcIn.NetworkMode === 'default')) {
    // dockerd 26+: the OS's default network by its name, its endpoint settings under that name
    const mode = d.net.defaultNetworkMode();
    hcIn.NetworkMode = mode;
    const eps = req.networkingConfig?.EndpointsConfig;
    if (mode !== 'default' && eps?.default) {
      eps[mode] ??= eps.default;
      delete eps.default;
    }
  }
  if (typeof user.Image !== 'string' || user.Image === '') {
    throw invalidParameter('config cannot be empty in order to create a container: no image specified');
  }
  const name = req.name ? normalizeName(req.name) : undefined;
  validateConfig(user);
  const warnings = validateHostConfig(hcIn, user, {
    kernelMemory: req.options.kernelMemory,
    runtimes: [...new Set([...KNOWN_RUNTIMES, d.runtimeName])],
  });
  validateNetworkingConfig(req.networkingConfig ?? {});
  const links = checkReferences(d, hcIn, req.networkingConfig ?? {});
  if (name && d.set.names.nameTaken(name)) d.set.names.reserve(name, ''); // throws the 409 message

  const id = randomId();
  const image: ImageRecord = await d.images.resolve(user.Image);
  // from here until the container is registered, an image removal sees this create using it
  d.set.creating.set(id, image.id);
  try {
    return await createFromImage(d, req, { id, image, user, hcIn, name, links, warnings });
  } finally {
    d.set.creating.delete(id);
  }
}

/** The part of create after the image is known (see createContainer). */
async function createFromImage(
  d: CreateDeps,
  req: CreateRequest,
  o: {
    id: string;
    image: ImageRecord;
    user: ContainerConfig;
    hcIn: HostConfig;
    name?: string;
    links: LinkTarget[];
    warnings: string[];
  },
): Promise<CreateResult> {
  const { id, image, user, hcIn, name, links, warnings } = o;
  checkPlatform(req.platform, image.config, user.Image ?? '', warnings);
  const config = mergeImageConfig(user, image.config.config);
  const { path, args } = entrypointAndArgs(config);

  const hostConfig = normalizeHostConfig(hcIn, req.options, d.runtimeName);
  // dockerd: the host's name with the host's network, else the short ID (also with another
  // container's network: that one's hostname replaces it at every start)
  if (!config.Hostname) config.Hostname = hostConfig.NetworkMode === 'host' ? osHostname() : id.slice(0, 12);
  const finalName = name ?? d.set.names.freshName();
  d.set.names.reserve(finalName, id);
  let mountPoints: MountPoint[];
  try {
    mountPoints = await d.mounts.resolve(id, hostConfig, config);
  } catch (err) {
    d.set.names.release(finalName);
    throw err;
  }
  const dir = d.store.dir(id);
  const record: ContainerRecord = {
    ID: id,
    Created: rfc3339Nano(),
    Path: path,
    Args: args,
    Config: config,
    Image: image.id,
    Name: finalName,
    Driver: 'overlay2',
    Platform: 'linux',
    RestartCount: 0,
    HasBeenStartedBefore: false,
    HasBeenManuallyStopped: false,
    MountLabel: '',
    ProcessLabel: '',
    AppArmorProfile: '',
    State: emptyState(),
    ResolvConfPath: join(dir, 'resolv.conf'),
    HostnamePath: join(dir, 'hostname'),
    HostsPath: join(dir, 'hosts'),
    LogPath: join(dir, `${id}-json.log`),
    NetworkingConfig: req.networkingConfig ?? {},
    SandboxKey: '',
  };
  if (mountPoints.length > 0) record.MountPoints = mountPoints;
  if (req.options.readOnlyNonRecursive) record.ReadOnlyNonRecursive = true;
  const kept = d.net.keptLinks(finalName, links);
  if (kept.length > 0) record.Links = kept;
  const c = new Container(record, hostConfig);
  try {
    // Record first, then the writable layer: a crash in between leaves a record whose layer the
    // restore prepares again, never a layer nobody owns. The record's is the create's one fsync:
    // the layer's record is not fsynced (it reaches the disk with the page cache's writeback), and
    // a power loss that takes it has the restore prepare the layer again (docs/runtime.md).
    await d.store.persist(c, true);
    await d.snapshots.prepare(id, image.chainId, { init: CONTAINER_INIT, durable: false });
  } catch (err) {
    d.set.names.release(finalName);
    await d.snapshots.remove(id).catch(() => undefined);
    await d.store.remove(id).catch(() => undefined);
    await d.mounts.abandon(id, mountPoints);
    throw err;
  }
  d.set.add(c);
  d.net.registerLinks(c);
  d.events.emit(c, 'create');
  return { Id: id, Warnings: warnings };
}
