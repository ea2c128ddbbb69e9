import { setTimeout as sleep } from 'node:timers/promises';
import { conflict, errorMessage, invalidParameter, isKind, notModified } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { parseSignal, SIGKILL, SIGTERM } from '../../../common/signals.js';
import { parseTimestampMs } from '../../../common/time.js';
import type { ExitStatus, RuntimeDriver } from '../../runtime/runtime.types.js';
import type { Container } from './container.js';
import type { ContainerEvents } from './events.js';
import type { HealthChecks } from './health.js';
import { normalizeName } from './names.js';
import type { ContainerParts, ContainerSnapshots } from './ports.js';
import type { Rootfs } from './rootfs.js';
import type { ContainerSet } from './set.js';
import { prepareStart, type SpecBuilder } from './start.js';
import { startFailure } from './start-failure.js';
import type { ContainerStore } from './store.js';

/**
 * The containers' state machine: start, exit handling (restart policy, auto-remove), stop, kill,
 * restart, pause, wait, remove, rename, resize, and reattaching after an engine restart. Each step
 * goes through the rooms (ContainerParts) in dockerd's order: network connect, volume mount,
 * start; die, network disconnect, volume unmount.
 */

export interface LifecycleDeps {
  set: ContainerSet;
  store: ContainerStore;
  events: ContainerEvents;
  rootfs: Rootfs;
  snapshots: ContainerSnapshots;
  runtime: RuntimeDriver;
  health: HealthChecks;
  parts: ContainerParts;
  buildSpec: SpecBuilder;
  log: Logger;
}

export type WaitCondition = 'not-running' | 'next-exit' | 'removed';

export interface WaitResult {
  StatusCode: number;
  Error: { Message: string } | null;
}

export type Lifecycle = ReturnType<typeof createLifecycle>;

const EXIT_WAIT_AFTER_KILL_MS = 30_000;
const TEARDOWN_DRAIN_MS = 10_000;

/** Resolves on the container's next handled exit (die event emitted, state saved). */
function nextExit(c: Container): Promise<number> {
  return new Promise((resolve) => c.events.once('exit', (code: number) => resolve(code)));
}

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  if (ms < 0) return p;
  const ac = new AbortController();
  try {
    return await Promise.race([p, sleep(ms, undefined, { signal: ac.signal }).catch(() => undefined)]);
  } finally {
    ac.abort();
  }
}

