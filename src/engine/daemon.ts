import { execFile } from 'node:child_process';
import { mkdir, readFile, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type FileLock, tryLockFile } from '../common/fs/file-lock.js';
import type { Logger } from '../common/log.js';
import { ConnectionGuard } from '../http/connection-limits.js';
import { installCrashGuard } from '../http/crash-guard.js';
import { closeServer } from '../http/server.js';
import { registerArchiveRoutes } from './api/archive.routes.js';
import { registerBuildRoutes } from './api/build.routes.js';
import { registerCommitRoutes } from './api/commit.routes.js';
import { registerContainerRoutes } from './api/containers.routes.js';
import { registerDiskUsageRoutes } from './api/disk-usage.routes.js';
import { registerDistributionRoutes } from './api/distribution.routes.js';
import { engineErrorBody } from './api/errors.js';
import { registerEventRoutes } from './api/events.routes.js';
import { registerExecRoutes } from './api/exec.routes.js';
import { registerImageRoutes } from './api/images.routes.js';
import { apiWarnings, type FrontDoor, listenOn, prepareFrontDoor } from './api/listen.js';
import { registerNetworkRoutes } from './api/networks.routes.js';
import { registerPushRoutes } from './api/push.routes.js';
import { registerConfigRoutes, registerSecretRoutes } from './api/secrets.routes.js';
import { createApiRouter, createEngineServer } from './api/server.js';
import { registerServiceRoutes } from './api/services.routes.js';
import { registerStreamRoutes } from './api/streams.routes.js';
import { registerSwarmRoutes } from './api/swarm.routes.js';
import { registerSwarmLogRoutes } from './api/swarm-logs.routes.js';
import { registerSystemRoutes } from './api/system.routes.js';
import { registerTaskRoutes } from './api/tasks.routes.js';
import { MAX_API_VERSION, MIN_API_VERSION } from './api/versions.js';
import { registerVolumeRoutes } from './api/volumes.routes.js';
import { Builder } from './build/builder.js';
import { copySupport, receiveBuildContext } from './build/copy-support.js';
import { dockerfileSupport } from './build/dockerfile-support.js';
import { type EngineConfig, parseRuntimeName } from './config.js';
import { createContainerService } from './containers/containers.service.js';
import { RegistryClient } from './distribution/index.js';
import { RegistryService } from './distribution/registry.service.js';
import { EventsService } from './events/events.service.js';
import { createImageService, type ImageService } from './images/images.service.js';
import { ingressLinkSubnet, ingressSandboxPath, NftIngressMesh } from './network/lb/ingress-mesh.js';
import { NftServiceLb } from './network/lb/service-lb.js';
import { createNetworkService } from './network/network.service.js';
import { createOverlayNetworks } from './network/overlay/create.js';
import { createRuntime } from './runtime/index.js';
import { NetworkAttachments } from './swarm/agent/attachments.js';
import { createNodeAgent } from './swarm/agent/create.js';
import { agentLoops } from './swarm/agent/role-loop.js';
import { createSwarmService } from './swarm/create.js';
import { SwarmLogs } from './swarm/logs/swarm-logs.js';
import { kernelHasEsp } from './swarm/networks/kernel-esp.js';
import { localNetworkFacts } from './swarm/networks/local-facts.js';
import { SwarmNetworks } from './swarm/networks/swarm-networks.js';
import { ObjectService } from './swarm/secrets/object.service.js';
import { ServicesService } from './swarm/services/services.service.js';
import { TasksService } from './swarm/tasks/tasks.service.js';
import { DiskUsage } from './system/disk-usage.js';
import { normalizeMirror, userInsecureRegistries } from './system/registry-info.js';
import { ENGINE_VERSION, SystemService, type SystemSources } from './system/system.service.js';
import { createVolumeService, type VolumeService } from './volumes/volumes.service.js';

const run = promisify(execFile);

/** A running engine: its services, and the listeners serving the API. */
export interface Engine {
  config: EngineConfig;
  events: EventsService;
  system: SystemService;
  images: ImageService;
  volumes: VolumeService;
  /** The addresses actually listened on (tcp port 0 resolved). */
  addresses: string[];
  /**
   * Apply a reloaded configuration (SIGHUP): the given parts replace those of `config` in place,
   * so that every service reading `config` at use sees them; publishes the daemon's `reload`.
   */
  reload(parts: Partial<ReloadableConfig>): void;
  close(): Promise<void>;
}

