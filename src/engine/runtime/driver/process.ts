import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { delimiter, join } from 'node:path';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The result of starting conmon: what it reported on its sync pipe. */
export interface MonitorStart {
  /** The container's init pid, or -1 with `message` when the runtime failed to create it. */
  pid: number;
  message?: string;
}

/** An exec session's conmon: the process pid (or -1 and a message), then its exit. */
export interface ExecMonitor {
  pid: number;
  message?: string;
  /** conmon's last report: the exit code (128+signal when killed), or -1 and a message. */
  exit: Promise<{ code: number; message?: string }>;
}

/** Runs external programs (runtime CLI, conmon, mount). Tests may substitute it. */
export interface ProcessRunner {
  run(file: string, args: string[]): Promise<RunResult>;
  /**
   * Start conmon (it daemonizes) with a sync pipe on fd 3 and resolve with the first message it
   * writes there: the container pid once `runtime create` is done.
   */
  startMonitor(file: string, args: string[], cwd: string, timeoutMs?: number): Promise<MonitorStart>;
  /**
   * Start conmon for an exec session (`--exec`), with sync (fd 3), start (fd 4) and, when
   * `attach`, attach (fd 5) pipes: once conmon's attach socket is ready, `ready()` runs, then the
   * process is started.
   */
  startExecMonitor(
    file: string,
    args: string[],
    cwd: string,
    opts: { attach: boolean; ready?: () => Promise<void> },
  ): Promise<ExecMonitor>;
}

/** Splits a stream into JSON messages, one per line, as conmon writes them on its pipes. */
function jsonLines(
  stream: NodeJS.ReadableStream,
  onMessage: (m: { data?: number; message?: string }) => void,
  onEnd: () => void,
) {
  let buf = '';
  stream.on('data', (chunk: Buffer | string) => {
    buf += chunk.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        onMessage(JSON.parse(line) as { data?: number; message?: string });
      } catch {
        onMessage({ data: -1, message: `unreadable message from conmon: ${line}` });
      }
    }
  });
  stream.on('end', onEnd);
  stream.on('error', onEnd);
}

const childEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env };
  delete env.NOTIFY_SOCKET;
  delete env.LISTEN_PID;
  delete env.LISTEN_FDS;
  return env;
};

/**
 * Runs `file args` through bash after closing every file descriptor above `keep` (what the child
 * gets on purpose). Node's own descriptors are close-on-exec, but the SOCK_SEQPACKET sockets of
 * node-unix-socket (the attach connections to other containers' conmon) are not: a conmon that
 * inherited one holds it for its whole life, and the conmon at its other end then never sees the
 * engine close it (after an engine restart it blocks writing output nobody reads, and so does its
 * container). ~2 ms per monitor started.
 */
export function withoutInheritedFds(file: string, args: string[], keep: number): [string, string[]] {
  const script =
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash script's ${f##*/}, not a template
    'keep=$0; for f in /proc/self/fd/*; do n=${f##*/}; if [ "$n" -gt "$keep" ]; then eval "exec $n>&-" 2>/dev/null; fi; done; exec "$@"';
  return ['/bin/bash', ['-c', script, String(keep), file, ...args]];
}

export const realProcessRunner: ProcessRunner = {
  startExecMonitor,

  run(file, args) {
    return new Promise((resolve, reject) => {
      const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv() });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (b: Buffer) => out.push(b));
      child.stderr.on('data', (b: Buffer) => err.push(b));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        resolve({
          code: code ?? (signal ? 128 : 1),
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
        });
      });
    });
  },

  startMonitor(file, args, cwd, timeoutMs = 120_000) {
    return new Promise((resolve, reject) => {
      const child = spawn(...withoutInheritedFds(file, args, 3), {
        cwd,
        stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
        env: { ...childEnv(), _OCI_SYNCPIPE: '3' },
        detached: true,
      });
      const sync = child.stdio[3] as NodeJS.ReadableStream & { destroy(): void };
      const stderr: Buffer[] = [];
      let buf = '';
      let done = false;
      let exited: number | null = null;
      const timer = setTimeout(
        () => finish(new Error(`the runtime did not create the container within ${timeoutMs / 1000} s`)),
        timeoutMs,
      );
      timer.unref();
      const finish = (err: Error | null, result?: MonitorStart) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        sync.destroy();
        child.stderr?.destroy();
        child.unref();
        if (err) reject(err);
        else resolve(result!);
      };
      child.stderr?.on('data', (b: Buffer) => stderr.push(b));
      child.on('error', (err) => finish(err));
      child.on('exit', (code) => {
        exited = code;
        // conmon's first process exits right after forking the monitor; only a failure matters
        if (code !== 0) {
          setImmediate(() =>
            finish(new Error(`conmon exited with ${code}: ${Buffer.concat(stderr).toString('utf8').trim()}`)),
          );
        }
      });
      sync.on('data', (chunk: Buffer | string) => {
        buf += chunk.toString();
        const nl = buf.indexOf('\n');
        if (nl < 0) return;
        try {
          const msg = JSON.parse(buf.slice(0, nl)) as { data?: number; pid?: number; message?: string };
          const pid = msg.data ?? msg.pid ?? -1;
          finish(null, msg.message !== undefined ? { pid, message: msg.message } : { pid });
        } catch (err) {
          finish(new Error(`unreadable message from conmon: ${buf.slice(0, nl)} (${String(err)})`));
        }
      });
      sync.on('end', () => {
        const why = Buffer.concat(stderr).toString('utf8').trim();
        finish(
          new Error(
            `conmon ended without reporting the container pid${exited !== null ? ` (exit ${exited})` : ''}${why ? `: ${why}` : ''}`,
          ),
        );
      });
      sync.on('error', (err) => finish(err));
    });
  },
};

