import type { Readable } from 'node:stream';
import type { ContainerConfig, EndpointSettings, HostConfig, StringMap } from '../../common/docker-types.js';
import type { Endpoint } from '../network/network.types.js';
import type { PathStat } from './archive.js';
import type { ExecCreateRequest, ExecSession } from './exec.js';
import type { LinkRecord } from './links.js';
import type { StatsOptions } from './stats.js';
import type { MountPoint } from './volumes.js';

/** Container states as the API names them (list State, inspect State.Status). */
export type ContainerStatus =
  | 'created'
  | 'restarting'
  | 'running'
  | 'removing'
  | 'paused'
  | 'exited'
  | 'dead';

export interface HealthLogEntry {
  Start: string;
  End: string;
  ExitCode: number;
  Output: string;
}

export interface HealthState {
  Status: 'starting' | 'healthy' | 'unhealthy' | 'none';
  FailingStreak: number;
  Log: HealthLogEntry[];
}

/** Persisted state (part of config.v2.json). */
export interface ContainerState {
  Status: ContainerStatus;
  Running: boolean;
  Paused: boolean;
  Restarting: boolean;
  OOMKilled: boolean;
  Dead: boolean;
  RemovalInProgress: boolean;
  Pid: number;
  ExitCode: number;
  Error: string;
  StartedAt: string;
  FinishedAt: string;
  Health?: HealthState;
}

export interface NetworkingConfig {
  EndpointsConfig?: Record<string, EndpointSettings | null> | null;
}

/** Everything persisted for one container in `<data-root>/containers/<id>/config.v2.json`. */
export interface ContainerRecord {
  ID: string;
  /** RFC 3339 with nanoseconds. */
  Created: string;
  Path: string;
  Args: string[];
  /** The merged configuration (request + image defaults). */
  Config: ContainerConfig;
  /** Image ID (`sha256:...`). */
  Image: string;
  /** Name with leading slash. */
  Name: string;
  Driver: string;
  Platform: string;
  RestartCount: number;
  HasBeenStartedBefore: boolean;
  HasBeenManuallyStopped: boolean;
  MountLabel: string;
  ProcessLabel: string;
  AppArmorProfile: string;
  State: ContainerState;
  ResolvConfPath: string;
  HostnamePath: string;
  HostsPath: string;
  LogPath: string;
  NetworkingConfig: NetworkingConfig;
  /** The network namespace file of the current or last bridge run ('' when none yet). */
  SandboxKey: string;
  /**
   * The network sandbox of the current or last run: dockerd keeps showing its ID, key and network
   * ID after the container stopped.
   */
  Sandbox?: SandboxRecord;
  /** The network endpoint while the container runs (address, MAC...); gone once it stopped. */
  Endpoint?: Endpoint;
  /** Legacy links (HostConfig.Links, resolved at create to the containers they name). */
  Links?: LinkRecord[];
  /** Volumes and VolumesFrom mounts resolved at create (binds and tmpfs stay in HostConfig). */
  MountPoints?: MountPoint[];
  /** Container labels for events are Config.Labels. */
}

export interface SandboxRecord {
  ID: string;
  /** The namespace file ('' when the runtime made the namespace, or the host's). */
  Key: string;
  /** `bridge`, `none` or `host`. */
  Network: string;
  NetworkID: string;
}

export const ZERO_TIME = '0001-01-01T00:00:00Z';

/** What the API layer passes to create. */
export interface CreateRequest {
  name?: string;
  platform?: string;
  config: ContainerConfig & { HostConfig?: HostConfig; NetworkingConfig?: NetworkingConfig };
  hostConfig: HostConfig;
  networkingConfig: NetworkingConfig;
  /** What the request's API version decides (the API layer works it out). */
  options: CreateOptions;
}

/** Create behaviour that depends on the client's API version, as plain choices. */
export interface CreateOptions {
  /** HostConfig.IpcMode when none is given: `private` (API 1.40+) or `shareable` before. */
  defaultIpcMode: 'private' | 'shareable';
  /** Whether HostConfig.KernelMemory is taken (before API 1.42; dropped from then on). */
  kernelMemory: boolean;
}

export interface CreateResult {
  Id: string;
  Warnings: string[];
}

export interface ListOptions {
  all?: boolean;
  limit?: number;
  since?: string;
  before?: string;
  size?: boolean;
  filters?: Map<string, string[]>;
}

export type WaitCondition = 'not-running' | 'next-exit' | 'removed';

export interface WaitResult {
  StatusCode: number;
  Error: { Message: string } | null;
}

export interface LogsOptions {
  stdout: boolean;
  stderr: boolean;
  /** A Date, or unix nanoseconds (exact, as the API gives them). */
  since?: Date | bigint;
  until?: Date | bigint;
  tail?: number;
  timestamps: boolean;
  follow: boolean;
  details: boolean;
  signal?: AbortSignal;
}

export interface LogChunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
}

export interface AttachOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  stream: boolean;
  logs: boolean;
  detachKeys?: string;
}

/** A live attach session: output arrives through callbacks; input through write/end. */
export interface AttachSession {
  tty: boolean;
  /** Write client input (stdin) to the container; detach keys are recognised here. */
  write(chunk: Buffer): void;
  /** The client ended its input (half-close). */
  endInput(): void;
  /** The client went away. */
  close(): void;
  /** Resolves when the session is over (container stopped, detached, or closed). */
  done: Promise<'exited' | 'detached' | 'closed'>;
}