/** What a reload may change, as dockerd reloads them. */
export type ReloadableConfig = Pick<
  EngineConfig,
  'logLevel' | 'insecureRegistries' | 'registryMirrors' | 'maxConcurrentDownloads' | 'maxConcurrentUploads'
>;

/** Version and commit of a runtime binary, from `<runtime> --version`. */
async function runtimeVersion(path: string): Promise<{ version: string; commit: string }> {
  try {
    const { stdout } = await run(path, ['--version']);
    const version = /version\s+(\S+)/.exec(stdout)?.[1] ?? '';
    const commit = /commit:\s*(\S+)/.exec(stdout)?.[1] ?? '';
    return { version, commit };
  } catch {
    return { version: '', commit: '' };
  }
}

/**
 * One engine per exec root and per data root: an flock on `<exec-root>/berth.pid` (which names
 * the holder's pid, for people and scripts) and on `<data-root>/engine.lock`, held while the
 * engine runs. The kernel drops them when the engine ends however it ends: an engine killed with
 * SIGKILL blocks nothing (a zombie too), and neither does a pid file naming another process.
 */
async function claimRoots(config: EngineConfig): Promise<FileLock[]> {
  const locks: FileLock[] = [];
  try {
    for (const path of [join(config.execRoot, 'berth.pid'), join(config.dataRoot, 'engine.lock')]) {
      const lock = await tryLockFile(path);
      if (!lock) {
        const pid = (await readFile(path, 'utf8').catch(() => '')).trim();
        throw new Error(`another berth engine${pid ? ` (pid ${pid})` : ''} is running: ${path} is locked`);
      }
      locks.push(lock);
      await lock.write(`${process.pid}\n`);
    }
    return locks;
  } catch (err) {
    await releaseRoots(locks);
    throw err;
  }
}

async function releaseRoots(locks: FileLock[]): Promise<void> {
  for (const lock of [...locks].reverse()) await lock.release();
}

/**
 * One API server per address, each with the connection caps; the unix sockets without TLS, the
 * tcp:// ones with it when configured. From then on, what a request's code throws where nobody
 * catches it ends that request alone (src/http/crash-guard.ts) until the engine closes.
 */
async function openApiListeners(
  router: ReturnType<typeof createApiRouter>,
  config: EngineConfig,
  door: FrontDoor,
  log: Logger,
): Promise<{ servers: Server[]; bound: string[]; releaseCrashGuard: () => void }> {
  const apiLog = log.child('api');
  const servers: Server[] = [];
  const bound: string[] = [];
  for (const addr of door.addresses) {
    const server = createEngineServer(router, {
      log: apiLog,
      serverHeader: `berth/${ENGINE_VERSION} (linux)`,
      experimental: config.experimental,
      guard: new ConnectionGuard(config.limits, engineErrorBody, apiLog),
      ...(addr.kind === 'tcp' && door.tls ? { tls: door.tls } : {}),
    });
    bound.push(await listenOn(server, addr, door, log));
    servers.push(server);
  }
  for (const warning of apiWarnings(bound, config.tls)) log.warn(warning);
  return { servers, bound, releaseCrashGuard: installCrashGuard() };
}

/** The attributes of dockerd's `reload` event, for the options berth has (dockerd's names). */
function reloadAttributes(config: EngineConfig, name: string): Record<string, string> {
  return {
    debug: String(config.logLevel === 'debug'),
    'default-runtime': config.runtime,
    'insecure-registries': JSON.stringify(userInsecureRegistries(config.insecureRegistries)),
    labels: '[]',
    'live-restore': 'true',
    'max-concurrent-downloads': String(config.maxConcurrentDownloads),
    'max-concurrent-uploads': String(config.maxConcurrentUploads),
    name,
    'registry-mirrors': JSON.stringify(config.registryMirrors.map(normalizeMirror)),
  };
}

export interface StartHooks {
  /** Runs once the services are up and before the API listens (e.g. seeding images). */
  beforeListen?: (services: { images: ImageService }) => Promise<void>;
}

