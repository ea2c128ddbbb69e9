import { EventEmitter } from 'node:events';
import { constants, existsSync } from 'node:fs';
import { access, open } from 'node:fs/promises';
import { join } from 'node:path';
import {
  conflict,
  errnoCode,
  errorMessage,
  invalidParameter,
  notFound,
  systemError,
} from '../../../common/errors.js';
import {
  mkdir,
  readdir,
  readFile,
  rm,
  rmdir,
  rmSmallTree,
  stat,
  writeFile,
} from '../../../common/fs/quick.js';
import type { Logger } from '../../../common/log.js';
import { buildExecProcess } from '../oci/exec.js';
import { type ProcessLimit, realSpecHost } from '../oci/host.js';
import { specToJson } from '../oci/index.js';
import type { Rlimit } from '../oci/rlimits.js';
import type { OciProcess, OciResources, OciSpec } from '../oci/spec.types.js';
import type {
  AttachConnection,
  ContainerStats,
  ExecOptions,
  ExecProcess,
  ExitStatus,
  Runtime,
  RuntimeState,
  StartOptions,
} from '../runtime.types.js';
import { ConmonAttach } from './attach.js';
import { applyBlkioDevices } from './blkio.js';
import {
  cpuSharesRefusal,
  fileBindsForCrun,
  mountsForCrun,
  removeCpuQuota,
  resourcesForCrun,
} from './crun-compat.js';
import { ExitWatcher } from './exits.js';
import { deleteStopped, runtimeStateExists } from './fast-delete.js';
import { startCreatedCrun } from './fast-start.js';
import { type OciCli, runcStyleMessage, runtimeMessage } from './oci-cli.js';
import type { MonitorStart, ProcessRunner } from './process.js';
import { type SeccompBpfCache, seccompBpfAnnotation } from './seccomp-bpf.js';
import { ShimExecAttach } from './shim-exec.js';
import { readCgroupStats } from './stats.js';

/** What the driver remembers of a container it started, to find it again after a restart. */
export interface MonitorMeta {
  id: string;
  bundleDir: string;
  /** The monitor's output file; none for LogConfig `none`. */
  logPath?: string;
  terminal: boolean;
  stdin: boolean;
  stdinOnce: boolean;
  cgroupsPath?: string;
  runtime: string;
}

/** An OCI runtime the driver can run containers with. */
export interface RuntimeEntry {
  cli: OciCli;
  /** Host preparation before its first container (crun: cgroup controllers moved off v2). */
  prepare?: () => Promise<void>;
  /** crun: seccomp filters compiled once, handed over as `run.oci.seccomp_bpf_data`. */
  seccompBpf?: SeccompBpfCache;
}

export interface ConmonDriverOptions {
  /** The default runtime (a container started without `StartOptions.runtime`). */
  name: string;
  /** The runtimes by name, the default's included. */
  runtimes: ReadonlyMap<string, RuntimeEntry>;
  conmonPath: string;
  execRoot: string;
  dataRoot: string;
  log: Logger;
  runner: ProcessRunner;
}

/** Bundle files the driver and conmon make; delete removes them (and the dir when then empty). */
const bundleFiles = ['config.json', 'pidfile', 'conmon.pid', 'ctl', 'winsz', 'attach', 'oom', 'update.json'];

/** Whether `path` can be executed (a sealed copy's /proc path vanishes with its helper). */
async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Lower rlimits above the daemon's own hard limits (the runtime cannot raise them and fails). */
export function capRlimits(rlimits: Rlimit[], limits: Map<string, ProcessLimit>): Rlimit[] {
  return rlimits.map((r) => {
    const own = limits.get(r.type.replace(/^RLIMIT_/, '').toLowerCase());
    if (!own || own.hard < 0) return r;
    const cap = (v: number) => (v < 0 || v > own.hard ? own.hard : v);
    const hard = cap(r.hard);
    return { ...r, soft: Math.min(cap(r.soft), hard), hard };
  });
}

/** Ids name files and directories (and conmon's exit files, whose temp names have a dot). */
const validId = /^[A-Za-z0-9_-]+$/;

