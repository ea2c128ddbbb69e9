import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, readFile, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type FileLock, tryLockFile } from '../common/fs/file-lock.js';
import type { Logger } from '../common/log.js';
import { closeServer, type ListenAddress, parseListenAddress } from '../http/server.js';
import { registerArchiveRoutes } from './api/archive.routes.js';
import { registerBuildRoutes } from './api/build.routes.js';
import { registerContainerRoutes } from './api/containers.routes.js';
import { registerDiskUsageRoutes } from './api/disk-usage.routes.js';
import { registerEventRoutes } from './api/events.routes.js';
import { registerExecRoutes } from './api/exec.routes.js';
import { registerImageRoutes } from './api/images.routes.js';
import { registerNetworkRoutes } from './api/networks.routes.js';
import { createApiRouter, createEngineServer } from './api/server.js';
import { registerStreamRoutes } from './api/streams.routes.js';
import { registerSwarmRoutes } from './api/swarm.routes.js';
import { registerSystemRoutes } from './api/system.routes.js';
import { MAX_API_VERSION, MIN_API_VERSION } from './api/versions.js';
import { registerVolumeRoutes } from './api/volumes.routes.js';
import type { EngineConfig } from './config.js';
import { createContainerService } from './containers/containers.service.js';
import { EventsService } from './events/events.service.js';
import { createImageService, type ImageService } from './images/images.service.js';
import { createNetworkService } from './network/network.service.js';
import { createRuntime } from './runtime/index.js';
import { DiskUsage } from './system/disk-usage.js';
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
  close(): Promise<void>;
}

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

async function listen(server: Server, addr: ListenAddress, log: Logger): Promise<string> {
  if (addr.kind === 'unix') {
    const path = addr.path ?? '';
    await mkdir(join(path, '..'), { recursive: true });
    await rm(path, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
    await chmod(path, 0o660);
    const gid = await groupId('docker');
    if (gid !== undefined) await chown(path, 0, gid).catch(() => undefined);
    log.info('API listening', { address: `unix://${path}` });
    return `unix://${path}`;
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port ?? 2375, addr.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : addr.port;
  const host = addr.host?.includes(':') ? `[${addr.host}]` : addr.host;
  log.info('API listening', { address: `tcp://${host}:${port}` });
  return `tcp://${host}:${port}`;
}

async function groupId(name: string): Promise<number | undefined> {
  try {
    const text = await readFile('/etc/group', 'utf8');
    for (const line of text.split('\n')) {
      const [group, , gid] = line.split(':');
      if (group === name && gid) return Number(gid);
    }
  } catch {
    return undefined;
  }
  return undefined;
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
  const addresses = config.hosts.map(parseListenAddress);
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
      debug: config.logLevel === 'debug',
      insecureRegistries: config.insecureRegistries,
      liveRestore: true,
      apiVersions: { min: MIN_API_VERSION, max: MAX_API_VERSION },
    },
    sources,
    events,
  );
  await system.init();

  const router = createApiRouter();
  registerSystemRoutes(router, system, config.experimental);
  registerEventRoutes(router, events);
  const images = await createImageService({
    dataRoot: config.dataRoot,
    events,
    log: log.child('images'),
    engineVersion: ENGINE_VERSION,
  });
  registerImageRoutes(router, images);
  const volumes = await createVolumeService({ dataRoot: config.dataRoot, events, log: log.child('volumes') });
  registerVolumeRoutes(router, volumes);
  const runtime = await createRuntime({
    name: config.runtime,
    execRoot: config.execRoot,
    dataRoot: config.dataRoot,
    log,
  });
  const network = await createNetworkService({
    dataRoot: config.dataRoot,
    execRoot: config.execRoot,
    bridge: config.bridge === 'none' ? null : config.bridge,
    bip: config.bip,
    events,
    log,
  });
  registerNetworkRoutes(router, network);
  const containers = await createContainerService({
    dataRoot: config.dataRoot,
    execRoot: config.execRoot,
    events,
    images,
    snapshots: images.snapshotter,
    runtime,
    volumes,
    network,
    log,
  });
  registerContainerRoutes(router, containers);
  registerStreamRoutes(router, containers);
  registerArchiveRoutes(router, containers);
  registerExecRoutes(router, containers);
  registerDiskUsageRoutes(router, new DiskUsage({ images, containers, volumes }));
  registerBuildRoutes(router);
  registerSwarmRoutes(router);
  sources.containers = () => containers.counts();
  sources.images = async () => (await images.list()).length;

  await hooks.beforeListen?.({ images });

  const servers: Server[] = [];
  const bound: string[] = [];
  for (const addr of addresses) {
    const server = createEngineServer(router, {
      log: log.child('api'),
      serverHeader: `berth/${ENGINE_VERSION} (linux)`,
      experimental: config.experimental,
    });
    bound.push(await listen(server, addr, log));
    servers.push(server);
  }
  log.info('engine started', { version: ENGINE_VERSION, dataRoot: config.dataRoot, runtime: config.runtime });

  let closed = false;
  return {
    config,
    events,
    system,
    images,
    volumes,
    addresses: bound,
    async close() {
      if (closed) return;
      closed = true;
      // no new requests; those under way finish in the services' own drain
      for (const s of servers) s.close();
      await containers.close();
      await network.close();
      await runtime.close();
      await Promise.all(servers.map((s) => closeServer(s)));
      for (const a of addresses) if (a.kind === 'unix' && a.path) await rm(a.path, { force: true });
      await releaseRoots(locks);
      log.info('engine stopped; containers keep running');
    },
  };
}
