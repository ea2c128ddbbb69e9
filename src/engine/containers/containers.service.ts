import { join } from 'node:path';
import { conflict, errorMessage, isKind, notFound } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { KeyedMutex } from '../../common/mutex.js';
import type { EventsService } from '../events/events.service.js';
import type { ImageResolver } from '../images/images.types.js';
import type { ContainerNetworking } from '../network/network.types.js';
import { buildSpec, readLogBatches, readLogs } from '../runtime/index.js';
import type { ExitStatus, Runtime } from '../runtime/runtime.types.js';
import type { VolumeService } from '../volumes/volumes.types.js';
import { hostArchive } from './adapters/archive.adapter.js';
import { hostProcessTable } from './adapters/ps.adapter.js';
import type { ArchiveHost } from './archive/archive.host.js';
import { containerChanges } from './archive/changes.js';
import { archiveContainerPath, type CopyDeps, statContainerPath } from './archive/copy.js';
import { exportContainer } from './archive/export.js';
import { extractToContainer } from './archive/extract.js';
import { UploadSpool } from './archive/spool.js';
import { type CommitRequest, commitContainer, type ImageCommitter } from './core/commit.js';
import type { Container } from './core/container.js';
import { type CreateDeps, createContainer } from './core/create.js';
import { ContainerEvents } from './core/events.js';
import { HealthChecks } from './core/health.js';
import { createLifecycle } from './core/lifecycle.js';
import type { ContainerParts, ContainerSnapshots } from './core/ports.js';
import { pruneContainers } from './core/prune.js';
import { Rootfs } from './core/rootfs.js';
import { ContainerSet } from './core/set.js';
import type { SpecBuilder } from './core/start.js';
import { containerStats } from './core/stats.js';
import { ContainerStore } from './core/store.js';
import { type ProcessTable, runTop } from './core/top.js';
import { updateContainer } from './core/update.js';
import { endpointsOf } from './core/views.js';
import { Execs } from './exec/exec.js';
import { beginAttach, checkAttachable } from './io/attach.js';
import { ContainerLogs } from './io/log-copiers.js';
import {
  checkLogsReadable,
  type LogBatchReader,
  type LogReader,
  readContainerLogBatches,
  readContainerLogRecords,
  readContainerLogs,
  singleBatches,
} from './io/logs.js';
import { StdioHubs } from './io/streams.js';
import { ContainerVolumes } from './mounts/volumes.js';
import { ContainerNetworks } from './net/endpoints.js';
import type { SwarmNetworkPort } from './net/swarm-networks.port.js';
import { ContainerQueries } from './queries.js';
import { restoreContainers } from './restore.js';
import type { ContainerService } from './service.types.js';

export type { ContainerService } from './service.types.js';

/** Functions from the runtime package (injected so unit tests can fake them). */
export interface RuntimeHelpers {
  buildSpec: SpecBuilder;
  readLogs: LogReader;
  /** The batch form of readLogs (the runtime package's readLogBatches); derived when absent. */
  readLogBatches?: LogBatchReader;
}

/** The host calls of the rooms (the real host's by default; unit tests pass fakes). */
export interface ContainerHost {
  processes: ProcessTable;
  archive: ArchiveHost;
}

export interface ContainerServiceOptions {
  dataRoot: string;
  execRoot: string;
  events: EventsService;
  images: ImageResolver;
  /** The image half of docker commit (the image service); absent: POST /commit is refused. */
  committer?: ImageCommitter;
  /** The containers' writable snapshots (the image service's snapshotter). */
  snapshots: ContainerSnapshots;
  runtime: Runtime;
  /** Volumes for `-v name:/dst`, anonymous volumes, Mounts of type volume and VolumesFrom. */
  volumes?: VolumeService;
  /** The default bridge (absent: containers get loopback only, as with `--network none`). */
  network?: ContainerNetworking;
  /** Swarm-scoped networks for plain containers (attachable overlays; absent: none). */
  swarmNetworks?: SwarmNetworkPort;
  log: Logger;
  helpers?: RuntimeHelpers;
  host?: ContainerHost;
  /** The largest archive docker cp may upload, in bytes (413 beyond; default 10 GiB). */
  copyUploadLimit?: number;
}

/** How long an engine stop waits for container operations under way. */
const CLOSE_DRAIN_MS = 15_000;

/**
 * The containers service: builds the core (set, store, state machine) and the rooms around it
 * (io, exec, archive, net, mounts), restores what the last engine left, and answers the API.
 */
