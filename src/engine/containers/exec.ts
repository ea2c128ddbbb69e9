import {
  conflict,
  errorMessage,
  invalidParameter,
  isKind,
  notFound,
  systemError,
} from '../../common/errors.js';
import { randomId } from '../../common/ids.js';
import type { AttachConnection, ExecConfig, ExecDriver, ExecProcess } from '../runtime/runtime.types.js';
import { type Container, emit, type Internals } from './container.js';
import { DEFAULT_DETACH_KEYS, DetachScanner, parseDetachKeys } from './detachkeys.js';
import { hasExec } from './health.js';
import { startFailure } from './run.js';
import type { AttachSink } from './types.js';

/** POST /containers/{id}/exec, decoded (types.ExecConfig). */
export interface ExecCreateRequest {
  User?: string | null;
  Privileged?: boolean | null;
  Tty?: boolean | null;
  ConsoleSize?: number[] | null;
  AttachStdin?: boolean | null;
  AttachStderr?: boolean | null;
  AttachStdout?: boolean | null;
  DetachKeys?: string | null;
  Env?: string[] | null;
  WorkingDir?: string | null;
  Cmd?: string[] | null;
}

/** POST /exec/{id}/start, decoded (types.ExecStartCheck). */
export interface ExecStartRequest {
  Detach?: boolean | null;
  Tty?: boolean | null;
  ConsoleSize?: number[] | null;
}

/** One exec instance, as dockerd keeps its ExecConfig: created, running, then exited. */
export class ExecInstance {
  running = false;
  exitCode: number | null = null;
  pid = 0;
  /** The session's output connection while a client is attached. */
  conn?: AttachConnection;
  /** Resolves once the exit is recorded (ExitCode set, exec_die sent). */
  exitRecorded?: Promise<void>;

  constructor(
    readonly id: string,
    readonly containerId: string,
    readonly config: ExecConfig,
    readonly open: { stdin: boolean; stdout: boolean; stderr: boolean },
    /** The detach-key spec as given ('' for none: the default then). */
    readonly detachKeys: string,
    readonly consoleSize?: { height: number; width: number },
  ) {}

  get started(): boolean {
    return this.running || this.exitCode !== null;
  }

  /** `exec_create: sh -c ...`: the entrypoint and arguments joined as dockerd does. */
  get commandText(): string {
    return this.config.Cmd.join(' ');
  }
}

/**
 * The engine's exec instances (dockerd's exec store): found by ID until their container stops or
 * is removed; a container lists those not yet exited (inspect ExecIDs).
 */
export class ExecStore {
  private readonly byId = new Map<string, ExecInstance>();

  add(ex: ExecInstance): void {
    this.byId.set(ex.id, ex);
  }

  get(id: string): ExecInstance {
    const ex = this.byId.get(id);
    if (!ex) throw notFound(`No such exec instance: ${id}`);
    return ex;
  }

  /** The container stopped or went away: its exec instances go (dockerd's Cleanup). */
  forgetContainer(c: Container): void {
    for (const id of c.execIds) this.byId.delete(id);
    for (const [id, ex] of this.byId) if (ex.containerId === c.id) this.byId.delete(id);
    c.execIds.clear();
  }
}

function execDriver(ix: Internals): ExecDriver {
  if (!hasExec(ix.runtime)) throw systemError(`runtime ${ix.runtime.name} cannot exec`);
  return ix.runtime;
}

/** A container exec may run in: running, not paused, not restarting (dockerd's messages). */
function activeContainer(c: Container, givenName: string): void {
  if (!c.state.Running) throw conflict(`Container ${c.id} is not running`);
  if (c.state.Paused) throw conflict(`Container ${givenName} is paused, unpause the container before exec`);
  if (c.state.Restarting)
    throw conflict(`Container ${c.id} is restarting, wait until the container is running`);
}

