import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { type SysHelper, sysHelper } from '../../../common/host/sys-helper.js';

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

/** A runtime's `exec --detach` under berth-sys's exec shim: no monitor process (see docs/runtime.md, Exec). */
export interface ExecShim {
  /** The process's output on 1 (stdout) and 2 (stderr); `null` at its end. */
  onOutput(fd: 1 | 2, listener: (chunk: Buffer | null) => void): void;
  /** The process's pid once the runtime started it; -1 when the runtime failed (its log says why, or `exit`'s message). */
  started: Promise<number>;
  /** The process's exit code (128+signal when killed), or -1 and why when it cannot be known. */
  exit: Promise<{ code: number; message?: string }>;
  /** Write to the process's stdin (a pipe when asked for); resolves once the pipe took it. */
  writeStdin(data: Buffer): Promise<void>;
  /** Close the process's stdin (after what was written). */
  closeStdin(): void;
  /** Close the engine's ends of every pipe. */
  close(): void;
}

export interface ExecShimOptions {
  cwd: string;
  /** The runtime's `--pid-file`: read by the shim, then removed. */
  pidFile: string;
  /** The runtime's `--process` file, and what the shim writes there first (the process's JSON). */
  specFile: string;
  spec: string;
  /** Files the shim removes once the runtime started the process (its spec, its log). */
  cleanup: string[];
  stdin: boolean;
}

/** Runs external programs (runtime CLI, conmon, mount). Tests may substitute it. */
export interface ProcessRunner {
  /**
   * Run `file args` to its end. `sealed`: `file` is a runtime (runc, crun), run from berth-sys's
   * sealed in-memory copy of it when there is one (docs/runtime.md, The runtime's binary).
   */
  run(file: string, args: string[], opts?: { sealed?: boolean }): Promise<RunResult>;
  /**
   * The path a monitor (conmon's `-r`) can exec to run the runtime at `file` from berth-sys's
   * sealed copy: valid while the helper runs; `file` itself when there is no copy.
   */
  runtimePath?(file: string): Promise<string>;
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
  /**
   * Run the runtime's `exec --detach --pid-file <pidFile>` (in `args`) under berth-sys's exec
   * shim, the process's stdin a pipe when `stdin`, else /dev/null. Only with berth-sys.
   */
  startExecShim?(file: string, args: string[], o: ExecShimOptions): Promise<ExecShim>;
}

/** A started program's pipes and exit, whichever way it was started (berth-sys or Node). */
interface Started {
  pid: number;
  /** Chunks the program wrote on descriptor `fd`; `null` at the end. */
  onData(fd: number, listener: (chunk: Buffer | null) => void): void;
  /** The exit status (128 when a signal ended it); null when unknown (the helper died). */
  exited: Promise<number | null>;
  write(fd: number, data: string): void;
  /** Stop listening: the engine's ends of the pipes are closed. */
  close(): void;
}