export async function createContainerService(opts: ContainerServiceOptions): Promise<ContainerService> {
  const log = opts.log.child('containers');
  const { runtime, snapshots, images } = opts;
  const helpers: RuntimeHelpers = opts.helpers ?? { buildSpec, readLogs, readLogBatches };
  const host = opts.host ?? { processes: hostProcessTable, archive: hostArchive };
  const readBatches = helpers.readLogBatches ?? singleBatches(helpers.readLogs);

  const set = new ContainerSet();
  const store = new ContainerStore(join(opts.dataRoot, 'containers'), log);
  await store.init();
  const events = new ContainerEvents(opts.events);
  const rootfs = new Rootfs(snapshots, opts.execRoot, log);
  const net = new ContainerNetworks({
    set,
    store,
    network: opts.network,
    ...(opts.swarmNetworks ? { swarm: opts.swarmNetworks } : {}),
    log,
  });
  const mounts = new ContainerVolumes({ set, volumes: opts.volumes, images, snapshots, log });
  const stdio = new StdioHubs(events);
  const logs = new ContainerLogs(runtime, log);
  const execs = new Execs({ set, runtime, events, log });
  const parts: ContainerParts = { net, mounts, stdio, logs, execs };
  const health = new HealthChecks({ runtime, events, store });
  const life = createLifecycle({
    set,
    store,
    events,
    rootfs,
    snapshots,
    runtime,
    health,
    parts,
    buildSpec: helpers.buildSpec,
    log,
  });
  const queries = new ContainerQueries({ set, snapshots, images, net, execs });
  const createDeps: CreateDeps = {
    set,
    store,
    events,
    images,
    snapshots,
    runtimeName: runtime.name,
    net,
    mounts,
  };
  // docker cp uploads wait here until complete (dockerd's temp files are under its root too)
  const spool = new UploadSpool(join(opts.dataRoot, 'tmp'), opts.copyUploadLimit, (raw) =>
    host.archive.unpack(raw),
  );
  await spool.sweep();
  const copyDeps: CopyDeps = { rootfs, runtime, events, host: host.archive, spool, writes: new KeyedMutex() };

  const onExit = (id: string, status: ExitStatus) => {
    const c = set.find(id);
    if (!c) return;
    life
      .handleExit(c, status)
      .catch((err) => log.error('exit handling failed', { id, error: errorMessage(err) }));
  };
  runtime.events.on('exit', onExit);

  images.setUsers({
    containersUsing(imageId: string) {
      // the image it runs, or one it mounts (API 1.48 image mounts)
      const uses = (c: Container) =>
        c.record.Image === imageId || (c.record.MountPoints ?? []).some((m) => m.ImageID === imageId);
      const using = [...set.values()].filter(uses).map((c) => ({ id: c.id, running: c.state.Running }));
      for (const [id, image] of set.creating) if (image === imageId) using.push({ id, running: false });
      return using;
    },
  });

  await restoreContainers({ set, store, rootfs, snapshots, images, runtime, life, parts, log });
  opts.network?.setContainerSource(() => {
    const out = [];
    for (const c of set.values()) {
      if (!c.isRunningProcess) continue;
      for (const ep of endpointsOf(c.record)) out.push({ id: c.id, name: c.name.slice(1), endpoint: ep });
    }
    return out;
  });

  const get = (idOrName: string) => set.get(idOrName);

  return {
    async create(req) {
      const result = await createContainer(createDeps, req);
      // GraphDriver paths are fixed from now on: work them out once, here, not on an inspect.
      const c = set.find(result.Id);
      if (c && !c.graphDriverData) await queries.addGraphDriver(c);
      return result;
    },
    list: (o) => queries.list(o),
    inspect: (idOrName, o) => queries.inspect(idOrName, o),
    async start(idOrName) {
      await life.start(get(idOrName), true);
    },
    async stop(idOrName, o) {
      await life.stop(get(idOrName), o ?? {});
    },
    async restart(idOrName, o) {
      await life.restart(get(idOrName), o ?? {});
    },
    async kill(idOrName, signal) {
      let c: ReturnType<typeof get>;
      try {
        c = get(idOrName);
      } catch (err) {
        // dockerd: "Cannot kill container: x: No such container: x"
        if (isKind(err, 'NotFound'))
          throw notFound(`Cannot kill container: ${idOrName}: ${errorMessage(err)}`);
        throw err;
      }
      await life.kill(c, idOrName, signal);
    },
    async wait(idOrName, condition, signal) {
      return life.wait(get(idOrName), condition, signal);
    },
    async remove(idOrName, o) {
      if (o.link) return net.removeLink(idOrName);
      await life.remove(get(idOrName), o);
    },
    async connectNetwork(ref, network, settings) {
      const c = get(ref);
      await c.lock.run(async () => {
        await net.connectNetwork(c, network, settings);
        await store.persist(c);
      });
    },
    async disconnectNetwork(ref, network, force) {
      const c = get(ref);
      await c.lock.run(async () => {
        await net.disconnectNetwork(c, network, force);
        await store.persist(c);
      });
    },
    async rename(idOrName, newName) {
      await life.rename(get(idOrName), newName);
    },
    async pause(idOrName) {
      await life.pause(get(idOrName));
    },
    async unpause(idOrName) {
      await life.unpause(get(idOrName));
    },
    async top(idOrName, psArgs) {
      const c = get(idOrName);
      if (!c.isRunningProcess) throw conflictNotRunning(c.id);
      const result = await runTop(host.processes, await runtime.pids(c.id), psArgs);
      events.emit(c, 'top');
      return result;
    },
    async resize(idOrName, height, width) {
      await life.resize(get(idOrName), height, width);
    },
    async update(idOrName, settings, o) {
      return updateContainer({ runtime, store, events }, get(idOrName), settings, o);
    },
    async stats(idOrName, o) {
      return containerStats(runtime, get(idOrName), o);
    },
    async commit(idOrName: string, req: CommitRequest) {
      const committer = opts.committer;
      if (!committer) throw new Error('commit is not available: no image service');
      return commitContainer(
        { images: committer, events, pause: (c) => life.pause(c), unpause: (c) => life.unpause(c) },
        get(idOrName),
        req,
      );
    },
    prune: (filters) => pruneContainers({ set, life, snapshots, events, log }, filters),

    async logs(idOrName, o) {
      const c = get(idOrName);
      checkLogsReadable(c);
      return {
        tty: c.record.Config.Tty === true,
        // generators: only the one the caller iterates reads anything
        lines: readContainerLogs(c, o, helpers.readLogs),
        batches: readContainerLogBatches(c, o, readBatches),
        records: readContainerLogRecords(c, o, readBatches),
      };
    },
    async attach(idOrName, o) {
      const c = get(idOrName);
      const keys = checkAttachable(c, o);
      return {
        tty: c.record.Config.Tty === true,
        begin: async (sink) => {
          events.emit(c, 'attach');
          return beginAttach(c, stdio.of(c), o, keys, sink, helpers.readLogs);
        },
      };
    },

    statPath: async (idOrName, path) => statContainerPath(copyDeps, get(idOrName), path),
    archivePath: async (idOrName, path) => archiveContainerPath(copyDeps, get(idOrName), path),
    async extractTo(idOrName, path, body, o) {
      await extractToContainer(copyDeps, get(idOrName), path, body, o);
    },
    changes: async (idOrName) => containerChanges(snapshots, host.archive, get(idOrName)),
    export: async (idOrName) => exportContainer(copyDeps, get(idOrName)),

    async execCreate(idOrName, req) {
      return { Id: execs.create(get(idOrName), idOrName, req).id };
    },
    execCheck(execId) {
      execs.get(execId);
    },
    execStart: (execId, o) => execs.start(execId, o),
    execInspect: (execId) => execs.inspect(execId),
    execResize: (execId, height, width) => execs.resize(execId, height, width),

    counts() {
      // as dockerd's StateString: a restarting container counts as stopped
      const all = [...set.values()].map((c) => c.state);
      const paused = all.filter((s) => s.Running && s.Paused).length;
      const running = all.filter((s) => s.Running && !s.Paused && !s.Restarting).length;
      return { total: all.length, running, paused, stopped: all.length - running - paused };
    },
    resolveId: (idOrName) => set.names.resolve(idOrName),
    async close() {
      life.beginClosing();
      // let operations under way finish (a start cut short would leave a container running
      // without its recorded network), within a bound
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([...set.values()].map((c) => c.lock.run(async () => undefined))),
        new Promise<void>((r) => {
          timer = setTimeout(r, CLOSE_DRAIN_MS);
        }),
      ]);
      clearTimeout(timer);
      runtime.events.off('exit', onExit);
      await life.shutdown();
    },
  };
}

function conflictNotRunning(id: string): Error {
  return conflict(`Container ${id} is not running`);
}