function consoleSizeOf(v: number[] | null | undefined): { height: number; width: number } | undefined {
  if (!v) return undefined;
  if (v.length !== 2) throw invalidParameter('ConsoleSize must have two elements: height and width');
  const [height = 0, width = 0] = v;
  return height > 0 && width > 0 ? { height, width } : undefined;
}

/** Exec create: validate, register, announce `exec_create`. */
export function createExec(
  ix: Internals,
  c: Container,
  givenName: string,
  req: ExecCreateRequest,
): ExecInstance {
  activeContainer(c, givenName);
  const cmd = req.Cmd ?? [];
  if (cmd.length === 0) throw invalidParameter('No exec command specified');
  const keys = req.DetachKeys ?? '';
  if (keys) {
    try {
      parseDetachKeys(keys);
    } catch {
      throw invalidParameter(`Invalid escape keys (${keys}) provided`);
    }
  }
  const config: ExecConfig = {
    Cmd: cmd,
    Env: req.Env ?? null,
    User: req.User || c.record.Config.User || '',
    WorkingDir: req.WorkingDir ?? '',
    Tty: req.Tty === true,
    Privileged: req.Privileged === true,
    GroupAdd: c.hostConfig.GroupAdd ?? null,
  };
  const ex = new ExecInstance(
    randomId(),
    c.id,
    config,
    { stdin: req.AttachStdin === true, stdout: req.AttachStdout === true, stderr: req.AttachStderr === true },
    keys,
    consoleSizeOf(req.ConsoleSize),
  );
  ix.execs.add(ex);
  c.execIds.add(ex.id);
  emit(ix, c, `exec_create: ${ex.commandText}`, { execID: ex.id });
  return ex;
}