/** Splits a descriptor's output into JSON messages, one per line, as conmon writes them. */
function jsonLines(
  p: Started,
  fd: number,
  onMessage: (m: { data?: number; pid?: number; message?: string }) => void,
  onEnd: () => void,
) {
  let buf = '';
  p.onData(fd, (chunk) => {
    if (chunk === null) {
      onEnd();
      return;
    }
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
}

let baseEnv: NodeJS.ProcessEnv | undefined;
/**
 * The engine's environment without systemd's socket-activation variables, copied from
 * process.env once (a copy of process.env costs ~0.1 ms; the engine does not change its own).
 */
const childEnv = (): NodeJS.ProcessEnv => {
  if (!baseEnv) {
    baseEnv = { ...process.env };
    delete baseEnv.NOTIFY_SOCKET;
    delete baseEnv.LISTEN_PID;
    delete baseEnv.LISTEN_FDS;
  }
  return baseEnv;
};

/**
 * Runs `file args` through bash after closing every file descriptor above `keep` (what the child
 * gets on purpose): the way without berth-sys (a tree where it was not built). Node's own
 * descriptors are close-on-exec, but the SOCK_SEQPACKET sockets of node-unix-socket (the attach
 * connections to other containers' conmon) are not: a conmon that inherited one holds it for its
 * whole life, and the conmon at its other end then never sees the engine close it (after an
 * engine restart it blocks writing output nobody reads, and so does its container). berth-sys
 * closes them itself (close_range) in the child it forks.
 */
export function withoutInheritedFds(file: string, args: string[], keep: number): [string, string[]] {
  const script =
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash script's ${f##*/}, not a template
    'keep=$0; for f in /proc/self/fd/*; do n=${f##*/}; if [ "$n" -gt "$keep" ]; then eval "exec $n>&-" 2>/dev/null; fi; done; exec "$@"';
  return ['/bin/bash', ['-c', script, String(keep), file, ...args]];
}

/** wait(2) status → exit code, 128 + signal when a signal ended it. */
function exitCode(status: number): number {
  const sig = status & 0x7f;
  return sig === 0 ? (status >> 8) & 0xff : 128 + sig;
}

/** Start a program in its own session through berth-sys: no Node spawn, no wrapper. */
async function startWithHelper(
  sys: SysHelper,
  file: string,
  args: string[],
  o: { cwd?: string; fds: string; env: NodeJS.ProcessEnv; sealed?: boolean },
): Promise<Started> {
  // The helper execs the file as given (execve): a bare name is looked up on PATH here, as Node's
  // spawn does, so both ways run the same program (a bare `mount` failed with ENOENT before).
  const path = file.includes('/') ? file : ((await lookPath(file)) ?? file);
  const r = { file: path, args, env: o.env, fds: o.fds, ...(o.cwd ? { cwd: o.cwd } : {}) };
  const c = await (o.sealed ? sys.spawnSealed(r) : sys.spawn(r));
  return {
    pid: c.pid,
    onData: (fd, l) => c.onData(fd, l),
    exited: c.exited.then((s) => (s === null ? null : exitCode(s))),
    write: (fd, data) => {
      c.write(fd, data).catch(() => undefined);
    },
    close: () => c.close(),
  };
}

/** The same with Node's spawn (detached), every descriptor above the last one closed by bash. */
function startWithNode(
  file: string,
  args: string[],
  o: { cwd?: string; fds: string; env: NodeJS.ProcessEnv },
): Started {
  const stdio = [...o.fds].map((k) => (k === 'n' ? 'ignore' : 'pipe')) as ('ignore' | 'pipe')[];
  const child = spawn(...withoutInheritedFds(file, args, o.fds.length - 1), {
    ...(o.cwd ? { cwd: o.cwd } : {}),
    stdio,
    env: o.env,
    detached: true,
  });
  type Pipe = NodeJS.ReadWriteStream & { destroy(): void };
  const pipes = child.stdio as unknown as (Pipe | null | undefined)[];
  for (const p of pipes) p?.on('error', () => undefined);
  const exited = new Promise<number | null>((resolve) => {
    child.on('error', () => resolve(127));
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : null)));
  });
  return {
    pid: child.pid ?? -1,
    onData: (fd, l) => {
      const p = pipes[fd];
      if (!p) return;
      p.on('data', (b: Buffer) => l(b));
      p.on('end', () => l(null));
      p.on('error', () => l(null));
    },
    exited,
    write: (fd, data) => {
      pipes[fd]?.write(data);
    },
    close: () => {
      for (const p of pipes) p?.destroy();
      child.unref();
    },
  };
}

/** The exec shim's child: its output, and conmon's sync messages on its descriptor 3. */
async function startExecShim(
  sys: SysHelper,
  file: string,
  args: string[],
  o: ExecShimOptions,
): Promise<ExecShim> {
  const c = await sys.execShim({
    file,
    args,
    env: childEnv(),
    cwd: o.cwd,
    pidFile: o.pidFile,
    specFile: o.specFile,
    spec: o.spec,
    cleanup: o.cleanup,
    fds: o.stdin ? 'rwww' : 'nwww',
  });
  let startedResolve: (pid: number) => void = () => undefined;
  const started = new Promise<number>((r) => {
    startedResolve = r;
  });
  let exitResolve: (r: { code: number; message?: string }) => void = () => undefined;
  const exit = new Promise<{ code: number; message?: string }>((r) => {
    exitResolve = r;
  });
  let messages = 0;
  const p: Started = {
    pid: c.pid,
    onData: (fd, l) => c.onData(fd, l),
    exited: c.exited,
    write: () => undefined,
    close: () => c.close(),
  };
  const lost = (why: string) => {
    startedResolve(-1);
    exitResolve({ code: -1, message: why });
  };
  jsonLines(
    p,
    3,
    (m) => {
      const value = m.data ?? -1;
      if (messages++ === 0) {
        startedResolve(value);
        if (value <= 0) exitResolve({ code: -1, message: m.message ?? 'exec failed' });
      } else exitResolve({ code: value });
    },
    () => lost('the exec session ended without reporting its exit'),
  );
  return {
    onOutput: (fd, l) => c.onData(fd, l),
    started,
    exit,
    writeStdin: (data) => c.write(0, data),
    closeStdin: () => c.close(0),
    close: () => c.close(),
  };
}

