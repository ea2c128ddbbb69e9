import { join } from 'node:path';
import { conflict, errorMessage, isKind, notFound } from '../../common/errors.js';
import { checkFilterNames } from '../../common/filters.js';
import type { Logger } from '../../common/log.js';
import type { EventsService } from '../events/events.service.js';
import type { ImageResolver } from '../images/images.types.js';
import type { ContainerNetworking } from '../network/network.types.js';
import {
  buildSpec,
  type ExitStatus,
  type RuntimeDriver,
  readLogBatches,
  readLogs,
} from '../runtime/index.js';
import type { Snapshotter } from '../storage/snapshotter.types.js';
import type { VolumeService } from '../volumes/volumes.types.js';
import { archiveContainerPath, extractToContainer, statContainerPath } from './archive.js';
import { containerChanges } from './changes.js';
import { Container, emit, get, type Internals, rootfsPath } from './container.js';
import { createContainer } from './create.js';
import { createExec, ExecStore, execView, resizeExec, startExec } from './exec.js';
import { exportContainer } from './export.js';
import { filterContainers } from './filters.js';
import {
  beginAttach,
  checkAttachable,
  checkLogsReadable,
  readContainerLogBatches,
  readContainerLogs,
  singleBatches,
} from './io.js';
import { createLifecycle, type Lifecycle, type RuntimeHelpers } from './lifecycle.js';
import { NameRegistry } from './names.js';
import { linksView, namesView, registerLinkNames, removeLink, restoreEndpoint } from './network.js';
import { startsWithDaemon } from './restart.js';
import { isMounted } from './run.js';
import { containerStats } from './stats.js';
import { ContainerStore } from './store.js';
import { runTop } from './top.js';
import type { ContainerService, InspectView, ListItemView, ListOptions } from './types.js';
import { parseFilterTime, parseTimestampMs } from './units.js';
import { updateContainer } from './update.js';
import { inspectView, listItemView, type ViewSource } from './views.js';
import { restoreVolumes } from './volumes.js';

export type { ContainerService } from './types.js';

export interface ContainerServiceOptions {
  dataRoot: string;
  execRoot: string;
  events: EventsService;
  images: ImageResolver & { snapshotter: Snapshotter };
  runtime: RuntimeDriver;
  /** Volumes for `-v name:/dst`, anonymous volumes, Mounts of type volume and VolumesFrom. */
  volumes?: VolumeService;
  /** The default bridge (absent: containers get loopback only, as with `--network none`). */
  network?: ContainerNetworking;
  log: Logger;
  /** Spec builder and log rotation; the runtime package's by default (tests inject fakes). */
  helpers?: RuntimeHelpers;
}

/** How long an engine stop waits for container operations under way. */
const CLOSE_DRAIN_MS = 15_000;