export function createLifecycle(d: LifecycleDeps) {
  const { set, store, events, rootfs, runtime, parts, log } = d;
  /** The engine is shutting down: no restarts, no auto-removal. */
  let closing = false;

  /** The process stopped or never ran: volumes, then the rootfs, unmounted. */
  async function unmountRootfs(c: Container): Promise<void> {
    await parts.mounts.release(c);
    await rootfs.unmount(c);
  }

  async function start(c: Container, manual: boolean): Promise<void> {
    let failed = false;
    await c.lock
      .run(async () => {
        const s = c.state;
        if (s.RemovalInProgress || s.Dead)
          throw conflict('container is marked for removal and cannot be started');
        if (s.Paused) throw conflict('cannot start a paused container, try unpause instead');
        if (s.Running && !s.Restarting) throw notModified();
        if (manual) {
          c.restart.reset();
          c.record.HasBeenManuallyStopped = false;
          c.record.RestartCount = 0;
        }
        if (c.restartTimer) {
          clearTimeout(c.restartTimer);
          c.restartTimer = undefined;
        }
        try {
          // the last run's runtime state and rootfs mount gone first
          if (c.cleanup) await c.cleanup;
          const dir = await rootfs.mount(c);
          c.runtimeDeleted = false;
          const opts = await prepareStart(d, c, dir);
          const { pid } = await runtime.start({
            ...opts,
            beforeStart: async () => {
              await parts.net.connect(c);
              // dockerd's order: network connect, volume mount, start
              parts.mounts.announce(c);
              await parts.stdio.started(c, () => runtime.attach(c.id));
            },
          });
          c.setRunning(pid);
          d.health.start(c, true);
          await store.persist(c);
          parts.logs.start(c);
          events.emit(c, 'start');
        } catch (err) {
          failed = true;
          const f = startFailure(err, c.record.Path);
          parts.stdio.exited(c);
          c.clearRestarting();
          c.state.Error = f.message;
          c.state.ExitCode = f.exitCode;
          c.state.Status = c.record.HasBeenStartedBefore ? 'exited' : 'created';
          if (c.state.Status === 'exited') c.state.Running = false;
          parts.net.abort(c);
          await runtime.delete(c.id).catch(() => undefined);
          await unmountRootfs(c).catch(() => undefined);
          await store.persist(c).catch(() => undefined);
          if (f.userError) throw invalidParameter(f.message);
          throw err;
        }
      })
      .catch(async (err) => {
        if (failed && c.hostConfig.AutoRemove)
          await remove(c, { force: true, volumes: true }).catch(() => undefined);
        throw err;
      });
  }

  async function restartByPolicy(c: Container): Promise<void> {
    c.restartTimer = undefined;
    if (!c.state.Restarting || closing) return;
    c.record.RestartCount++;
    try {
      await start(c, false);
    } catch (err) {
      log.warn('restart by policy failed', { id: c.id, error: errorMessage(err) });
    }
  }

  /**
   * The runtime's state and the rootfs mount of a stopped container go, off the container's lock
   * (a removal asked for meanwhile need not wait for them); what mounts the rootfs or starts the
   * container again waits for them (`c.cleanup`).
   */
  function cleanUpAfterExit(c: Container): Promise<void> {
    const work = (async () => {
      await runtime.delete(c.id).then(
        () => {
          c.runtimeDeleted = true;
        },
        (err) => log.warn('runtime delete failed', { id: c.id, error: errorMessage(err) }),
      );
      await rootfs
        .unmount(c)
        .catch((err) => log.warn('unmount failed', { id: c.id, error: errorMessage(err) }));
    })();
    c.cleanup = work;
    void work.finally(() => {
      if (c.cleanup === work) c.cleanup = undefined;
    });
    return work;
  }

  async function handleExit(c: Container, status: ExitStatus): Promise<void> {
    let autoRemove = false;
    let cleanup: Promise<void> | undefined;
    const work = c.lock.run(async () => {
      if (!c.state.Running || c.state.Restarting) return;
      d.health.stop(c);
      // everything the process wrote is in its log before anyone hears of the exit
      await parts.logs.finish(c);
      const runMs = status.finishedAt.getTime() - parseTimestampMs(c.state.StartedAt);
      c.setStopped(status.exitCode, status.finishedAt, status.oomKilled, status.finishedNanos);
      parts.stdio.exited(c);
      // its exec instances end with it (dockerd's Cleanup)
      parts.execs.forgetContainer(c);
      const endpoint = parts.net.detach(c);
      const decision = closing
        ? { restart: false, delayMs: 0 }
        : c.restart.shouldRestart(status.exitCode, {
            manuallyStopped: c.record.HasBeenManuallyStopped,
            restartCount: c.record.RestartCount,
            runMs: Number.isFinite(runMs) ? runMs : 0,
          });
      if (decision.restart) c.setRestarting();
      else if (c.hostConfig.AutoRemove) autoRemove = true;
      // The exit (and the restart to come) recorded in one write, before the runtime forgets it
      // (a crash in between must not lose it).
      await store.persist(c);
      if (status.oomKilled) events.emit(c, 'oom');
      // dockerd's order: die, network disconnect, then the cleanup (volume unmount)
      events.emit(c, 'die', { exitCode: String(status.exitCode) });
      parts.net.release(c, endpoint);
      // the exit is recorded: waiters answer now (as dockerd's SetStopped), the cleanup goes on
      c.events.emit('stopped', status.exitCode);
      await parts.mounts
        .release(c)
        .catch((err) => log.warn('volume unmount failed', { id: c.id, error: errorMessage(err) }));
      cleanup = cleanUpAfterExit(c);
      if (decision.restart) {
        c.restartTimer = setTimeout(() => void restartByPolicy(c), decision.delayMs);
        c.restartTimer.unref();
      }
    });
    const handled = (async () => {
      await work;
      await cleanup;
      // stop, kill and restart go on once the exit is handled whole
      if (cleanup) c.events.emit('exit', status.exitCode);
    })();
    c.exiting = handled;
    try {
      await handled;
    } finally {
      if (c.exiting === handled) c.exiting = undefined;
    }
    if (autoRemove && !closing && !c.removing) {
      await remove(c, { force: true, volumes: true }).catch((err) =>
        log.warn('auto-remove failed', { id: c.id, error: errorMessage(err) }),
      );
    }
  }

  /** Send a signal; a paused container is resumed so that it gets it (and unpause announced). */
  async function signalContainer(c: Container, sig: number): Promise<void> {
    events.emit(c, 'kill', { signal: String(sig) });
    await runtime.signal(c.id, sig);
    if (c.state.Paused) {
      await runtime.resume(c.id).catch(() => undefined);
      c.state.Paused = false;
      // the signal may have ended it meanwhile: its exit handling has set the status then
      if (c.isRunningProcess) c.state.Status = 'running';
      await store.persist(c);
      events.emit(c, 'unpause');
    }
  }

  /**
   * Wait for the process to be gone and its exit handled (the die event sent, so that a caller's
   * own events come after it, as dockerd's do), checking the runtime too in case an exit report is
   * late. Never called under the container's lock (exit handling takes it).
   */
  async function awaitExit(c: Container, exit: Promise<number>, ms: number): Promise<boolean> {
    const deadline = ms < 0 ? Number.POSITIVE_INFINITY : Date.now() + ms;
    for (;;) {
      if (!c.isRunningProcess) {
        if (c.exiting) await c.exiting.catch(() => undefined);
        return true;
      }
      const left = deadline - Date.now();
      if (left <= 0) return false;
      if ((await withTimeout(exit, Math.min(left, 1000))) !== undefined) return true;
      if (!c.isRunningProcess) continue;
      const st = await runtime.exitStatus(c.id).catch(() => null);
      if (st) await handleExit(c, st);
    }
  }

  function stopTimeout(c: Container, t?: number): number {
    if (t !== undefined) return t;
    const st = c.record.Config.StopTimeout;
    return st === undefined || st === null ? 10 : st;
  }

  async function stopRunning(c: Container, opts: { timeout?: number; signal?: string }): Promise<void> {
    const sig = opts.signal
      ? parseSignal(opts.signal)
      : c.record.Config.StopSignal
        ? parseSignal(c.record.Config.StopSignal)
        : SIGTERM;
    c.record.HasBeenManuallyStopped = true;
    c.restart.cancel();
    if (c.state.Restarting) {
      if (c.restartTimer) clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
      c.clearRestarting();
      await store.persist(c);
      return;
    }
    await store.persist(c);
    const exit = nextExit(c);
    const timeout = stopTimeout(c, opts.timeout);
    await signalContainer(c, sig).catch((err) =>
      log.debug('stop signal failed', { error: errorMessage(err) }),
    );
    if (await awaitExit(c, exit, timeout * 1000)) return;
    await signalContainer(c, SIGKILL).catch((err) => log.debug('kill failed', { error: errorMessage(err) }));
    if (!(await awaitExit(c, exit, EXIT_WAIT_AFTER_KILL_MS))) {
      throw new Error(`container ${c.id} did not exit after SIGKILL`);
    }
  }

  async function stop(c: Container, opts: { timeout?: number; signal?: string }): Promise<void> {
    if (!c.state.Running) throw notModified();
    if (opts.signal) parseSignal(opts.signal);
    await stopRunning(c, opts);
    events.emit(c, 'stop');
  }

  async function kill(c: Container, name: string, signal?: string): Promise<void> {
    const sig = signal ? parseSignal(signal) : SIGKILL;
    const stopSig = c.record.Config.StopSignal ? parseSignal(c.record.Config.StopSignal) : SIGTERM;
    if (c.state.Restarting) {
      // no process to signal: as dockerd, the kill ends the restart loop (the container stays exited)
      if (sig === SIGKILL || sig === stopSig) {
        c.record.HasBeenManuallyStopped = true;
        c.restart.cancel();
        if (c.restartTimer) clearTimeout(c.restartTimer);
        c.restartTimer = undefined;
        c.clearRestarting();
        await store.persist(c);
      }
      return;
    }
    if (!c.isRunningProcess) {
      throw conflict(`Cannot kill container: ${name}: Container ${c.id} is not running`);
    }
    if (sig === SIGKILL || sig === stopSig) {
      c.record.HasBeenManuallyStopped = true;
      await store.persist(c);
    }
    const exit = nextExit(c);
    try {
      await signalContainer(c, sig);
    } catch (err) {
      // the process ended meanwhile (the runtime no longer knows it as running)
      if (isKind(err, 'NotFound') || isKind(err, 'Conflict')) {
        throw conflict(`Cannot kill container: ${name}: Container ${c.id} is not running`);
      }
      throw err;
    }
    if (sig === SIGKILL) await awaitExit(c, exit, 10_000);
  }

  async function restart(c: Container, opts: { timeout?: number; signal?: string }): Promise<void> {
    if (opts.signal) parseSignal(opts.signal);
    if (c.state.Running) {
      await stopRunning(c, opts);
      events.emit(c, 'stop');
    }
    await start(c, true).catch((err) => {
      if (err && typeof err === 'object' && 'kind' in err && err.kind === 'NotModified') return;
      throw err;
    });
    events.emit(c, 'restart');
  }

  async function pause(c: Container): Promise<void> {
    await c.lock.run(async () => {
      if (!c.state.Running) throw conflict(`Container ${c.id} is not running`);
      if (c.state.Restarting)
        throw conflict(`Container ${c.id} is restarting, wait until the container is running`);
      if (c.state.Paused) throw conflict(`Container ${c.id} is already paused`);
      await runtime.pause(c.id);
      c.state.Paused = true;
      c.state.Status = 'paused';
      await store.persist(c);
      events.emit(c, 'pause');
    });
  }

  async function unpause(c: Container): Promise<void> {
    await c.lock.run(async () => {
      if (!c.state.Paused) throw conflict(`Container ${c.id} is not paused`);
      await runtime.resume(c.id);
      c.state.Paused = false;
      c.state.Status = 'running';
      await store.persist(c);
      events.emit(c, 'unpause');
    });
  }

  function result(code: number, error?: string): WaitResult {
    return { StatusCode: code, Error: error ? { Message: error } : null };
  }

  function wait(c: Container, condition: WaitCondition, signal?: AbortSignal): () => Promise<WaitResult> {
    // Decide what to wait for now (synchronously), so that an exit between this call and the
    // caller awaiting is not missed.
    if (condition === 'not-running' && !c.state.Running) {
      const now = result(c.state.ExitCode);
      return () => Promise.resolve(now);
    }
    let settle: (r: WaitResult) => void = () => undefined;
    let fail: (e: Error) => void = () => undefined;
    const waiting = new Promise<WaitResult>((resolve, reject) => {
      settle = resolve;
      fail = reject;
    });
    const cleanup = () => {
      c.events.off('stopped', onExit);
      c.events.off('removed', onRemoved);
      signal?.removeEventListener('abort', onAbort);
    };
    const onExit = (code: number) => {
      if (condition === 'removed') return;
      cleanup();
      settle(result(code));
    };
    const onRemoved = (error?: string) => {
      cleanup();
      settle(result(c.state.ExitCode, error));
    };
    const onAbort = () => {
      cleanup();
      fail(new Error('client went away'));
    };
    c.events.on('stopped', onExit);
    c.events.on('removed', onRemoved);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    return () => waiting;
  }

  /** dockerd's 409 for removing a running container without force. */
  function refuseRunning(c: Container): never {
    const what = c.state.Restarting ? 'restarting' : c.state.Paused ? 'paused' : 'running';
    throw conflict(
      `cannot remove container "${c.name}": container is ${what}: stop the container before removing or force remove`,
    );
  }

  async function remove(c: Container, opts: { force?: boolean; volumes?: boolean }): Promise<void> {
    if (c.removing || c.state.RemovalInProgress) {
      throw invalidParameter(`removal of container ${c.name.replace(/^\//, '')} is already in progress`);
    }
    if (c.state.Running && !opts.force) refuseRunning(c);
    c.removing = true;
    try {
      await removeNow(c, opts.force === true, opts.volumes === true);
    } finally {
      if (!c.removed) c.removing = false;
    }
  }

  /** The removal asked for, in the record: `State.RemovalInProgress` and whether volumes go too. */
  function markRemoval(c: Container, volumes: boolean): void {
    c.state.RemovalInProgress = true;
    if (volumes) c.record.RemoveVolumes = true;
    else delete c.record.RemoveVolumes;
  }

  function unmarkRemoval(c: Container): void {
    c.state.RemovalInProgress = false;
    delete c.record.RemoveVolumes;
  }

  /**
   * Remove: the intent is saved before anything is undone (under the lock, so a start waiting for
   * it is refused afterwards), so that a crash from there on leaves a record the next engine start
   * finishes (restore.ts). A stopped container goes at once; a running one is killed first (marked
   * as stopped by hand in the same write, so no restart policy brings it back after a crash).
   */
  async function removeNow(c: Container, force: boolean, volumes: boolean): Promise<void> {
    const running = await c.lock.run(async () => {
      if (!set.holds(c)) return false;
      if (c.state.Running && !force) refuseRunning(c);
      markRemoval(c, volumes);
      if (!c.state.Running) {
        await destroy(c, volumes);
        return false;
      }
      c.record.HasBeenManuallyStopped = true;
      c.restart.cancel();
      await store.persist(c);
      return true;
    });
    if (!running) return;
    try {
      if (c.state.Restarting) {
        if (c.restartTimer) clearTimeout(c.restartTimer);
        c.restartTimer = undefined;
        c.clearRestarting();
      } else {
        const exit = nextExit(c);
        await signalContainer(c, SIGKILL).catch(() => undefined);
        if (!(await awaitExit(c, exit, EXIT_WAIT_AFTER_KILL_MS))) {
          throw new Error(`could not kill container ${c.id}`);
        }
      }
    } catch (err) {
      // as dockerd: the container stays, no longer marked for removal
      unmarkRemoval(c);
      await store.persist(c).catch(() => undefined);
      throw err;
    }
    if (c.exiting) await c.exiting.catch(() => undefined);
    await c.lock.run(async () => {
      if (set.holds(c)) await destroy(c, volumes);
    });
  }

  /** Teardowns of removed containers still under way (the engine's shutdown waits for them). */
  const teardowns = new Set<Promise<void>>();

  /**
   * Under the container's lock, the process gone: the removal is recorded (`State.Status`
   * `removing`, beside `RemovalInProgress` and `RemoveVolumes`: the intent), then the container
   * leaves the API's view at once (its name and ID free) and its volumes are dropped as asked, as
   * dockerd does before it answers. What takes time (the runtime's state, the rootfs unmount, the
   * writable layer, the directories) goes in the background, the record last: a crash on the way
   * leaves the record marked for removal, and the next start finishes the removal (restore.ts).
   */
  async function destroy(c: Container, volumes: boolean): Promise<void> {
    c.state.Status = 'removing';
    try {
      await store.persist(c);
    } catch (err) {
      unmarkRemoval(c);
      c.state.Status = c.state.Running ? 'running' : c.record.HasBeenStartedBefore ? 'exited' : 'created';
      c.events.emit('removed', `unable to remove container: ${errorMessage(err)}`);
      throw err;
    }
    c.removed = true;
    set.delete(c);
    parts.net.removed(c);
    parts.execs.forgetContainer(c);
    parts.stdio.removed(c);
    events.emit(c, 'destroy');
    await parts.mounts
      .release(c)
      .catch((err) => log.warn('volume release failed', { id: c.id, error: errorMessage(err) }));
    await parts.mounts
      .forget(c, volumes)
      .catch((err) =>
        log.warn("cannot drop a removed container's volumes", { id: c.id, error: errorMessage(err) }),
      );
    // the directory under the exec root: a few unlinks (non-recursive, nothing mounted there)
    await rootfs.removeExecDir(c.id).catch(() => undefined);
    const work = teardown(c).finally(() => teardowns.delete(work));
    teardowns.add(work);
    c.events.emit('removed');
  }

  /** What is left of a removed container, undone in dockerd's order; the record goes last. */
  async function teardown(c: Container): Promise<void> {
    try {
      if (c.cleanup) await c.cleanup;
      await parts.logs.stop(c);
      if (!c.runtimeDeleted) await runtime.delete(c.id).catch(() => undefined);
      await rootfs.unmount(c);
      await d.snapshots.remove(c.id);
      await rootfs.removeExecDir(c.id);
      await store.remove(c.id);
    } catch (err) {
      log.warn("cannot finish a removed container's teardown (finished at the next start)", {
        id: c.id,
        error: errorMessage(err),
      });
    }
  }

  async function rename(c: Container, newName: string): Promise<void> {
    if (!newName) throw invalidParameter('Neither old nor new names may be empty');
    let name: string;
    try {
      name = normalizeName(newName);
    } catch {
      const slashed = newName.startsWith('/') ? newName : `/${newName}`;
      throw invalidParameter(
        `Error when allocating new name: Invalid container name (${slashed}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`,
      );
    }
    if (name === c.name)
      throw invalidParameter('Renaming a container with the same name as its current name');
    await c.lock.run(async () => {
      const old = c.name;
      try {
        set.names.reserve(name, c.id);
      } catch (err) {
        if (isKind(err, 'Conflict')) throw conflict(`Error when allocating new name: ${errorMessage(err)}`);
        throw err;
      }
      c.record.Name = name;
      try {
        await store.persist(c);
      } catch (err) {
        set.names.release(name);
        c.record.Name = old;
        throw err;
      }
      set.names.release(old);
      parts.net.renamed(c, old);
      events.emit(c, 'rename', { oldName: old });
    });
  }

  async function resize(c: Container, height: number, width: number): Promise<void> {
    if (!c.isRunningProcess) throw conflict(`Container ${c.id} is not running`);
    await runtime.resize(c.id, height, width);
    events.emit(c, 'resize', { height: String(height), width: String(width) });
  }

  async function reattach(c: Container): Promise<void> {
    try {
      await parts.stdio.started(c, () => runtime.attach(c.id));
    } catch (err) {
      log.warn('cannot attach to restored container', { id: c.id, error: errorMessage(err) });
    }
    parts.logs.start(c);
    d.health.start(c, false);
  }

  /** Engine shutdown: no restarts from now on; health checks and log copiers stop. */
  async function shutdown(): Promise<void> {
    closing = true;
    d.health.stopAll();
    // exit clean-ups and removals under way finish (bounded: the next start finishes what is left)
    const cleanups = [...set.values()].flatMap((c) => (c.cleanup ? [c.cleanup] : []));
    await withTimeout(Promise.all([...teardowns, ...cleanups]), TEARDOWN_DRAIN_MS);
    await parts.logs.close();
    for (const c of set.values()) {
      if (c.restartTimer) clearTimeout(c.restartTimer);
      parts.stdio.disconnect(c);
    }
  }

  return {
    get closing(): boolean {
      return closing;
    },
    /** No restarts or auto-removals from now on (the engine is closing). */
    beginClosing(): void {
      closing = true;
    },
    /** Resolves once the teardowns of the containers removed so far are done. */
    async settled(): Promise<void> {
      await Promise.all([...teardowns]);
    },
    start,
    handleExit,
    stop,
    kill,
    restart,
    pause,
    unpause,
    wait,
    remove,
    rename,
    resize,
    reattach,
    shutdown,
  };
}
