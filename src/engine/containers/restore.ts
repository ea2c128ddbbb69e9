import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { ImageResolver } from '../images/images.types.js';
import type { RuntimeDriver } from '../runtime/runtime.types.js';
import { Container } from './core/container.js';
import { CONTAINER_INIT } from './core/init-layer.js';
import type { Lifecycle } from './core/lifecycle.js';
import type { ContainerParts, ContainerSnapshots } from './core/ports.js';
import { startsWithDaemon } from './core/restart.js';
import { isMounted, type Rootfs } from './core/rootfs.js';
import type { ContainerSet } from './core/set.js';
import type { ContainerStore } from './core/store.js';

export interface RestoreDeps {
  set: ContainerSet;
  store: ContainerStore;
  rootfs: Rootfs;
  snapshots: ContainerSnapshots;
  images: Pick<ImageResolver, 'get'>;
  runtime: RuntimeDriver;
  life: Lifecycle;
  parts: Pick<ContainerParts, 'net' | 'mounts'>;
  log: Logger;
}

/**
 * A record whose writable layer is missing (a crash during create, or a power loss that took the
 * layer's record, which create does not fsync): prepare the layer again.
 */
async function ensureSnapshot(d: RestoreDeps, c: Container): Promise<void> {
  if (await d.snapshots.exists(c.id)) return;
  const image = await d.images.get(c.record.Image).catch(() => undefined);
  if (!image) {
    d.log.warn('container layer missing and its image is gone', { id: c.id, image: c.record.Image });
    return;
  }
  await d.snapshots.prepare(c.id, image.chainId, { init: CONTAINER_INIT });
}

type Outcome = 'running' | 'exited' | 'stopped';

const alive = (rs: { status: string } | null) => rs?.status === 'running' || rs?.status === 'paused';

/**
 * A stored container against the runtime: one recorded as running that still runs is kept and
 * attached again; one that exited meanwhile has its exit handled as a live exit would be (die,
 * restart policy, AutoRemove); one the runtime runs although its record does not say so (a crash
 * right after the start) is adopted; a stopped one loses stale runtime state and rootfs mounts.
 */
async function reconcile(d: RestoreDeps, c: Container): Promise<Outcome> {
  const { store, life, runtime } = d;
  if (c.state.Running && !c.state.Restarting) {
    const rs = await runtime.state(c.id).catch(() => null);
    if (rs && alive(rs)) {
      c.state.Pid = rs.pid;
      // frozen by the engine itself (docker cp writes with the container frozen), not by a pause
      // the record holds: the crash cut that write short; thaw it
      if (rs.status === 'paused' && !c.state.Paused) {
        await runtime
          .resume(c.id)
          .catch((err) =>
            d.log.warn('could not thaw a container the engine had frozen', { id: c.id, error: String(err) }),
          );
      } else c.state.Paused = rs.status === 'paused';
      c.state.Status = c.state.Paused ? 'paused' : 'running';
      c.rootfsMounted = await isMounted(await d.rootfs.path(c.id));
      d.parts.net.restore(c);
      await life.reattach(c);
      await store.persist(c);
      return 'running';
    }
    const st = (await runtime.exitStatus(c.id).catch(() => null)) ?? {
      exitCode: 255,
      oomKilled: false,
      finishedAt: new Date(),
    };
    // its process gone (a reboot after a power loss may have taken the layer's record, which
    // create does not fsync): the layer is there before a restart policy starts it again
    await ensureSnapshot(d, c);
    await life.handleExit(c, st);
    return 'exited';
  }
  if (c.state.Running) return 'stopped'; // a policy restart waiting for its backoff
  // A crash between the runtime starting the process and the state being saved: adopt it.
  const rs = await runtime.state(c.id).catch(() => null);
  if (rs && alive(rs)) {
    c.setRunning(rs.pid);
    c.state.Paused = rs.status === 'paused';
    if (c.state.Paused) c.state.Status = 'paused';
    c.rootfsMounted = true;
    await life.reattach(c);
    await store.persist(c);
    return 'running';
  }
  if (rs) await runtime.delete(c.id).catch(() => undefined);
  await d.rootfs.unmount(c).catch(() => undefined);
  return 'stopped';
}

