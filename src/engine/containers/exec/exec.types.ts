import type { AttachSink } from '../io/io.types.js';

/** What the exec room exchanges with the API layer. */

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

/** What a client attached to an exec does to it. */
export interface ExecSession {
  write(chunk: Buffer): void;
  endInput(): void;
  close(): void;
}

/** GET /exec/{id}/json. */
export interface ExecInspect {
  ID: string;
  Running: boolean;
  ExitCode: number | null;
  ProcessConfig: {
    tty: boolean;
    entrypoint: string;
    arguments: string[];
    privileged: boolean;
    user?: string;
  };
  OpenStdin: boolean;
  OpenStderr: boolean;
  OpenStdout: boolean;
  CanRemove: boolean;
  ContainerID: string;
  DetachKeys: string;
  Pid: number;
}

/** Exec start's options: detached without a sink, else attached to it. */
export interface ExecStartOptions {
  tty: boolean;
  consoleSize?: { height: number; width: number };
  sink?: AttachSink;
}