/** conmon's ctl fifo messages. */
const WIN_RESIZE_EVENT = 1;
const REOPEN_LOGS_EVENT = 2;

/**
 * Runs containers with runc/crun under conmon. conmon runs `runtime create`, keeps the container's
 * stdio (log file, attach socket, TTY), writes exit files, and survives the engine.
 */
export class ConmonDriver implements Runtime {
  readonly events = new EventEmitter();
  readonly name: string;
  readonly path: string;
  private readonly exitDir: string;
  private readonly execDir: string;
  private readonly stateDir: string;
  private readonly watcher: ExitWatcher;
  private readonly metas = new Map<string, MonitorMeta>();
  private readonly reporting = new Set<string>();
  /** Exec sessions run without conmon (berth-sys's exec shim), by exec id, until they end. */
  private readonly shimExecs = new Map<string, ShimExecAttach>();
  /** Each started container's spec as exec reads it (config.json), by its start's meta. */
  private readonly specs = new WeakMap<MonitorMeta, OciSpec>();
  private execDirReady: Promise<void> | undefined;
  private closed = false;
  /** The daemon's own limits: no rlimit passed to the runtime goes above them. */
  private limits = new Map<string, ProcessLimit>();

  private readonly runtime: RuntimeEntry;

  constructor(private readonly o: ConmonDriverOptions) {
    const runtime = o.runtimes.get(o.name);
    if (!runtime) throw new Error(`no runtime entry for the default runtime ${o.name}`);
    this.runtime = runtime;
    this.name = o.name;
    this.path = runtime.cli.path;
    this.exitDir = join(o.execRoot, 'exits');
    this.execDir = join(o.execRoot, 'execs');
    this.stateDir = join(o.dataRoot, 'runtime');
    this.watcher = new ExitWatcher(this.exitDir, (id) => void this.reportExit(id));
    this.events.on('newListener', (event) => {
      // exits that happened while nobody listened (engine down, or before subscribing)
      if (event === 'exit') setImmediate(() => void this.reconcile());
    });
  }

  async init(): Promise<void> {
    this.limits = await realSpecHost.processLimits().catch(() => new Map());
    await Promise.all([
      mkdir(this.exitDir, { recursive: true }),
      mkdir(this.stateDir, { recursive: true }),
      ...[...this.o.runtimes.values()].map((r) => mkdir(r.cli.root, { recursive: true, mode: 0o700 })),
    ]);
    this.watcher.start();
    await this.removeStaleExecs();
  }