/** Why a start cannot happen: dockerd's conflicts (409). */
function checkStartable(ix: Internals, ex: ExecInstance): Container {
  if (ex.exitCode !== null) throw conflict(`Error: Exec command ${ex.id} has already run`);
  if (ex.running) throw conflict(`Error: Exec command ${ex.id} is already running`);
  const c = ix.containers.get(ex.containerId);
  if (!c) throw notFound(`No such container: ${ex.containerId}`);
  activeContainer(c, c.name.replace(/^\//, ''));
  return c;
}

/** What a client attached to an exec does to it. */
export interface ExecSession {
  write(chunk: Buffer): void;
  endInput(): void;
  close(): void;
}

/**
 * Exec start. Detached (`sink` undefined): resolves once the process runs. Attached: output goes
 * to the sink (stdout/stderr as the exec was created to attach), the sink ends once the process
 * exited and its output is all through (so ExitCode is set when the client asks next), and the
 * returned session takes the client's input. A failed start records exit code 126, as dockerd.
 */
export async function startExec(
  ix: Internals,
  ex: ExecInstance,
  opts: { tty: boolean; consoleSize?: { height: number; width: number }; sink?: AttachSink },
): Promise<ExecSession | undefined> {
  const c = checkStartable(ix, ex);
  const runtime = execDriver(ix);
  ex.running = true;
  emit(ix, c, `exec_start: ${ex.commandText}`, { execID: ex.id });
  const sink = opts.sink;
  let outputClosed: Promise<void> = Promise.resolve();
  let proc: ExecProcess;
  try {
    proc = await runtime.exec({
      id: c.id,
      execId: ex.id,
      config: { ...ex.config, Tty: ex.config.Tty === true },
      stdin: sink !== undefined && ex.open.stdin,
      ...((opts.consoleSize ?? ex.consoleSize) ? { consoleSize: opts.consoleSize ?? ex.consoleSize } : {}),
      ...(sink
        ? {
            beforeStart: async () => {
              const conn = await runtime.attachExec(ex.id);
              ex.conn = conn;
              conn.on('error', () => undefined);
              conn.on('stdout', (d: Buffer) => {
                if (ex.open.stdout) sink.output('stdout', d);
              });
              conn.on('stderr', (d: Buffer) => {
                if (ex.open.stderr) sink.output('stderr', d);
              });
              outputClosed = new Promise<void>((resolve) => conn.once('close', () => resolve()));
            },
          }
        : {}),
    });
  } catch (err) {
    ex.running = false;
    ex.exitCode = 126;
    ex.conn = undefined;
    c.execIds.delete(ex.id);
    if (isKind(err, 'NotFound') || isKind(err, 'Conflict') || isKind(err, 'InvalidParameter')) throw err;
    const f = startFailure(err, ex.config.Cmd[0] ?? '');
    if (f.userError || /unable to find (user|group)|no such file or directory/i.test(f.message)) {
      throw invalidParameter(f.message);
    }
    throw err;
  }
  ex.pid = proc.pid;
  ex.exitRecorded = proc.exited.then(
    (r) => recordExit(ix, c, ex, r.exitCode),
    (err) => {
      ix.log.warn('exec exit unknown', { id: ex.id, error: errorMessage(err) });
      recordExit(ix, c, ex, -1);
    },
  );
  if (!sink) return undefined;
  let finished = false;
  const finish = (reason: 'exited' | 'detached' | 'closed'): void => {
    if (finished) return;
    finished = true;
    sink.end(reason);
  };
  void Promise.all([ex.exitRecorded, outputClosed]).then(() => finish('exited'));
  const keys =
    ex.open.stdin && ex.config.Tty ? parseDetachKeys(ex.detachKeys || DEFAULT_DETACH_KEYS) : undefined;
  const scanner = keys ? new DetachScanner(keys) : undefined;
  const leave = (reason: 'detached' | 'closed'): void => {
    if (finished) return;
    ex.conn?.close();
    ex.conn = undefined;
    if (reason === 'detached') emit(ix, c, 'exec_detach', { execID: ex.id });
    finish(reason);
  };
  return {
    write(chunk) {
      if (finished || !ex.open.stdin || !ex.conn) return;
      if (!scanner) {
        ex.conn.writeStdin(chunk);
        return;
      }
      const { pass, detach } = scanner.push(chunk);
      if (pass.length) ex.conn.writeStdin(pass);
      if (detach) leave('detached');
    },
    endInput() {
      // the client's stdin ended: the process's stdin closes, its output goes on
      if (!finished && ex.open.stdin) ex.conn?.closeStdin();
    },
    close() {
      leave('closed');
    },
  };
}

function recordExit(ix: Internals, c: Container, ex: ExecInstance, exitCode: number): void {
  ex.running = false;
  ex.exitCode = exitCode;
  c.execIds.delete(ex.id);
  emit(ix, c, 'exec_die', { execID: ex.id, exitCode: String(exitCode) });
}

/** Exec resize: the session's terminal (a start must have happened; dockerd: `no such exec` after it ended). */
export async function resizeExec(
  ix: Internals,
  ex: ExecInstance,
  height: number,
  width: number,
): Promise<void> {
  if (!ex.running) throw notFound('no such exec');
  if (!ex.config.Tty) return;
  await execDriver(ix).resizeExec(ex.id, height, width);
}

/** GET /exec/{id}/json, keys in dockerd's order. */
export function execView(ex: ExecInstance): Record<string, unknown> {
  const [entrypoint = '', ...args] = ex.config.Cmd;
  const processConfig: Record<string, unknown> = {
    tty: ex.config.Tty === true,
    entrypoint,
    arguments: args,
    privileged: ex.config.Privileged === true,
  };
  if (ex.config.User) processConfig.user = ex.config.User;
  return {
    ID: ex.id,
    Running: ex.running,
    ExitCode: ex.exitCode,
    ProcessConfig: processConfig,
    OpenStdin: ex.open.stdin,
    OpenStderr: ex.open.stderr,
    OpenStdout: ex.open.stdout,
    CanRemove: false,
    ContainerID: ex.containerId,
    // Go marshals the key bytes as base64
    DetachKeys: ex.detachKeys ? parseDetachKeys(ex.detachKeys).toString('base64') : '',
    Pid: ex.pid,
  };
}