/**
 * Live restore: load every stored container and reconcile it with the runtime (running ones stay
 * running and are watched again), then finish what the last engine had under way: a removal that
 * was asked for (its intent is saved before it begins) is completed as it was asked, and an
 * AutoRemove container that is not running is removed, as dockerd does. Containers whose restart
 * policy says so are started in the background afterwards.
 */
export async function restoreContainers(d: RestoreDeps): Promise<void> {
  const { set, store, life, log } = d;
  // a container whose removal was under way gave its name up when the removal was asked for (a
  // new container may have it now): the names of the others are reserved first
  const loaded = (await store.loadAll()).sort(
    (a, b) => Number(a.record.State.RemovalInProgress) - Number(b.record.State.RemovalInProgress),
  );
  for (const { record, hostConfig } of loaded) {
    const c = new Container(record, hostConfig);
    try {
      set.names.reserve(record.Name, record.ID);
    } catch {
      if (record.State.RemovalInProgress) {
        record.Name = set.names.freshName();
        set.names.reserve(record.Name, record.ID);
        set.add(c);
        continue;
      }
      log.warn('duplicate container name on restore; renaming', { id: record.ID, name: record.Name });
      record.Name = set.names.freshName();
      set.names.reserve(record.Name, record.ID);
    }
    set.add(c);
  }
  for (const c of set.values()) d.parts.net.registerLinks(c);
  // every container's volume references before any exit is handled: an AutoRemove of one that
  // exited while the engine was down must not take an anonymous volume another one still uses
  await d.parts.mounts.restore(set.values());
  const starts: Container[] = [];
  const removals: Array<{ c: Container; volumes: boolean }> = [];
  for (const c of [...set.values()]) {
    try {
      if (c.state.RemovalInProgress) {
        // a removal a crash cut short: nothing restarts or auto-removes it meanwhile (its exit,
        // if it exited, is recorded below); it is finished once every container is reconciled
        c.restart.cancel();
        c.removing = true;
        removals.push({ c, volumes: c.record.RemoveVolumes === true });
        await reconcile(d, c);
        continue;
      }
      const outcome = await reconcile(d, c);
      if (outcome !== 'stopped') continue;
      if (c.hostConfig.AutoRemove && !c.state.Running) {
        // stopped (or never started: a `docker run --rm` whose client went with the engine) before
        // its removal could happen: removed now with its anonymous volumes, as dockerd does
        await life.remove(c, { force: true, volumes: true });
        continue;
      }
      await ensureSnapshot(d, c);
      if (c.state.Restarting) {
        // the policy restart that was waiting for its backoff: it counts as one
        c.clearRestarting();
        c.record.RestartCount++;
        await store.persist(c);
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
      log.error('cannot restore container', { id: c.id, error: errorMessage(err) });
    }
  }
  for (const { c, volumes } of removals) {
    // remove() marks it again (and kills it if it still runs)
    c.removing = false;
    c.state.RemovalInProgress = false;
    log.info('finishing a removal cut short', { id: c.id });
    await life
      .remove(c, { force: true, volumes })
      .catch((err) =>
        log.error('cannot finish the removal of a container', { id: c.id, error: errorMessage(err) }),
      );
  }
  // the teardowns of those removals done before the engine answers
  await life.settled();
  // Sandboxes and addresses no running container holds (exits while the engine was down that
  // were handled above released theirs; this is what a crash left behind).
  await d.parts.net.sweep().catch((err) => log.warn('network sweep failed', { error: errorMessage(err) }));
  // In the background, one at a time, containers that join another's namespaces last.
  const joins = (c: Container) =>
    [c.hostConfig.NetworkMode, c.hostConfig.PidMode, c.hostConfig.IpcMode].some((m) =>
      m?.startsWith('container:'),
    );
  starts.sort((a, b) => Number(joins(a)) - Number(joins(b)));
  void (async () => {
    for (const c of starts) {
      if (life.closing) return;
      await life
        .start(c, false)
        .catch((err) => log.warn('restart on daemon start failed', { id: c.id, error: errorMessage(err) }));
    }
  })();
}
