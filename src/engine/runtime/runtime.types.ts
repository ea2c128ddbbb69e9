import type { EventEmitter } from 'node:events';
import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import type { OciResources, OciSpec } from './oci/spec.types.js';

/**
 * The contract between the containers service (which decides what runs) and the runtime layer
 * (which makes the OCI spec and runs it with runc/crun under conmon). The runtime layer owns this
 * file; it may add to it without breaking what is here.
 */

/** Everything the OCI spec of a container is made from. */
export interface SpecInput {
  id: string;
  /** The mounted root filesystem (overlay merged dir). */
  rootfs: string;
  /** The container's Config, already merged with the image config (Env, Cmd, Entrypoint, User...). */
  config: ContainerConfig;
  hostConfig: HostConfig;
  /** Files the engine made for the container, bind-mounted at /etc/hosts, /etc/hostname, /etc/resolv.conf. */
  hostsPath: string;
  hostnamePath: string;
  resolvConfPath: string;
  /**
   * Network namespace: `undefined` = a new one (loopback only), a path = join it (bridge networking,
   * `container:<id>` mode), `'host'` = the host's.
   */
  netns?: string;
  /** Other namespaces to join, for `container:<id>` / `host` modes: type -> path or 'host'. */
  joinNamespaces?: Partial<Record<'pid' | 'ipc' | 'uts', string>>;
  /** cgroups path as the runtime takes it (cgroupfs: `/berth/<id>` or HostConfig.CgroupParent based). */
  cgroupsPath: string;
  /** Extra mounts resolved by the engine (binds, volumes, tmpfs), in order. */
  mounts: SpecMount[];
}

export interface SpecMount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

export interface StartOptions {
  id: string;
  /** Directory for config.json and runtime state of this container (created by the driver). */
  bundleDir: string;
  /** The OCI spec to run (written as the bundle's config.json). */
  spec: OciSpec;
  /** The OCI runtime to run it with (HostConfig.Runtime): `runc` or `crun`; default the driver's. */
  runtime?: string;
  terminal: boolean;
  /** Keep a stdin pipe open (Config.OpenStdin). */
  stdin: boolean;
  /** Close stdin after the first attached client detaches (Config.StdinOnce). */
  stdinOnce: boolean;
  /**
   * Where the monitor writes the container's output (conmon's k8s-file format): the engine turns
   * it into the container's log (logs/LogCopier). Usually `monitorLogPath(id)`. None: no output
   * is written anywhere (LogConfig `none`; attach still works).
   */
  logPath?: string;
  /** Bytes after which the monitor empties its output file on its own (only a bound for when the engine is down). */
  logSizeMax?: number;
  /** Initial console size, for TTY containers. */
  consoleSize?: { height: number; width: number };
  /**
   * Called once the runtime has created the container and before its process runs (`runtime
   * start`): attach here (`driver.attach(id)`) to see all of a short-lived container's output, as
   * `docker run` / `docker start -a` need. A rejection aborts the start (the container is deleted).
   */
  beforeStart?: () => Promise<void>;
}

export interface ExitStatus {
  exitCode: number;
  oomKilled: boolean;
  finishedAt: Date;
  /** Nanoseconds within finishedAt's millisecond, when known (the exit file's mtime has them). */
  finishedNanos?: number;
}

export interface RuntimeState {
  status: 'created' | 'running' | 'paused' | 'stopped';
  pid: number;
}

/** One attached client of a running container's stdio (conmon's attach socket). */
export interface AttachConnection extends EventEmitter {
  // events: 'stdout' (Buffer), 'stderr' (Buffer), 'close' ()
  writeStdin(chunk: Buffer): void;
  /** Close the container's stdin (EOF), as a client ending its input does. */
  closeStdin(): void;
  /** Detach this client; the container keeps running. */
  close(): void;
}

/**
 * Runs containers. Containers survive the engine: a new driver instance finds running containers
 * again by id (state, attach, exit status) after a daemon restart.
 */
