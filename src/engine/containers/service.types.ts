import type { Readable } from 'node:stream';
import type { EndpointSettings, HostConfig } from '../../common/docker-types.js';
import type { Filters } from '../../common/filters.js';
import type { Change } from './archive/changes.js';
import type { PathStat } from './archive/container-fs.js';
import type { CommitRequest } from './core/commit.js';
import type { CreateRequest, CreateResult } from './core/create.js';
import type { WaitCondition, WaitResult } from './core/lifecycle.js';
import type { StatsOptions, StatsView } from './core/stats.js';
import type { TopResult } from './core/top.js';
import type { ContainerInspect, ContainerSummary } from './core/views.types.js';
import type { ExecCreateRequest, ExecInspect, ExecSession, ExecStartOptions } from './exec/exec.types.js';
import type {
  AttachOptions,
  AttachSession,
  AttachSink,
  LogChunk,
  LogRecord,
  LogsOptions,
} from './io/io.types.js';

/**
 * The containers service as the API layer and the other services see it. Each routes file takes
 * the part it needs (a Pick of this); containers.service.ts implements it with the rooms: core/
 * (model, store, state machine), io/, exec/, archive/, net/, mounts/.
 */

export interface ListOptions {
  all?: boolean;
  limit?: number;
  since?: string;
  before?: string;
  size?: boolean;
  filters?: Filters;
}

export interface StopOptions {
  /** Seconds before SIGKILL; -1 waits forever; the container's StopTimeout (or 10) when absent. */
  timeout?: number;
  signal?: string;
}

/** A tar being made (export, archive): `done` fails if tar did; `cancel` stops it. */
export interface TarOutput {
  stream: Readable;
  done: Promise<void>;
  cancel(): void;
}

/** Container counts by state (GET /info). */
export interface ContainerCounts {
  total: number;
  running: number;
  paused: number;
  stopped: number;
}

export interface ContainerService {
  // ---- state (containers.routes.ts) ----
  create(req: CreateRequest): Promise<CreateResult>;
  list(opts: ListOptions): Promise<ContainerSummary[]>;
  inspect(idOrName: string, opts?: { size?: boolean }): Promise<ContainerInspect>;
  start(idOrName: string, opts?: { detachKeys?: string }): Promise<void>;
  stop(idOrName: string, opts?: StopOptions): Promise<void>;
  restart(idOrName: string, opts?: StopOptions): Promise<void>;
  kill(idOrName: string, signal?: string): Promise<void>;
  /** Resolves to a function that waits for the condition (validation first, then blocking). */
  wait(idOrName: string, condition: WaitCondition, signal?: AbortSignal): Promise<() => Promise<WaitResult>>;
  /** `link`: remove the legacy link named `idOrName` (`/parent/alias`) instead. */
  remove(idOrName: string, opts: { force?: boolean; volumes?: boolean; link?: boolean }): Promise<void>;
  rename(idOrName: string, newName: string): Promise<void>;
  /** POST /networks/{id}/connect: a running container gets the interface at once. */
  connectNetwork(containerRef: string, network: string, settings: EndpointSettings): Promise<void>;
  /** POST /networks/{id}/disconnect (Force: a network that is gone too). */
  disconnectNetwork(containerRef: string, network: string, force: boolean): Promise<void>;
  pause(idOrName: string): Promise<void>;
  unpause(idOrName: string): Promise<void>;
  top(idOrName: string, psArgs?: string): Promise<TopResult>;
  resize(idOrName: string, height: number, width: number): Promise<void>;
  /** POST /containers/{id}/update: the warnings; 400 for bad or conflicting settings. */
  update(idOrName: string, settings: HostConfig, opts: { kernelMemory: boolean }): Promise<string[]>;
  /** GET /containers/{id}/stats: 404 first; then the objects to send, one per line. */
  stats(idOrName: string, opts: StatsOptions): Promise<AsyncIterable<StatsView>>;
  /**
   * POST /commit: a new image from the container's changes and config (404 no container, 409
   * dead or being removed, 400 bad repo/tag or change); returns the image ID.
   */
  commit(idOrName: string, req: CommitRequest): Promise<string>;
  /** POST /containers/prune: stopped containers matching until/label/label!. */
  prune(filters: Filters): Promise<{ ContainersDeleted: string[] | null; SpaceReclaimed: number }>;

  // ---- streams (streams.routes.ts) ----
  /** Validates, then gives the log lines; `tty` tells whether to frame them. */
  logs(
    idOrName: string,
    opts: LogsOptions,
  ): Promise<{
    tty: boolean;
    /** One message at a time. */
    lines: AsyncIterable<LogChunk>;
    /** The same messages in batches (one per chunk of the log read); iterate one of these. */
    batches: AsyncIterable<LogChunk[]>;
    /** The same messages as JSON records, in batches (format=json). */
    records: AsyncIterable<LogRecord[]>;
  }>;
  /** Validates (404, 409 paused) and returns the container's TTY mode and an attach starter. */
  attach(
    idOrName: string,
    opts: AttachOptions,
  ): Promise<{ tty: boolean; begin(sink: AttachSink): Promise<AttachSession> }>;

  // ---- archive (archive.routes.ts) ----
  /** HEAD /containers/{id}/archive: the stat of a path (404 when missing). */
  statPath(idOrName: string, path: string): Promise<PathStat>;
  /** GET /containers/{id}/archive: the stat and a tar of a path (docker cp out of a container). */
  archivePath(idOrName: string, path: string): Promise<TarOutput & { stat: PathStat }>;
  /**
   * PUT /containers/{id}/archive: a tar extracted into a directory of the container (docker cp
   * in), received whole first (`declaredLength`: the request's Content-Length; 413 over the cap).
   */
  extractTo(
    idOrName: string,
    path: string,
    body: Readable,
    opts: { noOverwriteDirNonDir: boolean; copyUIDGID: boolean; declaredLength?: number },
  ): Promise<void>;
  /** GET /containers/{id}/changes (docker diff): null when nothing changed. */
  changes(idOrName: string): Promise<Change[] | null>;
  /** GET /containers/{id}/export: the filesystem as a tar stream. */
  export(idOrName: string): Promise<TarOutput>;

  // ---- exec (exec.routes.ts) ----
  /** POST /containers/{id}/exec: 404, 409 (not running, paused, restarting), 400 (no command). */
  execCreate(idOrName: string, req: ExecCreateRequest): Promise<{ Id: string }>;
  /** Whether an exec instance exists (404 `No such exec instance` otherwise). */
  execCheck(execId: string): void;
  /**
   * Start an exec: detached without a sink (resolves once it runs), else attached to the sink
   * (the session takes the client's input). 409 when it runs or ran already.
   */
  execStart(execId: string, opts: ExecStartOptions): Promise<ExecSession | undefined>;
  execInspect(execId: string): ExecInspect;
  execResize(execId: string, height: number, width: number): Promise<void>;

  // ---- the engine ----
  /** Container counts by state (GET /info). */
  counts(): ContainerCounts;
  /** Full ID of a container by ID, prefix or name (404 otherwise). */
  resolveId(idOrName: string): string;
  /** Stop watching; running containers keep running (live restore). */
  close(): Promise<void>;
}
