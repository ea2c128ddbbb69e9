import { conflict, errorMessage, invalidParameter, isKind, notFound } from '../../../common/errors.js';
import { randomId } from '../../../common/ids.js';
import type { Logger } from '../../../common/log.js';
import type { ExecConfig, ExecDriver, ExecProcess } from '../../runtime/runtime.types.js';
import type { Container } from '../core/container.js';
import type { ContainerEvents } from '../core/events.js';
import type { ExecsPort } from '../core/ports.js';
import type { ContainerSet } from '../core/set.js';
import { startFailure } from '../core/start-failure.js';
import { DEFAULT_DETACH_KEYS, DetachScanner, parseDetachKeys } from '../io/detachkeys.js';
import type { ExecCreateRequest, ExecInspect, ExecSession, ExecStartOptions } from './exec.types.js';
import { ExecInstance, execView } from './instance.js';

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

export interface ExecDeps {
  set: ContainerSet;
  runtime: ExecDriver;
  events: ContainerEvents;
  log: Logger;
}

/**
 * The engine's exec instances (dockerd's exec store): found by ID until their container stops or
 * is removed; a container lists those not yet exited (inspect ExecIDs).
 */
export class Execs implements ExecsPort {
  private readonly byId = new Map<string, ExecInstance>();
  /** Per container: its instances not yet exited. */
  private readonly live = new Map<string, Set<string>>();

  constructor(private readonly deps: ExecDeps) {}

  /** 404 `No such exec instance: x`. */
  get(id: string): ExecInstance {
    const ex = this.byId.get(id);
    if (!ex) throw notFound(`No such exec instance: ${id}`);
    return ex;
  }

  /** Inspect's ExecIDs: the container's instances not yet exited. */
  idsOf(containerId: string): string[] {
    return [...(this.live.get(containerId) ?? [])];
  }

  inspect(id: string): ExecInspect {
    return execView(this.get(id));
  }

  /** The container stopped or went away: its exec instances go (dockerd's Cleanup). */
  forgetContainer(c: Container): void {
    for (const id of this.live.get(c.id) ?? []) this.byId.delete(id);
    for (const [id, ex] of this.byId) if (ex.containerId === c.id) this.byId.delete(id);
    this.live.delete(c.id);
  }

  /** Exec create: validate, register, announce `exec_create`. */
  create(c: Container, givenName: string, req: ExecCreateRequest): ExecInstance {
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
      {
        stdin: req.AttachStdin === true,
        stdout: req.AttachStdout === true,
        stderr: req.AttachStderr === true,
      },
      keys,
      consoleSizeOf(req.ConsoleSize),
    );
    this.byId.set(ex.id, ex);
    let live = this.live.get(c.id);
    if (!live) {
      live = new Set();
      this.live.set(c.id, live);
    }
    live.add(ex.id);
    this.deps.events.emit(c, `exec_create: ${ex.commandText}`, { execID: ex.id });
    return ex;
  }

  /** Why a start cannot happen: dockerd's conflicts (409). */
  private startable(ex: ExecInstance): Container {
    if (ex.exitCode !== null) throw conflict(`Error: Exec command ${ex.id} has already run`);
    if (ex.running) throw conflict(`Error: Exec command ${ex.id} is already running`);
    const c = this.deps.set.find(ex.containerId);
    if (!c) throw notFound(`No such container: ${ex.containerId}`);
    activeContainer(c, c.name.replace(/^\//, ''));
    return c;
  }

  /**
   * Exec start. Detached (`sink` undefined): resolves once the process runs. Attached: output goes
   * to the sink (stdout/stderr as the exec was created to attach), the sink ends once the process
   * exited and its output is all through (so ExitCode is set when the client asks next), and the
   * returned session takes the client's input. A failed start records exit code 126, as dockerd.
   */
  async start(execId: string, opts: ExecStartOptions): Promise<ExecSession | undefined> {
    const ex = this.get(execId);
    const c = this.startable(ex);
    const { runtime, events } = this.deps;
    ex.running = true;
    events.emit(c, `exec_start: ${ex.commandText}`, { execID: ex.id });
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
      this.live.get(c.id)?.delete(ex.id);
      if (isKind(err, 'NotFound') || isKind(err, 'Conflict') || isKind(err, 'InvalidParameter')) throw err;
      const f = startFailure(err, ex.config.Cmd[0] ?? '');
      if (f.userError || /unable to find (user|group)|no such file or directory/i.test(f.message)) {
        throw invalidParameter(f.message);
      }
      throw err;
    }
    ex.pid = proc.pid;
    ex.exitRecorded = proc.exited.then(
      (r) => this.recordExit(c, ex, r.exitCode),
      (err) => {
        this.deps.log.warn('exec exit unknown', { id: ex.id, error: errorMessage(err) });
        this.recordExit(c, ex, -1);
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
      if (reason === 'detached') events.emit(c, 'exec_detach', { execID: ex.id });
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

  private recordExit(c: Container, ex: ExecInstance, exitCode: number): void {
    ex.running = false;
    ex.exitCode = exitCode;
    this.live.get(c.id)?.delete(ex.id);
    this.deps.events.emit(c, 'exec_die', { execID: ex.id, exitCode: String(exitCode) });
  }

  /** Exec resize: the session's terminal (a start must have happened; dockerd: `no such exec` after it ended). */
  async resize(execId: string, height: number, width: number): Promise<void> {
    const ex = this.get(execId);
    if (!ex.running) throw notFound('no such exec');
    if (!ex.config.Tty) return;
    await this.deps.runtime.resizeExec(ex.id, height, width);
  }
}
