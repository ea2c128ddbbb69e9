import { EventEmitter } from 'node:events';
import type { AttachConnection } from '../runtime.types.js';
import type { ExecShim } from './process.js';

/** How long output may go on after the process ended (a child it left holding the pipes): dockerd's 2 s. */
export const drainAfterExitMs = 2000;
/** At most this much per write to the process's stdin (berth-sys takes frames up to 1 MiB). */
const maxStdinWrite = 256 * 1024;

type Stream = 'stdout' | 'stderr';

/**
 * The attach connection of a non-TTY exec session run under berth-sys's exec shim: the process's
 * stdout and stderr come straight from its pipes, its stdin is a pipe. Made before the process
 * starts (`attachExec` in `beforeStart`); output is held until the runtime reported the process
 * started, and dropped when it failed (the runtime's own error then is the answer). As with
 * conmon's attach socket: `closeStdin()` closes the process's stdin after what was written,
 * `close()` detaches (stdin closes too, output is still read to its end and dropped), and 'close'
 * comes once the process ended and its output is through (at most `drainAfterExitMs` after the
 * exit, for a child the process left holding its pipes).
 */
export class ShimExecAttach extends EventEmitter implements AttachConnection {
  private shim: ExecShim | null = null;
  private running = false;
  private held: [Stream, Buffer][] = [];
  private openOutputs = 2;
  private exitSeen = false;
  private detached = false;
  private closeEmitted = false;
  private done = false;
  private drainTimer: NodeJS.Timeout | undefined;
  private stdinEnded = false;
  /** Writes to stdin, one after the other; before the shim is there they wait for it. */
  private stdin: Promise<void>;
  private bound: (shim: ExecShim) => void = () => undefined;

  constructor(private readonly drainMs = drainAfterExitMs) {
    super();
    this.stdin = new Promise<ExecShim>((resolve) => {
      this.bound = resolve;
    }).then(() => undefined);
  }

  /** The session's process was spawned: its pipes are this connection's. */
  bind(shim: ExecShim): void {
    this.shim = shim;
    this.bound(shim);
    for (const fd of [1, 2] as const) {
      shim.onOutput(fd, (chunk) => {
        if (chunk) this.output(fd === 1 ? 'stdout' : 'stderr', chunk);
        else {
          this.openOutputs--;
          this.maybeDone();
        }
      });
    }
  }

  /** The runtime started the process: what it wrote so far goes out. */
  started(): void {
    this.running = true;
    const held = this.held;
    this.held = [];
    for (const [stream, chunk] of held) this.emitOutput(stream, chunk);
  }

  /** The runtime failed (or the shim could not run): nothing of it is the process's output. */
  failed(): void {
    this.held = [];
    this.finish();
  }

  /** The process ended: its output is read to its end, for at most `drainMs` more. */
  exited(): void {
    this.exitSeen = true;
    if (!this.maybeDone()) {
      this.drainTimer = setTimeout(() => this.finish(), this.drainMs);
      this.drainTimer.unref();
    }
  }

  private output(stream: Stream, chunk: Buffer): void {
    if (!this.running) this.held.push([stream, chunk]);
    else this.emitOutput(stream, chunk);
  }

  private emitOutput(stream: Stream, chunk: Buffer): void {
    if (!this.detached && !this.closeEmitted) this.emit(stream, chunk);
  }

  private maybeDone(): boolean {
    if (this.exitSeen && this.openOutputs <= 0) {
      this.finish();
      return true;
    }
    return false;
  }

  /** The session is over: the pipes close, the client hears 'close'. */
  private finish(): void {
    if (this.done) return;
    this.done = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    this.shim?.close();
    this.emitClose();
  }

  private emitClose(): void {
    if (this.closeEmitted) return;
    this.closeEmitted = true;
    this.emit('close');
  }

  writeStdin(chunk: Buffer): void {
    if (this.stdinEnded || this.detached || this.done) return;
    for (let off = 0; off < chunk.length; off += maxStdinWrite) {
      const piece = chunk.subarray(off, Math.min(chunk.length, off + maxStdinWrite));
      this.stdin = this.stdin.then(() => this.shim?.writeStdin(piece)).catch(() => undefined);
    }
  }

  closeStdin(): void {
    if (this.stdinEnded || this.done) return;
    this.stdinEnded = true;
    this.stdin = this.stdin.then(() => this.shim?.closeStdin());
  }

  close(): void {
    if (this.detached || this.closeEmitted) return;
    // as a client leaving conmon's socket: stdin closes, the process goes on, its output is dropped
    this.closeStdin();
    this.detached = true;
    this.emitClose();
  }
}