export interface RuntimeDriver {
  readonly name: string;
  readonly path: string;
  version(): Promise<string>;
  /** Write the bundle, start the monitor and the container process; resolves when it runs. */
  start(opts: StartOptions): Promise<{ pid: number }>;
  /** Send a signal (number) to the container's init process. */
  signal(id: string, signal: number): Promise<void>;
  pause(id: string): Promise<void>;
  resume(id: string): Promise<void>;
  /** The runtime's view of a container, null when the runtime does not know it. */
  state(id: string): Promise<RuntimeState | null>;
  /** The recorded exit status of a container whose process ended, null if none yet. */
  exitStatus(id: string): Promise<ExitStatus | null>;
  /** Remove runtime state and the monitor's files of a stopped container. */
  delete(id: string): Promise<void>;
  attach(id: string): Promise<AttachConnection>;
  resize(id: string, height: number, width: number): Promise<void>;
  /**
   * The file where the monitor of container `id` writes its output (StartOptions.logPath), in
   * the runtime's own directory for the container (kept until `delete`).
   */
  monitorLogPath(id: string): string;
  /** Ask the monitor to start a new output file at its log path (the engine read the old one). */
  reopenLog(id: string): Promise<void>;
  /** Host pids of the container's processes (top). */
  pids(id: string): Promise<number[]>;
  /** Emits 'exit' (id: string, status: ExitStatus) whenever a container's process ends. */
  readonly events: EventEmitter;
  /** Stop watching (the containers keep running). */
  close(): Promise<void>;
}

/** What an exec instance runs (the exec create body's fields). */
export interface ExecConfig {
  Cmd: string[];
  Env?: string[] | null;
  /** `user`, `user:group`, `uid`, `uid:gid`; empty: the container's user. */
  User?: string;
  /** Empty: the container's working directory. */
  WorkingDir?: string;
  Tty?: boolean;
  Privileged?: boolean;
  /** The container's HostConfig.GroupAdd (supplementary groups when User is given). */
  GroupAdd?: string[] | null;
}

export interface ExecOptions {
  /** The container (running). */
  id: string;
  /** The exec instance; names its session (attachExec, resizeExec). */
  execId: string;
  config: ExecConfig;
  /** Open a stdin pipe (AttachStdin); closed when the attached client ends its input or goes away. */
  stdin: boolean;
  consoleSize?: { height: number; width: number };
  /**
   * Called once the session's attach socket is ready and before the process runs: attach here
   * (`attachExec(execId)`) to see all output. Without it the process starts at once (detached).
   */
  beforeStart?: () => Promise<void>;
}

export interface ExecProcess {
  pid: number;
  /** Resolves when the process ended: its exit code (128+signal when killed), or -1 and why. */
  exited: Promise<{ exitCode: number; error?: string }>;
}

/** Exec sessions (runtime exec under conmon). They do not survive the engine. */
export interface ExecDriver {
  exec(opts: ExecOptions): Promise<ExecProcess>;
  attachExec(execId: string): Promise<AttachConnection>;
  resizeExec(execId: string, height: number, width: number): Promise<void>;
}

/** One blkio counter (cgroup v1 `blkio.throttle.*_recursive` line). */
export interface BlkioEntry {
  major: number;
  minor: number;
  op: string;
  value: number;
}

/** A container's resource usage, read from its cgroups (the fields of docker's stats). */
export interface ContainerStats {
  read: Date;
  pids: { current: number; limit?: number };
  cpu: {
    /** nanoseconds */
    totalUsage: number;
    percpuUsage: number[];
    usageInKernelmode: number;
    usageInUsermode: number;
    /** the host's CPU time, nanoseconds (docker's system_cpu_usage) */
    systemUsage: number;
    onlineCpus: number;
    throttling: { periods: number; throttledPeriods: number; throttledTime: number };
  };
  memory: {
    usage: number;
    maxUsage: number;
    failcnt: number;
    /** the limit, or the host's memory when it is larger (as dockerd) */
    limit: number;
    stats: Record<string, number>;
  };
  blkio: { ioServiceBytesRecursive: BlkioEntry[]; ioServicedRecursive: BlkioEntry[] };
}

/** Resource usage and limits of running containers (docker stats, docker update). */
export interface ResourceDriver {
  /** Usage read from the container's cgroups; null when they are gone. */
  stats(id: string): Promise<ContainerStats | null>;
  /** Change the limits of a running container (`runtime update`); see buildResources(). */
  update(id: string, resources: OciResources): Promise<void>;
}

/** What createRuntime returns. */
export interface Runtime extends RuntimeDriver, ExecDriver, ResourceDriver {}