function startExecMonitor(
  file: string,
  args: string[],
  cwd: string,
  opts: { attach: boolean; ready?: () => Promise<void> },
): Promise<ExecMonitor> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...childEnv(), _OCI_SYNCPIPE: '3', _OCI_STARTPIPE: '4' };
    if (opts.attach) env._OCI_ATTACHPIPE = '5';
    const child = spawn(...withoutInheritedFds(file, args, 5), {
      cwd,
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', opts.attach ? 'pipe' : 'ignore'],
      env,
      detached: true,
    });
    type Pipe = NodeJS.ReadWriteStream & { destroy(): void };
    const pipes = child.stdio as unknown as (Pipe | null | undefined)[];
    const sync = pipes[3] as Pipe;
    const start = pipes[4] as Pipe;
    const attachPipe = pipes[5] ?? null;
    const stderr: Buffer[] = [];
    child.stderr?.on('data', (b: Buffer) => stderr.push(b));
    let started = false;
    let exitResolve: (r: { code: number; message?: string }) => void = () => undefined;
    const exit = new Promise<{ code: number; message?: string }>((r) => {
      exitResolve = r;
    });
    const cleanup = () => {
      sync.destroy();
      start.destroy();
      attachPipe?.destroy();
      child.stderr?.destroy();
      child.unref();
    };
    const fail = (message: string) => {
      if (!started) {
        started = true;
        cleanup();
        reject(new Error(message));
      } else {
        cleanup();
        exitResolve({ code: -1, message });
      }
    };
    child.on('error', (err) => fail(err.message));
    child.on('exit', (code) => {
      if (code !== 0) {
        setImmediate(() =>
          fail(`conmon exited with ${code}: ${Buffer.concat(stderr).toString('utf8').trim()}`),
        );
      }
    });
    jsonLines(
      sync,
      (m) => {
        const value = m.data ?? -1;
        if (!started) {
          started = true;
          resolve(m.message !== undefined ? { pid: value, message: m.message, exit } : { pid: value, exit });
          if (value <= 0) {
            cleanup();
            exitResolve({ code: -1, message: m.message ?? 'exec failed' });
          }
        } else {
          cleanup();
          exitResolve(m.message !== undefined ? { code: value, message: m.message } : { code: value });
        }
      },
      () => fail('conmon ended without reporting the exec session'),
    );
    // the first start message lets conmon begin (it waits to be put into a cgroup)
    start.write('0');
    if (opts.attach && attachPipe) {
      jsonLines(
        attachPipe,
        () => {
          // the attach socket exists: let the caller connect, then run the process
          Promise.resolve(opts.ready?.())
            .then(() => start.write('0'))
            .catch((err: unknown) => {
              child.kill('SIGKILL');
              fail(err instanceof Error ? err.message : String(err));
            });
        },
        () => undefined,
      );
    }
  });
}

/** Find an executable on PATH (plus the sbin directories root has). */
export async function lookPath(name: string): Promise<string | null> {
  if (name.includes('/')) {
    try {
      await access(name, constants.X_OK);
      return name;
    } catch {
      return null;
    }
  }
  const dirs = [
    ...(process.env.PATH ?? '').split(delimiter),
    '/usr/local/sbin',
    '/usr/sbin',
    '/sbin',
    '/usr/bin',
    '/bin',
  ];
  for (const dir of dirs) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      await access(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return null;
}