export async function createContainerService(opts: ContainerServiceOptions): Promise<ContainerService> {
  const log = opts.log.child('containers');
  const ix: Internals = {
    dataRoot: opts.dataRoot,
    execRoot: opts.execRoot,
    events: opts.events,
    images: opts.images,
    runtime: opts.runtime,
    log,
    store: new ContainerStore(join(opts.dataRoot, 'containers'), log),
    names: new NameRegistry(),
    containers: new Map(),
    creating: new Map(),
    execs: new ExecStore(),
    closing: false,
  };
  if (opts.volumes) ix.volumes = opts.volumes;
  if (opts.network) ix.network = opts.network;
  await ix.store.init();
  const helpers: RuntimeHelpers = opts.helpers ?? { buildSpec, readLogs, readLogBatches };
  const readBatches = helpers.readLogBatches ?? singleBatches(helpers.readLogs);
  const life = createLifecycle(ix, helpers);

  const onExit = (id: string, status: ExitStatus) => {
    const c = ix.containers.get(id);
    if (!c) return;
    life
      .handleExit(c, status)
      .catch((err) => log.error('exit handling failed', { id, error: errorMessage(err) }));
  };
  opts.runtime.events.on('exit', onExit);

  opts.images.setUsers({
    containersUsing(imageId: string) {
      const using = [...ix.containers.values()]
        .filter((c) => c.record.Image === imageId)
        .map((c) => ({ id: c.id, running: c.state.Running }));
      for (const [id, image] of ix.creating) if (image === imageId) using.push({ id, running: false });
      return using;
    },
  });

  await reconcile(ix, life);
  opts.network?.setContainerSource(() => {
    const out = [];
    for (const c of ix.containers.values()) {
      const ep = c.record.Endpoint;
      if (ep && c.isRunningProcess) out.push({ id: c.id, name: c.name.slice(1), endpoint: ep });
    }
    return out;
  });

  async function view(c: Container, size: boolean, graph = true): Promise<ViewSource> {
    const src: ViewSource = { record: c.record, hostConfig: c.hostConfig, execIds: [...c.execIds] };
    if (c.record.Links) src.links = linksView(ix, c);
    if (graph) await addGraphDriver(c, src);
    if (size) {
      src.sizeRw = await ix.images.snapshotter.usage(c.id).catch(() => 0);
      const image = await ix.images.get(c.record.Image).catch(() => undefined);
      src.sizeRootFs = (image?.size ?? 0) + src.sizeRw;
    }
    return src;
  }

  async function addGraphDriver(c: Container, src: ViewSource): Promise<void> {
    // While a removal is under way the snapshot may be gone: ask the snapshotter then.
    const stable = !c.removing && !c.removed && !c.state.RemovalInProgress;
    if (stable && c.graphDriverData) {
      src.graphDriverData = { ...c.graphDriverData };
      return;
    }
    const snap = ix.images.snapshotter as Snapshotter & {
      paths?: (key: string) => Promise<Record<string, string>>;
    };
    try {
      const data = snap.paths
        ? { ...(await snap.paths(c.id)) }
        : { MergedDir: await rootfsPath(ix, c.id), UpperDir: snap.upperDir(c.id) };
      if (stable) c.graphDriverData = { ...data };
      src.graphDriverData = data;
    } catch {
      // snapshot gone (removal in progress)
    }
  }

  const service: ContainerService = {
    async create(req) {
      const result = await createContainer(ix, req);
      // GraphDriver paths are fixed from now on: work them out once, here, not on an inspect.
      const c = ix.containers.get(result.Id);
      if (c && !c.graphDriverData)
        await addGraphDriver(c, { record: c.record, hostConfig: c.hostConfig, execIds: [] });
      return result;
    },

    async list(o: ListOptions): Promise<ListItemView[]> {
      const all = [...ix.containers.values()].map((c) => ({ record: c.record, hostConfig: c.hostConfig }));
      const ancestorIds = new Map<string, string[]>();
      for (const ref of o.filters?.get('ancestor') ?? []) {
        const img = await ix.images.resolve(ref).catch(() => undefined);
        ancestorIds.set(ref, img ? [img.id] : []);
      }
      const picked = filterContainers(
        all,
        {
          all: o.all ?? false,
          limit: o.limit ?? 0,
          since: o.since,
          before: o.before,
          filters: o.filters ?? new Map(),
        },
        {
          resolve: (x) => ix.names.resolve(x),
          ancestorIds: (ref) => ancestorIds.get(ref) ?? [],
          networkId: (name) =>
            ix.network && (name === 'bridge' || name === 'host' || name === 'none')
              ? ix.network.networkId(name)
              : undefined,
        },
      );
      const images = new Map((await ix.images.list()).map((i) => [i.id, i]));
      const now = Date.now();
      const byName = new Map<string, string | undefined>();
      const out: ListItemView[] = [];
      for (const p of picked) {
        const c = ix.containers.get(p.record.ID);
        if (!c) continue;
        const src = await view(c, o.size ?? false, false);
        // Image: the name given at create; the image ID when that name now means another image.
        let imageName = c.record.Config.Image ?? '';
        const img = images.get(c.record.Image);
        if (!img) imageName = c.record.Image;
        else {
          if (!byName.has(imageName)) {
            byName.set(imageName, (await ix.images.resolve(imageName).catch(() => undefined))?.id);
          }
          if (byName.get(imageName) !== c.record.Image) imageName = img.repoTags[0] ?? c.record.Image;
        }
        out.push(listItemView({ ...src, imageName, now, names: namesView(ix, c) }));
      }
      return out;
    },

    async inspect(idOrName, o): Promise<InspectView> {
      const c = get(ix, idOrName);
      return inspectView(await view(c, o?.size ?? false));
    },

    async start(idOrName) {
      await life.start(get(ix, idOrName), true);
    },
    async stop(idOrName, o) {
      await life.stop(get(ix, idOrName), o ?? {});
    },
    async restart(idOrName, o) {
      await life.restart(get(ix, idOrName), o ?? {});
    },
    async kill(idOrName, signal) {
      let c: Container;
      try {
        c = get(ix, idOrName);
      } catch (err) {
        // dockerd: "Cannot kill container: x: No such container: x"
        if (isKind(err, 'NotFound'))
          throw notFound(`Cannot kill container: ${idOrName}: ${errorMessage(err)}`);
        throw err;
      }
      await life.kill(c, idOrName, signal);
    },
    async wait(idOrName, condition, signal) {
      return life.wait(get(ix, idOrName), condition, signal);
    },
    async remove(idOrName, o) {
      if (o.link) return removeLink(ix, idOrName);
      await life.remove(get(ix, idOrName), o);
    },
    async rename(idOrName, newName) {
      await life.rename(get(ix, idOrName), newName);
    },
    async pause(idOrName) {
      await life.pause(get(ix, idOrName));
    },
    async unpause(idOrName) {
      await life.unpause(get(ix, idOrName));
    },
    async top(idOrName, psArgs) {
      const c = get(ix, idOrName);
      if (!c.isRunningProcess) throw conflictNotRunning(c);
      const result = await runTop(await ix.runtime.pids(c.id), psArgs);
      emit(ix, c, 'top');
      return result;
    },
    async logs(idOrName, o) {
      const c = get(ix, idOrName);
      checkLogsReadable(c);
      return {
        tty: c.record.Config.Tty === true,
        // generators: only the one the caller iterates reads anything
        lines: readContainerLogs(c, o, helpers.readLogs),
        batches: readContainerLogBatches(c, o, readBatches),
      };
    },
    async attach(idOrName, o) {
      const c = get(ix, idOrName);
      const keys = checkAttachable(c, o);
      return {
        tty: c.record.Config.Tty === true,
        begin: async (sink) => {
          emit(ix, c, 'attach');
          return beginAttach(c, o, keys, sink, helpers.readLogs);
        },
      };
    },
    async resize(idOrName, height, width) {
      await life.resize(get(ix, idOrName), height, width);
    },
    async statPath(idOrName, path) {
      return statContainerPath(ix, get(ix, idOrName), path);
    },
    async archivePath(idOrName, path) {
      return archiveContainerPath(ix, get(ix, idOrName), path);
    },
    async extractTo(idOrName, path, body, o) {
      await extractToContainer(ix, get(ix, idOrName), path, body, o);
    },
    async changes(idOrName) {
      return containerChanges(ix, get(ix, idOrName));
    },
    async export(idOrName) {
      return exportContainer(ix, get(ix, idOrName));
    },
    async update(idOrName, settings, o) {
      return updateContainer(ix, get(ix, idOrName), settings, o);
    },
    async stats(idOrName, o) {
      return containerStats(ix, get(ix, idOrName), o);
    },
    async execCreate(idOrName, req) {
      return { Id: createExec(ix, get(ix, idOrName), idOrName, req).id };
    },
    execCheck(execId) {
      ix.execs.get(execId);
    },
    execStart(execId, o) {
      return startExec(ix, ix.execs.get(execId), o);
    },
    execInspect(execId) {
      return execView(ix.execs.get(execId));
    },
    async execResize(execId, height, width) {
      await resizeExec(ix, ix.execs.get(execId), height, width);
    },
    resolveId: (idOrName) => ix.names.resolve(idOrName),
    async prune(filters) {
      checkFilterNames(filters, ['until', 'label', 'label!']);
      const until = (filters.get('until') ?? []).map((v) => parseFilterTime(v));
      const labels = filters.get('label') ?? [];
      const notLabels = filters.get('label!') ?? [];
      const deleted: string[] = [];
      let reclaimed = 0;
      for (const c of [...ix.containers.values()]) {
        const s = c.state;
        if (s.Running || s.RemovalInProgress) continue;
        const created = parseTimestampMs(c.record.Created);
        if (!until.every((t) => created < t)) continue;
        const have = c.record.Config.Labels ?? {};
        if (!labels.every((l) => labelMatches(have, l))) continue;
        if (notLabels.some((l) => labelMatches(have, l))) continue;
        const size = await ix.images.snapshotter.usage(c.id).catch(() => 0);
        try {
          await life.remove(c, {});
        } catch (err) {
          log.warn('prune: cannot remove container', { id: c.id, error: errorMessage(err) });
          continue;
        }
        deleted.push(c.id);
        reclaimed += size;
      }
      ix.events.publish('container', 'prune', '', { reclaimed: String(reclaimed) });
      return { ContainersDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed };
    },
    lookup(idOrName) {
      const c = get(ix, idOrName);
      const s = c.state;
      return {
        id: c.id,
        name: c.name,
        running: s.Running && !s.Restarting,
        paused: s.Paused,
        restarting: s.Restarting,
        pid: s.Pid,
        config: c.record.Config,
        hostConfig: c.hostConfig,
        attributes: (extra) => c.attributes(extra),
      };
    },
    counts() {
      // as dockerd's StateString: a restarting container counts as stopped
      const all = [...ix.containers.values()].map((c) => c.state);
      const paused = all.filter((s) => s.Running && s.Paused).length;
      const running = all.filter((s) => s.Running && !s.Paused && !s.Restarting).length;
      return { total: all.length, running, paused, stopped: all.length - running - paused };
    },
    async close() {
      ix.closing = true;
      // let operations under way finish (a start cut short would leave a container running
      // without its recorded network), within a bound
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([...ix.containers.values()].map((c) => c.lock.run(async () => undefined))),
        new Promise<void>((r) => {
          timer = setTimeout(r, CLOSE_DRAIN_MS);
        }),
      ]);
      clearTimeout(timer);
      opts.runtime.events.off('exit', onExit);
      await life.shutdown();
      for (const c of ix.containers.values()) {
        if (c.restartTimer) clearTimeout(c.restartTimer);
        c.hub.disconnect();
      }
    },
  };
  return service;
}

