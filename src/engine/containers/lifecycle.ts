import { setTimeout as sleep } from 'node:timers/promises';
import { conflict, errorMessage, invalidParameter, isKind, notModified } from '../../common/errors.js';
import type { AttachConnection, ExitStatus } from '../runtime/runtime.types.js';
import { type Container, emit, type Internals, removeExecDir, save } from './container.js';
import { HealthMonitor, hasExec, probeCommand } from './health.js';
import type { LogBatchReader, LogReader } from './io.js';
import { ContainerLogs } from './logging.js';
import { normalizeName } from './names.js';
import {
  abortStartNetwork,
  finishStartNetwork,
  releaseEndpoint,
  releaseLinkNames,
  renameLinkNames,
  takeEndpoint,
} from './network.js';
import { mountRootfs, prepareStart, type SpecBuilder, startFailure, unmountRootfs } from './run.js';
import { parseSignal, SIGKILL, SIGTERM } from './signals.js';
import type { WaitCondition, WaitResult } from './types.js';
import { parseTimestampMs } from './units.js';
import { announceVolumeMounts, forgetVolumes } from './volumes.js';

/** Functions the lifecycle needs from the runtime package (injected so tests can fake them). */
export interface RuntimeHelpers {
  buildSpec: SpecBuilder;
  readLogs: LogReader;
  /** The batch form of readLogs (the runtime package's readLogBatches); derived when absent. */
  readLogBatches?: LogBatchReader;
}

export interface Lifecycle {
  start(c: Container, manual: boolean): Promise<void>;
  handleExit(c: Container, status: ExitStatus): Promise<void>;
  stop(c: Container, opts: { timeout?: number; signal?: string }): Promise<void>;
  kill(c: Container, name: string, signal?: string): Promise<void>;
  restart(c: Container, opts: { timeout?: number; signal?: string }): Promise<void>;
  pause(c: Container): Promise<void>;
  unpause(c: Container): Promise<void>;
  wait(c: Container, condition: WaitCondition, signal?: AbortSignal): () => Promise<WaitResult>;
  /** `volumes`: also remove the container's anonymous volumes (rm -v; auto-remove does). */
  remove(c: Container, opts: { force?: boolean; volumes?: boolean }): Promise<void>;
  rename(c: Container, newName: string): Promise<void>;
  resize(c: Container, height: number, width: number): Promise<void>;
  /** Stop health checks and log copiers (engine shutdown; containers keep running). */
  shutdown(): Promise<void>;
  /** Connect to a running container's stdio again (after an engine restart). */
  reattach(c: Container): Promise<void>;
}

const EXIT_WAIT_AFTER_KILL_MS = 30_000;

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