/** The process runner: through berth-sys when it was built, else Node's spawn (and bash). */
export function createProcessRunner(sys: SysHelper | null): ProcessRunner {
  const start = (
    file: string,
    args: string[],
    o: { cwd?: string; fds: string; env: NodeJS.ProcessEnv; sealed?: boolean },
  ): Promise<Started> =>
    sys ? startWithHelper(sys, file, args, o) : Promise.resolve(startWithNode(file, args, o));

  return {
    ...(sys
      ? {
          startExecShim: (file, args, o) => startExecShim(sys, file, args, o),
          runtimePath: async (file) => (await sys.sealedPath(file)) ?? file,
        }
      : {}),
    run(file, args, opts) {
      if (!sys) return runWithNode(file, args);
      return start(file, args, { fds: 'nww', env: childEnv(), sealed: opts?.sealed === true }).then(
        (p) =>
          new Promise<RunResult>((resolve) => {
            const out: Buffer[] = [];
            const err: Buffer[] = [];
            let open = 2;
            let code: number | null | undefined;
            const done = () => {
              if (open > 0 || code === undefined) return;
              resolve({
                code: code ?? 1,
                stdout: Buffer.concat(out).toString('utf8'),
                stderr: Buffer.concat(err).toString('utf8'),
              });
            };
            for (const [fd, into] of [
              [1, out],
              [2, err],
            ] as const) {
              p.onData(fd, (b) => {
                if (b) into.push(b);
                else {
                  open--;
                  done();
                }
              });
            }
            void p.exited.then((c) => {
              code = c;
              if (c === null) open = 0; // the helper died: no more output comes
              done();
            });
          }),
      );
    },

    async startMonitor(file, args, cwd, timeoutMs = 120_000) {
      const p = await start(file, args, { cwd, fds: 'nnww', env: { ...childEnv(), _OCI_SYNCPIPE: '3' } });
      return new Promise<MonitorStart>((resolve, reject) => {
        const stderr: Buffer[] = [];
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
          p.close();
          if (err) reject(err);
          else resolve(result!);
        };
        p.onData(2, (b) => {
          if (b) stderr.push(b);
        });
        void p.exited.then((code) => {
          exited = code;
          // conmon's first process exits right after forking the monitor; only a failure matters
          if (code !== 0) {
            setImmediate(() =>
              finish(
                new Error(
                  `conmon exited with ${code ?? 'an unknown status'}: ${Buffer.concat(stderr).toString('utf8').trim()}`,
                ),
              ),
            );
          }
        });
        jsonLines(
          p,
          3,
          (msg) => {
            const pid = msg.data ?? msg.pid ?? -1;
            finish(null, msg.message !== undefined ? { pid, message: msg.message } : { pid });
          },
          () => {
            const why = Buffer.concat(stderr).toString('utf8').trim();
            finish(
              new Error(
                `conmon ended without reporting the container pid${exited !== null ? ` (exit ${exited})` : ''}${why ? `: ${why}` : ''}`,
              ),
            );
          },
        );
      });
    },

    async startExecMonitor(file, args, cwd, opts) {
      const env: NodeJS.ProcessEnv = { ...childEnv(), _OCI_SYNCPIPE: '3', _OCI_STARTPIPE: '4' };
      if (opts.attach) env._OCI_ATTACHPIPE = '5';
      const p = await start(file, args, { cwd, fds: opts.attach ? 'nnwwrw' : 'nnwwr', env });
      return new Promise<ExecMonitor>((resolve, reject) => {
        const stderr: Buffer[] = [];
        p.onData(2, (b) => {
          if (b) stderr.push(b);
        });
        let started = false;
        let exitResolve: (r: { code: number; message?: string }) => void = () => undefined;
        const exit = new Promise<{ code: number; message?: string }>((r) => {
          exitResolve = r;
        });
        const fail = (message: string) => {
          p.close();
          if (!started) {
            started = true;
            reject(new Error(message));
          } else exitResolve({ code: -1, message });
        };
        void p.exited.then((code) => {
          if (code !== 0) {
            setImmediate(() =>
              fail(
                `conmon exited with ${code ?? 'an unknown status'}: ${Buffer.concat(stderr).toString('utf8').trim()}`,
              ),
            );
          }
        });
        jsonLines(
          p,
          3,
          (m) => {
            const value = m.data ?? -1;
            if (!started) {
              started = true;
              resolve(
                m.message !== undefined ? { pid: value, message: m.message, exit } : { pid: value, exit },
              );
              if (value <= 0) {
                p.close();
                exitResolve({ code: -1, message: m.message ?? 'exec failed' });
              }
            } else {
              p.close();
              exitResolve(m.message !== undefined ? { code: value, message: m.message } : { code: value });
            }
          },
          () => fail('conmon ended without reporting the exec session'),
        );
        // the first start message lets conmon begin (it waits to be put into a cgroup)
        p.write(4, '0');
        if (opts.attach) {
          jsonLines(
            p,
            5,
            () => {
              // the attach socket exists: let the caller connect, then run the process
              Promise.resolve(opts.ready?.())
                .then(() => p.write(4, '0'))
                .catch((err: unknown) => {
                  try {
                    process.kill(p.pid, 'SIGKILL');
                  } catch {
                    // gone already
                  }
                  fail(err instanceof Error ? err.message : String(err));
                });
            },
            () => undefined,
          );
        }
      });
    },
  };
}

function runWithNode(file: string, args: string[]): Promise<RunResult> {
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
}

export const realProcessRunner: ProcessRunner = createProcessRunner(sysHelper());

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