/** A record whose writable layer is missing (a crash during create): prepare the layer again. */
async function ensureSnapshot(ix: Internals, c: Container): Promise<void> {
  const snap = ix.images.snapshotter as Snapshotter & { exists?: (key: string) => Promise<boolean> };
  if (!snap.exists || (await snap.exists(c.id))) return;
  const image = await ix.images.get(c.record.Image).catch(() => undefined);
  if (!image) {
    ix.log.warn('container layer missing and its image is gone', { id: c.id, image: c.record.Image });
    return;
  }
  await snap.prepare(c.id, image.chainId);
}

function labelMatches(labels: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return Object.hasOwn(labels, filter);
  return labels[filter.slice(0, i)] === filter.slice(i + 1);
}

function conflictNotRunning(c: Container): Error {
  return conflict(`Container ${c.id} is not running`);
}

/**
 * Live restore: load every stored container and reconcile it with the runtime. Running ones stay
 * running and are watched again; ones that exited meanwhile get their exit recorded (die, restart
 * policy, AutoRemove); a removal cut short is finished.
 */
async function reconcile(ix: Internals, life: Lifecycle): Promise<void> {
  const loaded = await ix.store.loadAll();
  for (const { record, hostConfig } of loaded) {
    const c: Container = new Container(record, hostConfig, () => emit(ix, c, 'detach'));
    try {
      ix.names.reserve(record.Name, record.ID);
    } catch {
      ix.log.warn('duplicate container name on restore; renaming', { id: record.ID, name: record.Name });
      record.Name = ix.names.freshName();
      ix.names.reserve(record.Name, record.ID);
    }
    ix.names.addId(record.ID);
    ix.containers.set(record.ID, c);
  }
  for (const c of ix.containers.values()) registerLinkNames(ix, c);
  // every container's volume references before any exit is handled: an AutoRemove of one that
  // exited while the engine was down must not take an anonymous volume another one still uses
  await restoreVolumes(ix);
  const starts: Container[] = [];
  for (const c of ix.containers.values()) {
    try {
      if (c.state.RemovalInProgress) {
        c.state.RemovalInProgress = false;
        await life.remove(c, { force: true });
        continue;
      }
      if (c.state.Running && !c.state.Restarting) {
        const rs = await ix.runtime.state(c.id).catch(() => null);
        if (rs && (rs.status === 'running' || rs.status === 'paused')) {
          c.state.Pid = rs.pid;
          c.state.Paused = rs.status === 'paused';
          c.state.Status = c.state.Paused ? 'paused' : 'running';
          c.rootfsMounted = await isMounted(await rootfsPath(ix, c.id));
          restoreEndpoint(ix, c);
          await life.reattach(c);
          await ix.store.save(c.record);
          continue;
        }
        const st = (await ix.runtime.exitStatus(c.id).catch(() => null)) ?? {
          exitCode: 255,
          oomKilled: false,
          finishedAt: new Date(),
        };
        await life.handleExit(c, st);
        continue;
      }
      await ensureSnapshot(ix, c);
      if (!c.state.Running) {
        // A crash between the runtime starting the process and the state being saved: adopt it.
        const rs = await ix.runtime.state(c.id).catch(() => null);
        if (rs && (rs.status === 'running' || rs.status === 'paused')) {
          c.setRunning(rs.pid);
          c.state.Paused = rs.status === 'paused';
          if (c.state.Paused) c.state.Status = 'paused';
          c.rootfsMounted = true;
          await life.reattach(c);
          await ix.store.save(c.record);
          continue;
        }
        if (rs) await ix.runtime.delete(c.id).catch(() => undefined);
        const target = await rootfsPath(ix, c.id);
        if (await isMounted(target)) await ix.images.snapshotter.unmount(target).catch(() => undefined);
        if (c.hostConfig.AutoRemove && c.record.HasBeenStartedBefore) {
          // stopped before its removal could happen (a crash in between): remove it now, as dockerd
          // does, with its anonymous volumes as the live AutoRemove would
          await life.remove(c, { force: true, volumes: true });
          continue;
        }
      }
      if (c.state.Restarting) {
        // the policy restart that was waiting for its backoff: it counts as one
        c.clearRestarting();
        c.record.RestartCount++;
        await ix.store.save(c.record);
        starts.push(c);
        continue;
      }
      if (
        c.record.HasBeenStartedBefore &&
        startsWithDaemon(c.hostConfig.RestartPolicy ?? {}, c.record.HasBeenManuallyStopped)
      ) {
        starts.push(c);
      }
    } catch (err) {
      ix.log.error('cannot restore container', { id: c.id, error: errorMessage(err) });
    }
  }
  // Sandboxes and addresses no running container holds (exits while the engine was down that
  // were handled above released theirs; this is what a crash left behind).
  await ix.network?.sweep().catch((err) => ix.log.warn('network sweep failed', { error: errorMessage(err) }));
  // In the background, one at a time, containers that join another's namespaces last.
  const joins = (c: Container) =>
    [c.hostConfig.NetworkMode, c.hostConfig.PidMode, c.hostConfig.IpcMode].some((m) =>
      m?.startsWith('container:'),
    );
  starts.sort((a, b) => Number(joins(a)) - Number(joins(b)));
  void (async () => {
    for (const c of starts) {
      if (ix.closing) return;
      await life
        .start(c, false)
        .catch((err) =>
          ix.log.warn('restart on daemon start failed', { id: c.id, error: errorMessage(err) }),
        );
    }
  })();
}