export async function startEngine(
  config: EngineConfig,
  log: Logger,
  hooks: StartHooks = {},
): Promise<Engine> {
  // what the listeners need is checked before anything starts (TLS files, group, exposure)
  const door = await prepareFrontDoor(config, log);
  const addresses = door.addresses;
  await mkdir(config.dataRoot, { recursive: true, mode: 0o711 });
  await mkdir(config.execRoot, { recursive: true, mode: 0o700 });
  const locks = await claimRoots(config);

  const events = new EventsService();
  const runtimePaths: Record<string, string> = { runc: 'runc', crun: 'crun' };
  const sources: SystemSources = {
    runtimes: Object.entries(runtimePaths).map(([name, path]) => ({
      name,
      path,
      version: () => runtimeVersion(path),
    })),
    defaultRuntime: config.runtime,
    // every container gets Docker's default seccomp profile unless its SecurityOpt says otherwise
    securityOptions: () => ['name=seccomp,profile=default'],
  };
  const system = new SystemService(
    {
      dataRoot: config.dataRoot,
      experimental: config.experimental,
      // read at each /info: a reload (SIGHUP) may change the log level
      get debug() {
        return config.logLevel === 'debug';
      },
      registries: () => config,
      liveRestore: true,
      apiVersions: { min: MIN_API_VERSION, max: MAX_API_VERSION },
    },
    sources,
    events,
  );
  await system.init();
  const swarm = createSwarmService(config, events, log.child('swarm'));
  await swarm.start();
  sources.swarm = () => swarm.info();

  const router = createApiRouter();
  registerSystemRoutes(router, system, config.experimental, () => swarm.pingState());
  registerEventRoutes(router, events);
  // the registry client every pull (and push) goes through: keep-alive connections, tokens, pings
  const registry = new RegistryClient({
    insecureRegistries: config.insecureRegistries,
    mirrors: config.registryMirrors,
    certsDirs: config.registryCertsDirs,
    userAgent: `berth/${ENGINE_VERSION}`,
  });
  const images = await createImageService({
    dataRoot: config.dataRoot,
    events,
    log: log.child('images'),
    engineVersion: ENGINE_VERSION,
    registry,
    // read at each pull and push: a reload (SIGHUP) may change them
    maxConcurrentDownloads: () => config.maxConcurrentDownloads,
    maxConcurrentUploads: () => config.maxConcurrentUploads,
  });
  registerImageRoutes(router, images);
  registerPushRoutes(router, images);
  registerDistributionRoutes(
    router,
    new RegistryService(registry, () => ({
      mirrors: config.registryMirrors,
      insecureRegistries: config.insecureRegistries,
    })),
  );
  const volumes = await createVolumeService({ dataRoot: config.dataRoot, events, log: log.child('volumes') });
  registerVolumeRoutes(router, volumes);
  const runtime = await createRuntime({
    ...(config.runtime === 'auto' ? {} : { name: config.runtime }),
    execRoot: config.execRoot,
    dataRoot: config.dataRoot,
    log,
  });
  // `auto` is what this host allows: crun, else runc
  if (config.runtime === 'auto') config.runtime = parseRuntimeName(runtime.name);
  sources.defaultRuntime = runtime.name;
  const network = await createNetworkService({
    dataRoot: config.dataRoot,
    execRoot: config.execRoot,
    bridge: config.bridge === 'none' ? null : config.bridge,
    bip: config.bip,
    hostGatewayIp: config.hostGatewayIp,
    events,
    log,
  });
  // the node's overlay data plane: the agent plugs tasks in, a worker's network listing reads it;
  // plain containers on attachable swarm networks are plugged in the same way (agent/attachments.ts)
  const overlay = createOverlayNetworks({
    execRoot: config.execRoot,
    gwBridge: config.swarmGatewayBridge,
    log,
  });
  // (a VIP table per sandbox: the tasks' load balancer and this one never share one)
  const attachments = new NetworkAttachments({
    overlay,
    lb: new NftServiceLb(),
    log: log.child('attachments'),
    // restart-policy containers on swarm networks start before the agent: they wait for it
    member: () => swarm.pingState() !== 'inactive',
  });
  const containers = await createContainerService({
    dataRoot: config.dataRoot,
    execRoot: config.execRoot,
    events,
    images,
    committer: images,
    snapshots: images.snapshotter,
    runtime,
    volumes,
    network,
    swarmNetworks: attachments,
    log,
    copyUploadLimit: config.copyUploadLimit,
  });
  registerContainerRoutes(router, containers);
  registerNetworkRoutes(
    router,
    network,
    containers,
    new SwarmNetworks({
      swarm,
      log: log.child('swarm-networks'),
      esp: kernelHasEsp,
      local: () => overlay.networks(),
      localFacts: async (id) => {
        const facts = overlay.localFacts(id);
        return facts
          ? localNetworkFacts(id, facts, (c) => containers.inspect(c).catch(() => undefined))
          : undefined;
      },
    }),
  );
  registerCommitRoutes(router, containers);
  registerStreamRoutes(router, containers);
  registerArchiveRoutes(router, containers);
  registerExecRoutes(router, containers);
  const builder = new Builder({
    dataRoot: config.dataRoot,
    images,
    containers,
    dockerfile: dockerfileSupport,
    copy: copySupport,
    receiveContext: receiveBuildContext,
    experimental: config.experimental,
    log: log.child('build'),
  });
  await builder.init();
  registerDiskUsageRoutes(router, new DiskUsage({ images, containers, volumes, buildCache: builder }));
  registerBuildRoutes(router, builder);
  registerSwarmRoutes(router, swarm);
  await swarm.addLoops(
    agentLoops(
      createNodeAgent({
        dataRoot: config.dataRoot,
        execRoot: config.execRoot,
        containers,
        images: { resolve: (ref) => images.resolve(ref), pull: (o) => images.pull(o) },
        attachments,
        log: log.child('agent'),
        overlay,
        lb: new NftServiceLb(),
        events,
        ingress: new NftIngressMesh({
          sandboxPath: ingressSandboxPath(config.execRoot),
          hostLink: config.swarmIngressLink,
          linkSubnet: ingressLinkSubnet(config.swarmIngressLink),
          log,
        }),
      }),
    ),
  );
  registerSecretRoutes(router, new ObjectService('secret', { swarm, log: log.child('secrets') }));
  registerConfigRoutes(router, new ObjectService('config', { swarm, log: log.child('configs') }));
  const localNetworks = {
    find: (ref: string) => {
      if (!ref) return undefined;
      try {
        return { name: String(network.inspect(ref).Name) };
      } catch {
        return undefined;
      }
    },
  };
  registerServiceRoutes(
    router,
    new ServicesService({ swarm, networks: localNetworks, log: log.child('services') }),
  );
  const tasks = new TasksService({ swarm, log: log.child('tasks') });
  registerTaskRoutes(router, tasks);
  registerSwarmLogRoutes(
    router,
    new SwarmLogs({ tasks, broker: () => swarm.logBroker(), log: log.child('swarm-logs') }),
  );
  sources.containers = () => containers.counts();
  sources.images = async () => (await images.list()).length;

  await hooks.beforeListen?.({ images });

  const { servers, bound, releaseCrashGuard } = await openApiListeners(router, config, door, log);
  sources.warnings = () => apiWarnings(bound, config.tls);
  log.info('engine started', { version: ENGINE_VERSION, dataRoot: config.dataRoot, runtime: config.runtime });

  let closed = false;
  return {
    config,
    events,
    system,
    images,
    volumes,
    addresses: bound,
    reload(parts) {
      Object.assign(config, parts);
      if (parts.insecureRegistries || parts.registryMirrors) {
        registry.reconfigure({
          insecureRegistries: config.insecureRegistries,
          mirrors: config.registryMirrors,
        });
      }
      events.publish('daemon', 'reload', system.id, reloadAttributes(config, system.name));
      log.info('configuration reloaded', { ...parts });
    },
    async close() {
      if (closed) return;
      closed = true;
      // no new requests; those under way finish in the services' own drain
      for (const s of servers) s.close();
      await swarm.close();
      await containers.close();
      await network.close();
      await runtime.close();
      await Promise.all(servers.map((s) => closeServer(s)));
      registry.close();
      releaseCrashGuard();
      for (const a of addresses) if (a.kind === 'unix' && a.path) await rm(a.path, { force: true });
      await releaseRoots(locks);
      log.info('engine stopped; containers keep running');
    },
  };
}
