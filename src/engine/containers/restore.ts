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

/** A record whose writable layer is missing (a crash during create): prepare the layer again. */
async function ensureSnapshot(d: RestoreDeps, c: Container): Promise<void> {
  if (await d.snapshots.exists(c.id)) return;
  const image = await d.images.get(c.record.Image).catch(() => undefined);
  if (!image) {
    d.log.warn('container layer missing and its image is gone', { id: c.id, image: c.record.Image });
    return;
  }
  await d.snapshots.prepare(c.id, image.chainId, { init: CONTAINER_INIT });
}

/**
 * Live restore: load every stored container and reconcile it with the runtime. Running ones stay
 * running and are watched again; ones that exited meanwhile get their exit recorded (die, restart
 * policy, AutoRemove); a removal cut short is finished. Containers whose restart policy says so
 * are started in the background afterwards.
 */
export async function restoreContainers(d: RestoreDeps): Promise<void> {
  const { set, store, life, runtime, log } = d;
  for (const { record, hostConfig } of await store.loadAll()) {
    const c = new Container(record, hostConfig);
    try {
      set.names.reserve(record.Name, record.ID);
    } catch {
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
  for (const c of [...set.values()]) {
    try {
      if (c.state.RemovalInProgress) {
        c.state.RemovalInProgress = false;
        await life.remove(c, { force: true });
        continue;
      }
      if (c.state.Running && !c.state.Restarting) {
        const rs = await runtime.state(c.id).catch(() => null);
        if (rs && (rs.status === 'running' || rs.status === 'paused')) {
          c.state.Pid = rs.pid;
          c.state.Paused = rs.status === 'paused';
          c.state.Status = c.state.Paused ? 'paused' : 'running';
          c.rootfsMounted = await isMounted(await d.rootfs.path(c.id));
          d.parts.net.restore(c);
          await life.reattach(c);
          await store.save(c.record);
          continue;
        }
        const st = (await runtime.exitStatus(c.id).catch(() => null)) ?? {
          exitCode: 255,
          oomKilled: false,
          finishedAt: new Date(),
        };
        await life.handleExit(c, st);
        continue;
      }
      await ensureSnapshot(d, c);
      if (!c.state.Running) {
        // A crash between the runtime starting the process and the state being saved: adopt it.
        const rs = await runtime.state(c.id).catch(() => null);
        if (rs && (rs.status === 'running' || rs.status === 'paused')) {
          c.setRunning(rs.pid);
          c.state.Paused = rs.status === 'paused';
          if (c.state.Paused) c.state.Status = 'paused';
          c.rootfsMounted = true;
          await life.reattach(c);
          await store.save(c.record);
          continue;
        }
        if (rs) await runtime.delete(c.id).catch(() => undefined);
        const target = await d.rootfs.path(c.id);
        if (await isMounted(target)) await d.snapshots.unmount(target).catch(() => undefined);
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
        await store.save(c.record);
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
