import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { systemError } from '../errors.js';

export interface ToolResult {
  /** The exit status; 128 when a signal ended the tool. */
  code: number;
  /** Its standard error (the first `stderrLimit` bytes), trimmed. */
  stderr: string;
  /** Its standard output when `stdout` was asked for, else ''. */
  stdout: string;
}

export interface ToolOptions {
  cwd?: string;
  /** What to pipe to standard input: a stream, or a text written whole. */
  input?: Readable | string;
  /** Keep standard output (`ip -j`, `iptables -S`); discarded otherwise. */
  stdout?: boolean;
  /** Added to the environment. */
  env?: NodeJS.ProcessEnv;
  /** How much of standard error to keep (default 64 KiB). */
  stderrLimit?: number;
}

/**
 * Run a host tool (mount, umount, tar, ip, iptables, ...) with no shell: standard error kept for
 * the message, standard output kept when asked for, `input` piped to standard input. Rejects only
 * when the tool cannot be started; its exit status is the caller's to judge.
 */
export function runTool(cmd: string, args: string[], opts: ToolOptions = {}): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', opts.stdout ? 'pipe' : 'ignore', 'pipe'],
      env: opts.env ? { ...process.env, ...opts.env } : undefined,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const stderrLimit = opts.stderrLimit ?? 64 * 1024;
    let errBytes = 0;
    child.stdout?.on('data', (d: Buffer) => out.push(d));
    child.stderr?.on('data', (d: Buffer) => {
      if (errBytes >= stderrLimit) return;
      err.push(d);
      errBytes += d.length;
    });
    child.on('error', (e) => reject(systemError(`cannot run ${cmd}: ${e.message}`)));
    const stdin = child.stdin;
    if (opts.input !== undefined && stdin) {
      stdin.on('error', () => undefined); // EPIPE when the tool exits early; its status tells why
      if (typeof opts.input === 'string') stdin.end(opts.input);
      else {
        opts.input.on('error', (e) => {
          child.kill('SIGKILL');
          reject(e);
        });
        opts.input.pipe(stdin);
      }
    }
    child.on('close', (code, signal) => {
      resolve({
        code: code ?? (signal ? 128 : -1),
        stderr: Buffer.concat(err).toString('utf8').trim(),
        stdout: Buffer.concat(out).toString('utf8'),
      });
    });
  });
}

/** `runTool`, failing with the tool's message unless it exits 0. */
export async function runToolOk(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<void> {
  const r = await runTool(cmd, args, opts);
  if (r.code !== 0) throw systemError(`${cmd} ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
}
