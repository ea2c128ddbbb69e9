import type { AttachConnection, ExecConfig } from '../../runtime/runtime.types.js';
import { parseDetachKeys } from '../io/detachkeys.js';
import type { ExecInspect } from './exec.types.js';

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

/** GET /exec/{id}/json, keys in dockerd's order. */
export function execView(ex: ExecInstance): ExecInspect {
  const [entrypoint = '', ...args] = ex.config.Cmd;
  return {
    ID: ex.id,
    Running: ex.running,
    ExitCode: ex.exitCode,
    ProcessConfig: {
      tty: ex.config.Tty === true,
      entrypoint,
      arguments: args,
      privileged: ex.config.Privileged === true,
      user: ex.config.User || undefined,
    },
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
