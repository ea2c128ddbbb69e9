import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/**
 * The host calls of the etcd supervisor: start a member in its own session (it outlives an engine
 * killed with SIGKILL, and the next engine adopts it), look at a pid, signal it. The fake in the
 * unit tests stands in for these.
 */
export interface EtcdProcessHost {
  /** Starts `binary args` in `cwd`, its stdout and stderr appended to `logFile`; returns its pid. */
  start(
    binary: string,
    args: string[],
    cwd: string,
    logFile: string,
    onExit: (code: number | null) => void,
  ): number;
  /** The process's command line (NUL-separated arguments), or undefined when there is no such process. */
  commandLine(pid: number): Promise<string[] | undefined>;
  signal(pid: number, sig: NodeJS.Signals | 0): boolean;
}

export const hostEtcdProcesses: EtcdProcessHost = {
  start(binary, args, cwd, logFile, onExit) {
    const fd = openSync(logFile, 'a', 0o600);
    try {
      const child = spawn(binary, args, { cwd, detached: true, stdio: ['ignore', fd, fd] });
      child.on('exit', (code) => onExit(code));
      // the exit of a child that failed to start comes after its error
      child.on('error', () => {});
      child.unref();
      if (child.pid === undefined) throw new Error(`cannot start ${binary}`);
      return child.pid;
    } finally {
      closeSync(fd);
    }
  },
  async commandLine(pid) {
    try {
      const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      // a zombie has an empty command line: as good as gone
      return raw ? raw.split('\0').filter((a) => a !== '') : undefined;
    } catch {
      return undefined;
    }
  },
  signal(pid, sig) {
    try {
      process.kill(pid, sig);
      return true;
    } catch {
      return false;
    }
  },
};