export interface AttachSink {
  output(stream: 'stdout' | 'stderr', data: Buffer): void;
  /** The session is over: flush and end the client connection. */
  end(reason: 'exited' | 'detached' | 'closed'): void;
}

export interface TopResult {
  Titles: string[];
  Processes: string[][];
}

/** Full inspect view (latest API version); the routes adapt it per version. */
export type InspectView = Record<string, unknown>;
export type ListItemView = Record<string, unknown>;

/** A container as other engine services (exec, stats, update) need to see it. */
export interface ContainerSummary {
  id: string;
  /** With the leading slash. */
  name: string;
  running: boolean;
  paused: boolean;
  restarting: boolean;
  pid: number;
  config: ContainerConfig;
  hostConfig: HostConfig;
  /** Actor attributes for this container's events (labels, image, name). */
  attributes(extra?: Record<string, string>): Record<string, string>;
}

export interface ContainerService {
  create(req: CreateRequest): Promise<CreateResult>;
  list(opts: ListOptions): Promise<ListItemView[]>;
  inspect(idOrName: string, opts?: { size?: boolean }): Promise<InspectView>;
  start(idOrName: string, opts?: { detachKeys?: string }): Promise<void>;
  stop(idOrName: string, opts?: { timeout?: number; signal?: string }): Promise<void>;
  restart(idOrName: string, opts?: { timeout?: number; signal?: string }): Promise<void>;
  kill(idOrName: string, signal?: string): Promise<void>;
  /** Resolves to a function that waits for the condition (validation first, then blocking). */
  wait(idOrName: string, condition: WaitCondition, signal?: AbortSignal): Promise<() => Promise<WaitResult>>;
  remove(idOrName: string, opts: { force?: boolean; volumes?: boolean; link?: boolean }): Promise<void>;
  rename(idOrName: string, newName: string): Promise<void>;
  pause(idOrName: string): Promise<void>;
  unpause(idOrName: string): Promise<void>;
  top(idOrName: string, psArgs?: string): Promise<TopResult>;
  /** Validates, then gives the log lines; `tty` tells whether to frame them. */
  logs(
    idOrName: string,
    opts: LogsOptions,
  ): Promise<{
    tty: boolean;
    /** One message at a time. */
    lines: AsyncIterable<LogChunk>;
    /** The same messages in batches (one per chunk of the log read); iterate one of the two. */
    batches: AsyncIterable<LogChunk[]>;
  }>;
  /** Validates (404, 409 paused) and returns the container's TTY mode and an attach starter. */
  attach(
    idOrName: string,
    opts: AttachOptions,
  ): Promise<{ tty: boolean; begin(sink: AttachSink): Promise<AttachSession> }>;
  resize(idOrName: string, height: number, width: number): Promise<void>;
  /** HEAD /containers/{id}/archive: the stat of a path (404 when missing). */
  statPath(idOrName: string, path: string): Promise<PathStat>;
  /** GET /containers/{id}/archive: the stat and a tar of a path (docker cp out of a container). */
  archivePath(
    idOrName: string,
    path: string,
  ): Promise<{ stat: PathStat; stream: Readable; done: Promise<void>; cancel(): void }>;
  /** PUT /containers/{id}/archive: a tar extracted into a directory of the container (docker cp in). */
  extractTo(
    idOrName: string,
    path: string,
    body: Readable,
    opts: { noOverwriteDirNonDir: boolean; copyUIDGID: boolean },
  ): Promise<void>;
  /** GET /containers/{id}/changes (docker diff): null when nothing changed. */
  changes(idOrName: string): Promise<Array<{ Path: string; Kind: number }> | null>;
  /** GET /containers/{id}/export: the filesystem as a tar stream (`done` fails if tar did); `cancel` stops it. */
  export(idOrName: string): Promise<{ stream: Readable; done: Promise<void>; cancel(): void }>;
  /** POST /containers/{id}/update: the warnings; 400 for bad or conflicting settings. */
  update(idOrName: string, settings: HostConfig, opts: { kernelMemory: boolean }): Promise<string[]>;
  /** GET /containers/{id}/stats: 404 first; then the objects to send, one per line. */
  stats(idOrName: string, opts: StatsOptions): Promise<AsyncIterable<unknown>>;
  /** POST /containers/{id}/exec: 404, 409 (not running, paused, restarting), 400 (no command). */
  execCreate(idOrName: string, req: ExecCreateRequest): Promise<{ Id: string }>;
  /** Whether an exec instance exists (404 `No such exec instance` otherwise). */
  execCheck(execId: string): void;
  /**
   * Start an exec: detached without a sink (resolves once it runs), else attached to the sink
   * (the session takes the client's input). 409 when it runs or ran already.
   */
  execStart(
    execId: string,
    opts: { tty: boolean; consoleSize?: { height: number; width: number }; sink?: AttachSink },
  ): Promise<ExecSession | undefined>;
  execInspect(execId: string): Record<string, unknown>;
  execResize(execId: string, height: number, width: number): Promise<void>;
  /** POST /containers/prune: stopped containers matching until/label/label!. */
  prune(
    filters: Map<string, string[]>,
  ): Promise<{ ContainersDeleted: string[] | null; SpaceReclaimed: number }>;
  /** 404 `No such container: x` when unknown. */
  lookup(idOrName: string): ContainerSummary;
  /** Container counts by state (GET /info). */
  counts(): { total: number; running: number; paused: number; stopped: number };
  /** Full ID of a container by ID, prefix or name (404 otherwise). */
  resolveId(idOrName: string): string;
  /** Stop watching; running containers keep running (live restore). */
  close(): Promise<void>;
}

export type { StringMap };