export function createLifecycle(ix: Internals, helpers: RuntimeHelpers): Lifecycle {
  const logs = new ContainerLogs(ix);
  const healthMonitors = new Map<string, HealthMonitor>();

  function startHealth(c: Container, fresh: boolean): void {
    stopHealth(c);
    const cmd = probeCommand(c.record.Config.Healthcheck);
    const runtime = ix.runtime;
    if (!cmd || !hasExec(runtime)) return;
    if (fresh) c.state.Health = { Status: 'starting', FailingStreak: 0, Log: c.state.Health?.Log ?? [] };
    const monitor = new HealthMonitor({ ...ix, runtime }, c, cmd);
    healthMonitors.set(c.id, monitor);
    monitor.start();
  }

  function stopHealth(c: Container): void {
    healthMonitors.get(c.id)?.stop();
    healthMonitors.delete(c.id);
  }

  function connectStdio(c: Container, conn: AttachConnection): void {
    conn.on('stdout', (d: Buffer) => c.hub.broadcast('stdout', d));
    conn.on('stderr', (d: Buffer) => c.hub.broadcast('stderr', d));
    conn.on('error', () => undefined);
    c.hub.connect(conn);
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
          const rootfs = await mountRootfs(ix, c);
          const opts = await prepareStart(ix, c, rootfs, helpers.buildSpec);
          const { pid } = await ix.runtime.start({
            ...opts,
            beforeStart: async () => {
              await finishStartNetwork(ix, c);
              // dockerd's order: network connect, volume mount, start
              announceVolumeMounts(ix, c);
              connectStdio(c, await ix.runtime.attach(c.id));
            },
          });
          c.setRunning(pid);
          startHealth(c, true);
          await save(ix, c);
          logs.start(c);
          emit(ix, c, 'start');
        } catch (err) {
          failed = true;
          const f = startFailure(err, c.record.Path);
          c.hub.exited();
          c.clearRestarting();
          c.state.Error = f.message;
          c.state.ExitCode = f.exitCode;
          c.state.Status = c.record.HasBeenStartedBefore ? 'exited' : 'created';
          if (c.state.Status === 'exited') c.state.Running = false;
          abortStartNetwork(ix, c);
          await ix.runtime.delete(c.id).catch(() => undefined);
          await unmountRootfs(ix, c).catch(() => undefined);
          await save(ix, c).catch(() => undefined);
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
    if (!c.state.Restarting || ix.closing) return;
    c.record.RestartCount++;
    try {
      await start(c, false);
    } catch (err) {
      ix.log.warn('restart by policy failed', { id: c.id, error: errorMessage(err) });
    }
  }

  async function handleExit(c: Container, status: ExitStatus): Promise<void> {
    let autoRemove = false;
    const work = c.lock.run(async () => {
      if (!c.state.Running || c.state.Restarting) return;
      stopHealth(c);
      // everything the process wrote is in its log before anyone hears of the exit
      await logs.finish(c);
      const runMs = status.finishedAt.getTime() - parseTimestampMs(c.state.StartedAt);
      c.setStopped(status.exitCode, status.finishedAt, status.oomKilled, status.finishedNanos);
      c.hub.exited();
      // its exec instances end with it (dockerd's Cleanup)
      ix.execs.forgetContainer(c);
      const endpoint = takeEndpoint(c);
      // Record the exit before the runtime forgets it (a crash in between must not lose it).
      await save(ix, c);
      await ix.runtime
        .delete(c.id)
        .catch((err) => ix.log.warn('runtime delete failed', { id: c.id, error: errorMessage(err) }));
      if (status.oomKilled) emit(ix, c, 'oom');
      // dockerd's order: die, network disconnect, then the cleanup (volume unmount)
      emit(ix, c, 'die', { exitCode: String(status.exitCode) });
      releaseEndpoint(ix, c, endpoint);
      await unmountRootfs(ix, c).catch((err) =>
        ix.log.warn('unmount failed', { id: c.id, error: errorMessage(err) }),
      );
      const decision = ix.closing
        ? { restart: false, delayMs: 0 }
        : c.restart.shouldRestart(status.exitCode, {
            manuallyStopped: c.record.HasBeenManuallyStopped,
            restartCount: c.record.RestartCount,
            runMs: Number.isFinite(runMs) ? runMs : 0,
          });
      if (decision.restart) {
        c.setRestarting();
        c.restartTimer = setTimeout(() => void restartByPolicy(c), decision.delayMs);
        c.restartTimer.unref();
        await save(ix, c);
      } else if (c.hostConfig.AutoRemove) {
        autoRemove = true;
      }
      // Without a restart nothing changed since the exit was saved above: no second write.
      c.events.emit('exit', status.exitCode);
    });
    c.exiting = work;
    try {
      await work;
    } finally {
      if (c.exiting === work) c.exiting = undefined;
    }
    if (autoRemove && !ix.closing && !c.removing) {
      await remove(c, { force: true, volumes: true }).catch((err) =>
        ix.log.warn('auto-remove failed', { id: c.id, error: errorMessage(err) }),
      );
    }
  }

  /** Send a signal; a paused container is resumed so that it gets it (and unpause announced). */
  async function signalContainer(c: Container, sig: number): Promise<void> {
    emit(ix, c, 'kill', { signal: String(sig) });
    await ix.runtime.signal(c.id, sig);
    if (c.state.Paused) {
      await ix.runtime.resume(c.id).catch(() => undefined);
      c.state.Paused = false;
      // the signal may have ended it meanwhile: its exit handling has set the status then
      if (c.isRunningProcess) c.state.Status = 'running';
      await save(ix, c);
      emit(ix, c, 'unpause');
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
      const st = await ix.runtime.exitStatus(c.id).catch(() => null);
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
      await save(ix, c);
      return;
    }
    await save(ix, c);
    const exit = nextExit(c);
    const timeout = stopTimeout(c, opts.timeout);
    await signalContainer(c, sig).catch((err) =>
      ix.log.debug('stop signal failed', { error: errorMessage(err) }),
    );
    if (await awaitExit(c, exit, timeout * 1000)) return;
    await signalContainer(c, SIGKILL).catch((err) =>
      ix.log.debug('kill failed', { error: errorMessage(err) }),
    );
    if (!(await awaitExit(c, exit, EXIT_WAIT_AFTER_KILL_MS))) {
      throw new Error(`container ${c.id} did not exit after SIGKILL`);
    }
  }

  async function stop(c: Container, opts: { timeout?: number; signal?: string }): Promise<void> {
    if (!c.state.Running) throw notModified();
    if (opts.signal) parseSignal(opts.signal);
    await stopRunning(c, opts);
    emit(ix, c, 'stop');
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
        await save(ix, c);
      }
      return;
    }
    if (!c.isRunningProcess) {
      throw conflict(`Cannot kill container: ${name}: Container ${c.id} is not running`);
    }
    if (sig === SIGKILL || sig === stopSig) {
      c.record.HasBeenManuallyStopped = true;
      await save(ix, c);
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
      emit(ix, c, 'stop');
    }
    await start(c, true).catch((err) => {
      if (err && typeof err === 'object' && 'kind' in err && err.kind === 'NotModified') return;
      throw err;
    });
    emit(ix, c, 'restart');
  }

  async function pause(c: Container): Promise<void> {
    await c.lock.run(async () => {
      if (!c.state.Running) throw conflict(`Container ${c.id} is not running`);
      if (c.state.Restarting)
        throw conflict(`Container ${c.id} is restarting, wait until the container is running`);
      if (c.state.Paused) throw conflict(`Container ${c.id} is already paused`);
      await ix.runtime.pause(c.id);
      c.state.Paused = true;
      c.state.Status = 'paused';
      await save(ix, c);
      emit(ix, c, 'pause');
    });
  }

  async function unpause(c: Container): Promise<void> {
    await c.lock.run(async () => {
      if (!c.state.Paused) throw conflict(`Container ${c.id} is not paused`);
      await ix.runtime.resume(c.id);
      c.state.Paused = false;
      c.state.Status = 'running';
      await save(ix, c);
      emit(ix, c, 'unpause');
    });
  }

  function result(c: Container, code: number, error?: string): WaitResult {
    void c;
    return { StatusCode: code, Error: error ? { Message: error } : null };
  }

  function wait(c: Container, condition: WaitCondition, signal?: AbortSignal): () => Promise<WaitResult> {
    // Decide what to wait for now (synchronously), so that an exit between this call and the
    // caller awaiting is not missed.
    if (condition === 'not-running' && !c.state.Running) {
      const now = result(c, c.state.ExitCode);
      return () => Promise.resolve(now);
    }
    let settle: (r: WaitResult) => void = () => undefined;
    let fail: (e: Error) => void = () => undefined;
    const waiting = new Promise<WaitResult>((resolve, reject) => {
      settle = resolve;
      fail = reject;
    });
    const cleanup = () => {
      c.events.off('exit', onExit);
      c.events.off('removed', onRemoved);
      signal?.removeEventListener('abort', onAbort);
    };
    const onExit = (code: number) => {
      if (condition === 'removed') return;
      cleanup();
      settle(result(c, code));
    };
    const onRemoved = (error?: string) => {
      cleanup();
      settle(result(c, c.state.ExitCode, error));
    };
    const onAbort = () => {
      cleanup();
      fail(new Error('client went away'));
    };
    c.events.on('exit', onExit);
    c.events.on('removed', onRemoved);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    return () => waiting;
  }

  async function remove(c: Container, opts: { force?: boolean; volumes?: boolean }): Promise<void> {
    if (c.removing || c.state.RemovalInProgress) {
      throw invalidParameter(`removal of container ${c.name.replace(/^\//, '')} is already in progress`);
    }
    if (c.state.Running && !opts.force) {
      const what = c.state.Restarting ? 'restarting' : c.state.Paused ? 'paused' : 'running';
      throw conflict(
        `cannot remove container "${c.name}": container is ${what}: stop the container before removing or force remove`,
      );
    }
    c.removing = true;
    try {
      await removeNow(c, opts.volumes === true);
    } finally {
      if (!c.removed) c.removing = false;
    }
  }

  async function removeNow(c: Container, volumes = false): Promise<void> {
    if (c.state.Running) {
      c.restart.cancel();
      c.record.HasBeenManuallyStopped = true;
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
    }
    if (c.exiting) await c.exiting.catch(() => undefined);
    await c.lock.run(async () => {
      if (ix.containers.get(c.id) !== c) return;
      c.state.RemovalInProgress = true;
      c.state.Status = 'removing';
      await save(ix, c);
      try {
        await logs.stop(c);
        await ix.runtime.delete(c.id).catch(() => undefined);
        await unmountRootfs(ix, c);
        await ix.images.snapshotter.remove(c.id);
        await removeExecDir(ix, c.id);
        c.removed = true;
        await ix.store.remove(c.id);
        releaseLinkNames(ix, c);
        ix.execs.forgetContainer(c);
      } catch (err) {
        c.removed = false;
        c.state.RemovalInProgress = false;
        c.state.Dead = true;
        c.state.Status = 'dead';
        await save(ix, c).catch(() => undefined);
        c.events.emit('removed', `unable to remove container: ${errorMessage(err)}`);
        throw err;
      }
      ix.containers.delete(c.id);
      ix.names.removeId(c.id);
      c.hub.exited();
      emit(ix, c, 'destroy');
      await forgetVolumes(ix, c, volumes);
      c.events.emit('removed');
    });
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
        ix.names.reserve(name, c.id);
      } catch (err) {
        if (isKind(err, 'Conflict')) throw conflict(`Error when allocating new name: ${errorMessage(err)}`);
        throw err;
      }
      c.record.Name = name;
      try {
        await save(ix, c);
      } catch (err) {
        ix.names.release(name);
        c.record.Name = old;
        throw err;
      }
      ix.names.release(old);
      renameLinkNames(ix, c, old);
      emit(ix, c, 'rename', { oldName: old });
    });
  }

  async function resize(c: Container, height: number, width: number): Promise<void> {
    if (!c.isRunningProcess) throw conflict(`Container ${c.id} is not running`);
    await ix.runtime.resize(c.id, height, width);
    emit(ix, c, 'resize', { height: String(height), width: String(width) });
  }

  async function reattach(c: Container): Promise<void> {
    try {
      connectStdio(c, await ix.runtime.attach(c.id));
    } catch (err) {
      ix.log.warn('cannot attach to restored container', { id: c.id, error: errorMessage(err) });
    }
    logs.start(c);
    startHealth(c, false);
  }

  async function shutdown(): Promise<void> {
    for (const m of healthMonitors.values()) m.stop();
    healthMonitors.clear();
    await logs.close();
  }

  return {
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
