import { EventEmitter } from 'node:events';
import type { HostConfig } from '../../../common/docker-types.js';
import { Mutex } from '../../../common/mutex.js';
import { rfc3339Nano } from '../../../common/time.js';
import type { ContainerRecord, ContainerState } from './record.types.js';
import { ZERO_TIME } from './record.types.js';
import { RestartManager } from './restart.js';

/**
 * One container in memory: its persisted record and HostConfig, the lock its state changes take,
 * and the state transitions (dockerd's State: running, stopped, restarting). What the rooms keep
 * of a running container (its stdio, endpoint, mounted volumes, exec instances) they keep by the
 * container's ID in their own maps.
 */
export class Container {
  readonly lock = new Mutex();
  /**
   * 'stopped' (code: the exit recorded, `wait` answers), 'exit' (code: the exit handled whole,
   * the cleanup done), 'removed' (error?: string).
   */
  readonly events = new EventEmitter();
  readonly restart: RestartManager;
  restartTimer?: NodeJS.Timeout;
  /** Where the rootfs is mounted while the container runs. */
  rootfsMounted = false;
  /** A removal is under way (a second one answers 400). */
  removing = false;
  /** Set once removal deleted the files: nothing may be saved for it any more. */
  removed = false;
  /** Exit handling in progress (so that stop/kill wait for it rather than racing). */
  exiting?: Promise<void>;
  /**
   * After an exit: the runtime's state and the rootfs mount going (off the lock); a start, a
   * borrowed rootfs and a removal's teardown wait for it.
   */
  cleanup?: Promise<void>;
  /**
   * The runtime forgot the container since its last start (the cleanup after its exit deleted
   * it): a removal's teardown need not ask the runtime again.
   */
  runtimeDeleted = false;
  /**
   * Inspect's GraphDriver.Data, computed once: the writable snapshot's paths never change while
   * it exists (its key is the container ID, its parent the image's top layer).
   */
  graphDriverData?: Readonly<Record<string, string>>;

  constructor(
    public record: ContainerRecord,
    public hostConfig: HostConfig,
  ) {
    this.events.setMaxListeners(0);
    this.restart = new RestartManager(hostConfig.RestartPolicy ?? {});
  }

  get id(): string {
    return this.record.ID;
  }

  /** With the leading slash. */
  get name(): string {
    return this.record.Name;
  }

  get state(): ContainerState {
    return this.record.State;
  }

  /** Actor attributes of this container's events: labels, then image and name. */
  attributes(extra: Record<string, string> = {}): Record<string, string> {
    const attrs: Record<string, string> = { ...(this.record.Config.Labels ?? {}) };
    attrs.image = this.record.Config.Image ?? '';
    attrs.name = this.record.Name.replace(/^\//, '');
    Object.assign(attrs, extra);
    const sorted: Record<string, string> = {};
    for (const k of Object.keys(attrs).sort()) sorted[k] = attrs[k] ?? '';
    return sorted;
  }

  setRunning(pid: number): void {
    const s = this.record.State;
    s.Status = 'running';
    s.Running = true;
    s.Paused = false;
    s.Restarting = false;
    s.Dead = false;
    s.OOMKilled = false;
    s.Pid = pid;
    s.ExitCode = 0;
    s.Error = '';
    s.StartedAt = rfc3339Nano();
    this.record.HasBeenStartedBefore = true;
  }

  setStopped(exitCode: number, finishedAt: Date, oomKilled: boolean, finishedNanos = 0): void {
    const s = this.record.State;
    s.Status = 'exited';
    s.Running = false;
    s.Paused = false;
    s.Restarting = false;
    s.Pid = 0;
    s.ExitCode = exitCode;
    s.OOMKilled = oomKilled;
    s.FinishedAt = rfc3339Nano(finishedAt, finishedNanos);
  }

  /** Restart pending: dockerd reports Running and Restarting both true meanwhile. */
  setRestarting(): void {
    const s = this.record.State;
    s.Status = 'restarting';
    s.Running = true;
    s.Restarting = true;
    s.Paused = false;
    s.Pid = 0;
  }

  /** A restart that will not happen after all. */
  clearRestarting(): void {
    const s = this.record.State;
    if (!s.Restarting) return;
    s.Status = 'exited';
    s.Running = false;
    s.Restarting = false;
  }

  get isRunningProcess(): boolean {
    return this.record.State.Running && !this.record.State.Restarting;
  }
}

export function emptyState(): ContainerState {
  return {
    Status: 'created',
    Running: false,
    Paused: false,
    Restarting: false,
    OOMKilled: false,
    Dead: false,
    RemovalInProgress: false,
    Pid: 0,
    ExitCode: 0,
    Error: '',
    StartedAt: ZERO_TIME,
    FinishedAt: ZERO_TIME,
  };
}
