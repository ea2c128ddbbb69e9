import { EventEmitter } from 'node:events';
import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { HostConfig } from '../../common/docker-types.js';
import { errorMessage, invalidParameter, isKind, notFound } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { Mutex } from '../../common/mutex.js';
import { rfc3339Nano } from '../../common/time.js';
import type { EventsService } from '../events/events.service.js';
import type { ImageResolver } from '../images/images.types.js';
import type { ContainerNetworking, PendingAttach } from '../network/network.types.js';
import type { RuntimeDriver } from '../runtime/runtime.types.js';
import type { Snapshotter } from '../storage/snapshotter.types.js';
import type { VolumeService } from '../volumes/volumes.types.js';
import type { ExecStore } from './exec.js';
import type { HostsEntry } from './files.js';
import type { NameRegistry } from './names.js';
import { RestartManager } from './restart.js';
import type { ContainerStore } from './store.js';
import { StdioHub } from './streams.js';
import { type ContainerRecord, type ContainerState, ZERO_TIME } from './types.js';

/** One container in memory: its persisted record plus what only lives while the engine runs. */
export class Container {
  readonly lock = new Mutex();
  /** 'exit' (after die handling), 'removed' (error?: string), 'stopped-by-user'. */
  readonly events = new EventEmitter();
  readonly restart: RestartManager;
  readonly hub: StdioHub;
  restartTimer?: NodeJS.Timeout;
  /** Where the rootfs is mounted while the container runs. */
  rootfsMounted = false;
  /** Its volumes are mounted (between start and exit): unmount them once. */
  volumesMounted = false;
  /** Their `mount` events went out (after `network connect`): their unmounts are announced too. */
  volumeMountsAnnounced = false;
  /** A removal is under way (a second one answers 400). */
  removing = false;
  /** Set once removal deleted the files: nothing may be saved for it any more. */
  removed = false;
  /** The bridge attachment of a start under way (released when the start fails). */
  startingNetwork?: { attach: PendingAttach; linkHosts: HostsEntry[] };
  /** Exec instances of this container (inspect ExecIDs). */
  readonly execIds = new Set<string>();
  /** Exit handling in progress (so that stop/kill wait for it rather than racing). */
  exiting?: Promise<void>;
  /**
   * Inspect's GraphDriver.Data, computed once: the writable snapshot's paths never change while
   * it exists (its key is the container ID, its parent the image's top layer).
   */
  graphDriverData?: Readonly<Record<string, string>>;

  constructor(
    public record: ContainerRecord,
    public hostConfig: HostConfig,
    onDetach: () => void,
  ) {
    this.events.setMaxListeners(0);
    this.restart = new RestartManager(hostConfig.RestartPolicy ?? {});
    this.hub = new StdioHub(
      {
        stdinOnce: () => this.record.Config.StdinOnce === true,
        openStdin: () => this.record.Config.OpenStdin === true,
      },
      onDetach,
    );
  }

  get id(): string {
    return this.record.ID;
  }

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

/** Everything the service's parts share. */
export interface Internals {
  dataRoot: string;
  execRoot: string;
  events: EventsService;
  images: ImageResolver & { snapshotter: Snapshotter };
  runtime: RuntimeDriver;
  /** Named and anonymous volumes (absent in unit tests that need none). */
  volumes?: VolumeService;
  /** The default bridge and predefined networks (absent: every container gets loopback only). */
  network?: ContainerNetworking;
  log: Logger;
  store: ContainerStore;
  names: NameRegistry;
  containers: Map<string, Container>;
  /** Creates under way: the new container's ID and the image it was resolved to (rmi sees them). */
  creating: Map<string, string>;
  /** Exec instances (in memory: they do not outlive the engine, nor their container's run). */
  execs: ExecStore;
  closing: boolean;
}

export function get(ix: Internals, idOrName: string): Container {
  const id = ix.names.resolve(idOrName);
  const c = ix.containers.get(id);
  // a name reserved by a create still under way: not a container yet (dockerd: no such container)
  if (!c) throw notFound(`No such container: ${idOrName}`);
  return c;
}

/** A container named at create (`container:x`, VolumesFrom): its ID, or a 400 (create.ts checkReferences says why). */
export function resolveForCreate(ix: Internals, idOrName: string): string {
  try {
    return ix.names.resolve(idOrName);
  } catch (err) {
    if (isKind(err, 'NotFound')) throw invalidParameter(errorMessage(err));
    throw err;
  }
}

export async function save(ix: Internals, c: Container, withHostConfig = false): Promise<void> {
  if (c.removed) return;
  await ix.store.save(c.record, withHostConfig ? c.hostConfig : undefined);
}

export function emit(ix: Internals, c: Container, action: string, extra: Record<string, string> = {}): void {
  ix.events.publish('container', action, c.id, c.attributes(extra));
}

/**
 * Where a container's rootfs is mounted: the snapshotter's merged directory when it names one
 * (so that inspect's GraphDriver.Data.MergedDir is the real mount), else one under the exec root.
 */
export async function rootfsPath(ix: Internals, id: string): Promise<string> {
  const snap = ix.images.snapshotter as Snapshotter & {
    paths?: (key: string) => Promise<{ MergedDir: string }>;
  };
  if (snap.paths) {
    try {
      return (await snap.paths(id)).MergedDir;
    } catch {
      // fall back
    }
  }
  return join(ix.execRoot, 'containers', id, 'rootfs');
}

export function bundlePath(ix: Internals, id: string): string {
  return join(ix.execRoot, 'containers', id, 'bundle');
}

/**
 * Remove a removed container's directory under the exec root. Non-recursive on purpose: only
 * empty directories go, so nothing still mounted there can be reached.
 */
export async function removeExecDir(ix: Internals, id: string): Promise<void> {
  const dir = join(ix.execRoot, 'containers', id);
  for (const sub of ['rootfs', 'bundle']) await rmdir(join(dir, sub)).catch(() => undefined);
  await rmdir(dir).catch(() => undefined);
}