  /** Exec sessions do not survive the engine: remove the directories of those whose conmon is gone. */
  private async removeStaleExecs(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.execDir);
    } catch {
      return;
    }
    for (const name of names) {
      const dir = join(this.execDir, name);
      if (await this.monitorAlive(join(dir, 'conmon.pid'), name)) continue;
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  private async monitorAlive(pidFile: string, id: string): Promise<boolean> {
    try {
      return await this.isMonitor(Number.parseInt(await readFile(pidFile, 'utf8'), 10), id);
    } catch {
      return false;
    }
  }

  /** Whether `pid` is conmon for `id`. */
  private async isMonitor(pid: number, id: string): Promise<boolean> {
    if (!(pid > 1)) return false;
    try {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      return cmdline.includes('conmon') && cmdline.includes(id);
    } catch {
      return false;
    }
  }

  private persistDir(id: string): string {
    return join(this.stateDir, id);
  }

  async version(): Promise<string> {
    return this.runtime.cli.version();
  }

  /** The runtimes containers may choose (StartOptions.runtime). */
  get runtimeNames(): string[] {
    return [...this.o.runtimes.keys()];
  }

  /** The runtime's error message for a process it could not start (crun's in runc's words). */
  private message(runtime: string, raw: string | undefined, arg0 = ''): string {
    const msg = runtimeMessage(raw ?? '') || 'unknown error';
    return runtime === 'crun' ? runcStyleMessage(msg, arg0) : msg;
  }

  /** The runtime a container was started with (its meta), the default one for unknown ids. */
  private async runtimeOf(id: string): Promise<{ name: string; cli: OciCli }> {
    const meta = this.metas.get(id) ?? (await this.meta(id).catch(() => null));
    const entry = meta ? this.o.runtimes.get(meta.runtime) : undefined;
    return meta && entry
      ? { name: meta.runtime, cli: entry.cli }
      : { name: this.name, cli: this.runtime.cli };
  }

  private async meta(id: string): Promise<MonitorMeta> {
    const cached = this.metas.get(id);
    if (cached) return cached;
    try {
      const m = JSON.parse(await readFile(join(this.persistDir(id), 'meta.json'), 'utf8')) as MonitorMeta;
      this.metas.set(id, m);
      return m;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw notFound(`No such container: ${id}`);
      throw err;
    }
  }

  async start(opts: StartOptions): Promise<{ pid: number }> {
    const { id, bundleDir } = opts;
    if (!validId.test(id)) throw invalidParameter(`invalid container id ${id}`);
    const persist = this.persistDir(id);
    const proc: OciProcess = { ...opts.spec.process, terminal: opts.terminal };
    proc.rlimits = capRlimits(proc.rlimits, this.limits);
    if (opts.terminal && opts.consoleSize) proc.consoleSize = opts.consoleSize;
    const runtimeName = opts.runtime ?? this.name;
    const runtime = this.o.runtimes.get(runtimeName);
    if (!runtime) throw invalidParameter(`Unknown runtime specified ${runtimeName}`);
    await runtime.prepare?.();
    const refused = runtimeName === 'crun' ? cpuSharesRefusal(opts.spec.linux?.resources) : null;
    if (refused) throw systemError(`OCI runtime create failed: ${refused}`);
    const cli = runtime.cli;
    // conmon runs `runtime create` from berth-sys's sealed copy (no copy of its own per create):
    // its path asked now, answered while the files are written
    const sealedPath = cli.monitorPath();
    const spec: OciSpec = { ...opts.spec, process: proc };
    if (runtimeName === 'crun') {
      spec.mounts = await fileBindsForCrun({ ...spec, mounts: mountsForCrun(spec.mounts) });
      if (spec.linux?.resources)
        spec.linux = { ...spec.linux, resources: resourcesForCrun(spec.linux.resources) };
    }
    const linux = spec.linux;
    const bpf = linux?.seccomp && runtime.seccompBpf ? await runtime.seccompBpf.bpf(linux.seccomp) : null;
    if (bpf) spec.annotations = { ...spec.annotations, [seccompBpfAnnotation]: bpf };
    const meta: MonitorMeta = {
      id,
      bundleDir,
      ...(opts.logPath ? { logPath: opts.logPath } : {}),
      terminal: opts.terminal,
      stdin: opts.stdin,
      stdinOnce: opts.stdinOnce,
      runtime: runtimeName,
      ...(linux?.cgroupsPath ? { cgroupsPath: linux.cgroupsPath } : {}),
    };

    const [, madePersist] = await Promise.all([
      mkdir(bundleDir, { recursive: true }),
      mkdir(persist, { recursive: true }),
    ]);
    // a persist dir made just now holds no exit files of an earlier run (a first start)
    const earlier = madePersist === undefined;
    await Promise.all([
      writeFile(join(bundleDir, 'config.json'), specToJson(spec)),
      writeFile(join(persist, 'meta.json'), JSON.stringify(meta)),
      existsSync(join(this.exitDir, id)) && rm(join(this.exitDir, id), { force: true }),
      earlier && rm(join(persist, 'exit'), { force: true }),
      earlier && rm(join(persist, 'oom'), { force: true }),
    ]);
    // only once the old exit files are gone: the previous run's exit cannot be reported again
    if (earlier) await rm(join(persist, 'exit-reported'), { force: true });
    this.metas.set(id, meta);

    const args = [
      '--api-version',
      '1',
      '-c',
      id,
      '-u',
      id,
      '-n',
      id,
      '-r',
      await sealedPath,
      '-b',
      bundleDir,
      '-p',
      join(bundleDir, 'pidfile'),
      '-P',
      join(bundleDir, 'conmon.pid'),
      '-l',
      opts.logPath ? `k8s-file:${opts.logPath}` : 'none',
      '--exit-dir',
      this.exitDir,
      '--persist-dir',
      persist,
      '--full-attach',
      '--socket-dir-path',
      this.o.execRoot,
      '--no-sync-log',
    ];
    for (const a of cli.globalArgs()) args.push('--runtime-arg', a);
    if (opts.logPath && opts.logSizeMax && opts.logSizeMax > 0)
      args.push('--log-size-max', String(Math.floor(opts.logSizeMax)));
    if (opts.terminal) args.push('-t');
    else if (opts.stdin) {
      args.push('-i');
      if (!opts.stdinOnce) args.push('--leave-stdin-open');
    }

    // the sealed copy's path is gone when berth-sys died since it was asked: then the binary's own
    const runtimeArg = args.indexOf('-r') + 1;
    const sealedGone = async () => {
      if (args[runtimeArg] === cli.path || (await executable(args[runtimeArg] ?? ''))) return false;
      args[runtimeArg] = cli.path;
      return true;
    };
    const monitor = async (): Promise<MonitorStart> => {
      try {
        return await this.o.runner.startMonitor(this.o.conmonPath, args, persist);
      } catch (err) {
        if (await sealedGone()) return monitor();
        // conmon failed or the runtime hung: leave nothing behind
        await this.killMonitor(meta);
        await cli.delete(id).catch(() => undefined);
        throw systemError(`starting the container monitor failed: ${errorMessage(err)}`);
      }
    };
    let res = await monitor();
    if (res.pid <= 0 && (await sealedGone())) res = await monitor();
    if (res.pid <= 0 && /already exists|exists already|File exists/i.test(res.message ?? '')) {
      // the runtime still has the previous run of this container (started again without delete)
      await cli.delete(id);
      res = await monitor();
    }
    if (res.pid <= 0) {
      await cli.delete(id).catch(() => undefined);
      const msg = this.message(runtimeName, res.message, spec.process.args[0]);
      throw systemError(`OCI runtime create failed: ${msg}`);
    }
    try {
      if (opts.beforeStart) await opts.beforeStart();
      // crun's start is one fifo write: done here, the CLI only when that could not be done
      if (!(runtimeName === 'crun' && (await startCreatedCrun(cli.root, id)))) await cli.start(id);
    } catch (err) {
      await cli.delete(id).catch(() => undefined);
      throw err instanceof Error && 'kind' in err
        ? err
        : systemError(`OCI runtime start failed: ${errorMessage(err)}`);
    }
    return { pid: res.pid };
  }

  async signal(id: string, signal: number): Promise<void> {
    await (await this.runtimeOf(id)).cli.kill(id, signal);
  }

  async pause(id: string): Promise<void> {
    await (await this.runtimeOf(id)).cli.pause(id);
  }

  async resume(id: string): Promise<void> {
    await (await this.runtimeOf(id)).cli.resume(id);
  }

  async state(id: string): Promise<RuntimeState | null> {
    const { cli } = await this.runtimeOf(id);
    // no state directory: nothing to ask the runtime (engine start asks for every container)
    if (!(await runtimeStateExists(cli.root, id))) return null;
    return cli.state(id);
  }

  async exitStatus(id: string): Promise<ExitStatus | null> {
    const persist = this.persistDir(id);
    const read = async (path: string) =>
      Promise.all([readFile(path, 'utf8'), stat(path, { bigint: true }).then((st) => st.mtimeNs)]);
    let text: string;
    let mtimeNs: bigint;
    try {
      [text, mtimeNs] = await read(join(persist, 'exit'));
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
      try {
        [text, mtimeNs] = await read(join(this.exitDir, id));
      } catch (err2) {
        if (errnoCode(err2) === 'ENOENT') return null;
        throw err2;
      }
    }
    const exitCode = Number.parseInt(text.trim(), 10);
    return {
      exitCode: Number.isNaN(exitCode) ? -1 : exitCode,
      oomKilled: await this.oomKilled(id),
      finishedAt: new Date(Number(mtimeNs / 1_000_000n)),
      finishedNanos: Number(mtimeNs % 1_000_000n),
    };
  }

  private async oomKilled(id: string): Promise<boolean> {
    if (existsSync(join(this.persistDir(id), 'oom'))) return true;
    // conmon may not have seen the event (it arrives with the exit); ask the memory cgroup
    const meta = await this.meta(id).catch(() => null);
    if (!meta?.cgroupsPath || meta.cgroupsPath.includes(':')) return false;
    try {
      const text = await readFile(
        join('/sys/fs/cgroup/memory', meta.cgroupsPath, 'memory.oom_control'),
        'utf8',
      );
      const m = /^oom_kill (\d+)$/m.exec(text);
      return m !== null && Number(m[1]) > 0;
    } catch {
      return false;
    }
  }

  async delete(id: string): Promise<void> {
    const meta = await this.meta(id).catch(() => null);
    const { name, cli } = await this.runtimeOf(id);
    // a stopped container is cleaned up in-process; one the runtime no longer knows needs nothing
    if (!(await deleteStopped(name, cli.root, id)) && (await runtimeStateExists(cli.root, id))) {
      await cli.delete(id);
    }
    if (meta) {
      await this.killMonitor(meta);
      // the files of the driver's and conmon's that are there (one readdir, not a probe per name)
      const present = await readdir(meta.bundleDir).catch(() => [] as string[]);
      await Promise.all(
        present
          .filter((f) => bundleFiles.includes(f))
          .map((f) => rm(join(meta.bundleDir, f), { force: true })),
      );
      await rmdir(meta.bundleDir).catch(() => undefined);
    }
    this.metas.delete(id);
    await Promise.all([rm(join(this.exitDir, id), { force: true }), rmSmallTree(this.persistDir(id))]);
  }

  /** A conmon still around for a deleted container (created, never started) goes too. */
  private async killMonitor(meta: MonitorMeta): Promise<void> {
    let pid: number;
    try {
      pid = Number.parseInt(await readFile(join(meta.bundleDir, 'conmon.pid'), 'utf8'), 10);
    } catch {
      return;
    }
    if (!(await this.isMonitor(pid, meta.id))) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }

  async attach(id: string): Promise<AttachConnection> {
    const meta = await this.meta(id);
    return ConmonAttach.connect(meta.bundleDir, id);
  }

  private async ctl(id: string, type: number, a: number, b: number): Promise<void> {
    const meta = await this.meta(id);
    await this.ctlAt(meta.bundleDir, id, type, a, b);
  }

  private async ctlAt(dir: string, id: string, type: number, a: number, b: number): Promise<void> {
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(join(dir, 'ctl'), constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENXIO' || code === 'ENOENT') throw conflict(`container ${id} is not running`);
      throw err;
    }
    try {
      await handle.write(`${type} ${Math.floor(a)} ${Math.floor(b)}\n`);
    } finally {
      await handle.close();
    }
  }

  async resize(id: string, height: number, width: number): Promise<void> {
    await this.ctl(id, WIN_RESIZE_EVENT, height, width);
  }

  monitorLogPath(id: string): string {
    return join(this.persistDir(id), 'output.log');
  }

  async reopenLog(id: string): Promise<void> {
    await this.ctl(id, REOPEN_LOGS_EVENT, 0, 0);
  }

  /** The spec the container runs with (its bundle's config.json). */
  private async containerSpec(id: string): Promise<OciSpec> {
    const meta = await this.meta(id);
    // read once per start: each start writes config.json and makes a new meta
    const cached = this.specs.get(meta);
    if (cached) return cached;
    let text: string;
    try {
      text = await readFile(join(meta.bundleDir, 'config.json'), 'utf8');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw notFound(`No such container: ${id}`);
      throw err;
    }
    // RLIM_INFINITY does not fit a JS number: keep it as the spec object's -1
    const spec = JSON.parse(text.replaceAll(':18446744073709551615', ':-1')) as OciSpec;
    this.specs.set(meta, spec);
    return spec;
  }

  async exec(opts: ExecOptions): Promise<ExecProcess> {
    const { id, execId } = opts;
    if (!validId.test(execId)) throw invalidParameter(`invalid exec id ${execId}`);
    const process = await buildExecProcess(await this.containerSpec(id), opts.config, {
      ...(opts.consoleSize ? { consoleSize: opts.consoleSize } : {}),
    });
    const runtime = await this.runtimeOf(id);
    const cli = runtime.cli;
    const shimRunner = this.o.runner.startExecShim?.bind(this.o.runner);
    if (!opts.config.Tty && shimRunner) return this.execWithShim(opts, runtime, process, shimRunner);
    const dir = join(this.execDir, execId);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'process.json'), specToJson(process));
    const args = [
      '--api-version',
      '1',
      '-c',
      id,
      '-u',
      execId,
      '-n',
      id,
      '-r',
      await cli.monitorPath(),
      '-b',
      dir,
      '-p',
      join(dir, 'pidfile'),
      '-P',
      join(dir, 'conmon.pid'),
      '-l',
      'none',
      '--persist-dir',
      dir,
      '--full-attach',
      '--socket-dir-path',
      this.o.execRoot,
      '-e',
      '--exec-process-spec',
      join(dir, 'process.json'),
    ];
    for (const a of cli.globalArgs()) args.push('--runtime-arg', a);
    if (opts.config.Tty) args.push('-t');
    else if (opts.stdin) args.push('-i');
    if (opts.beforeStart) args.push('--exec-attach');
    let mon: Awaited<ReturnType<ProcessRunner['startExecMonitor']>>;
    try {
      mon = await this.o.runner.startExecMonitor(
        this.o.conmonPath,
        args,
        dir,
        opts.beforeStart ? { attach: true, ready: opts.beforeStart } : { attach: false },
      );
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err instanceof Error && 'kind' in err
        ? err
        : systemError(`OCI runtime exec failed: ${errorMessage(err)}`);
    }
    if (mon.pid <= 0) {
      await rm(dir, { recursive: true, force: true });
      const msg = this.message(runtime.name, mon.message, process.args[0]);
      if (/not running|is paused|stopped/i.test(msg))
        throw conflict(`Container ${id} is not running: ${msg}`);
      throw systemError(`OCI runtime exec failed: ${msg}`);
    }
    const exited = mon.exit.then(async (r) => {
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      return r.message !== undefined && r.code < 0
        ? { exitCode: r.code, error: r.message }
        : { exitCode: r.code };
    });
    return { pid: mon.pid, exited };
  }

  /**
   * A non-TTY exec without conmon: berth-sys's exec shim runs `runtime exec --detach` with the
   * session's pipes and reports the pid and the exit (docs/runtime.md, Exec).
   */
  private async execWithShim(
    opts: ExecOptions,
    runtime: { name: string; cli: OciCli },
    process: OciProcess,
    startShim: NonNullable<ProcessRunner['startExecShim']>,
  ): Promise<ExecProcess> {
    const { id, execId } = opts;
    // the session's files, next to each other (no directory to make and remove per session)
    const base = join(this.execDir, execId);
    const [specFile, pidFile, logFile] = [`${base}.json`, `${base}.pid`, `${base}.log`];
    this.execDirReady ??= mkdir(this.execDir, { recursive: true }).then(() => undefined);
    await this.execDirReady;
    const conn = new ShimExecAttach();
    this.shimExecs.set(execId, conn);
    // the shim removes them once the runtime started the process; after a failure, we do
    const end = async () => {
      this.shimExecs.delete(execId);
      await Promise.all([specFile, pidFile, logFile].map((f) => rm(f, { force: true }))).catch(
        () => undefined,
      );
    };
    let pid: number;
    let shim: Awaited<ReturnType<typeof startShim>>;
    try {
      if (opts.beforeStart) await opts.beforeStart();
      shim = await startShim(
        runtime.cli.path,
        [
          ...runtime.cli.globalArgs(),
          `--log=${logFile}`,
          '--log-format=json',
          'exec',
          '--detach',
          '--pid-file',
          pidFile,
          '--process',
          specFile,
          id,
        ],
        {
          cwd: this.execDir,
          pidFile,
          // written by the shim: no file operation of the engine's own on an exec's path
          specFile,
          spec: specToJson(process),
          cleanup: [specFile, logFile],
          stdin: opts.stdin,
        },
      );
      conn.bind(shim);
      pid = await shim.started;
    } catch (err) {
      conn.failed();
      await end();
      throw err instanceof Error && 'kind' in err
        ? err
        : systemError(`OCI runtime exec failed: ${errorMessage(err)}`);
    }
    if (pid <= 0) {
      conn.failed();
      const raw = (await readFile(logFile, 'utf8').catch(() => '')) || ((await shim.exit).message ?? '');
      await end();
      const msg = this.message(runtime.name, raw, process.args[0]);
      if (/not running|is paused|stopped/i.test(msg))
        throw conflict(`Container ${id} is not running: ${msg}`);
      throw systemError(`OCI runtime exec failed: ${msg}`);
    }
    conn.started();
    const exited = shim.exit.then((r) => {
      conn.exited();
      this.shimExecs.delete(execId);
      return r.message !== undefined && r.code < 0
        ? { exitCode: r.code, error: r.message }
        : { exitCode: r.code };
    });
    return { pid, exited };
  }

  async attachExec(execId: string): Promise<AttachConnection> {
    const direct = this.shimExecs.get(execId);
    if (direct) return direct;
    return ConmonAttach.connect(join(this.execDir, execId), execId);
  }

  async resizeExec(execId: string, height: number, width: number): Promise<void> {
    await this.ctlAt(join(this.execDir, execId), execId, WIN_RESIZE_EVENT, height, width);
  }

  async stats(id: string): Promise<ContainerStats | null> {
    const meta = await this.meta(id);
    if (!meta.cgroupsPath || meta.cgroupsPath.includes(':')) return null;
    return readCgroupStats(meta.cgroupsPath.startsWith('/') ? meta.cgroupsPath : `/${meta.cgroupsPath}`);
  }

  async update(id: string, resources: OciResources): Promise<void> {
    const meta = await this.meta(id);
    const runtime = await this.runtimeOf(id);
    const crun = runtime.name === 'crun';
    const refused = crun ? cpuSharesRefusal(resources) : null;
    if (refused) throw systemError(`update ${id}: ${refused}`);
    const file = join(meta.bundleDir, 'update.json');
    await writeFile(file, specToJson(crun ? resourcesForCrun(resources) : resources));
    try {
      await runtime.cli.update(id, file);
    } finally {
      await rm(file, { force: true });
    }
    if (crun && (resources.cpu?.quota ?? 0) < 0 && meta.cgroupsPath && !meta.cgroupsPath.includes(':')) {
      await removeCpuQuota(meta.cgroupsPath);
    }
    // the device limits runc's update leaves as they are (systemd cgroup paths have a ':')
    if (meta.cgroupsPath && !meta.cgroupsPath.includes(':')) {
      await applyBlkioDevices(meta.cgroupsPath, resources.blockIO);
    }
  }

  async pids(id: string): Promise<number[]> {
    return (await this.runtimeOf(id)).cli.ps(id);
  }

  /** Emit 'exit' once per exit file (a marker in the persist dir remembers it was reported). */
  private async reportExit(id: string): Promise<void> {
    if (this.closed || this.events.listenerCount('exit') === 0 || this.reporting.has(id)) return;
    this.reporting.add(id);
    try {
      const marker = join(this.persistDir(id), 'exit-reported');
      if (existsSync(marker)) return;
      const status = await this.exitStatus(id);
      if (!status || this.closed) return;
      await writeFile(marker, '').catch((err) => {
        if (errnoCode(err) !== 'ENOENT') throw err;
      });
      this.events.emit('exit', id, status);
    } catch (err) {
      this.o.log.warn('cannot report container exit', { id, error: errorMessage(err) });
    } finally {
      this.reporting.delete(id);
    }
  }

  private async reconcile(): Promise<void> {
    for (const id of await this.watcher.list()) await this.reportExit(id);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watcher.close();
  }
}
