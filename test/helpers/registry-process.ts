import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { waitForHttp } from './registry.js';
import { freePort } from './registry-reference.js';

const REPO = join(import.meta.dirname, '../..');
/**
 * The built CLI (`npm run build`), as users run it: `berth registry` loads the registry command
 * from its bundle (scripts/bundle-registry.sh), so the process tests run the shipped code.
 */
export const BERTH_CLI = join(REPO, 'dist/cli/main.js');

/** A registry (or any node entry point) running as a child process. */
export interface RegistryProcess {
  child: ChildProcess;
  /** Everything the process wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exit: Promise<number | null>;
  /** True while the process has not exited. */
  alive(): boolean;
  /** Send a signal (by pid) and wait for the exit; SIGKILL after 10 s. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Start `node --import tsx <script> <args>` in the repository, output captured. */
export function startNodeProcess(script: string, args: string[]): RegistryProcess {
  return startNode(['--import', 'tsx', script, ...args]);
}

/** Start `node <args>` in the repository, output captured. */
export function startNode(args: string[]): RegistryProcess {
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: REPO,
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    err += d;
  });
  let exited = false;
  const exit = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      exited = true;
      resolve(code);
    }),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exit,
    alive: () => !exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (!exited && child.pid) process.kill(child.pid, signal);
      const timer = setTimeout(() => {
        if (!exited && child.pid) process.kill(child.pid, 'SIGKILL');
      }, 10_000);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
  };
}

/** `berth registry <args>` as a child process (the built CLI). */
export function startRegistryCli(args: string[]): RegistryProcess {
  return startNode([BERTH_CLI, 'registry', ...args]);
}

/**
 * `berth registry --addr 127.0.0.1:<free port> --root <root> [args]` as a child process, once it
 * answers. Returns the process and its base URL.
 */
export async function startRegistryOnRoot(
  root: string,
  args: string[] = [],
  port?: number,
): Promise<{ proc: RegistryProcess; url: string; port: number }> {
  const p = port ?? (await freePort());
  const proc = startRegistryCli(['--addr', `127.0.0.1:${p}`, '--root', root, ...args]);
  const url = `http://127.0.0.1:${p}`;
  try {
    await waitForHttp(`${url}/v2/`, 20_000);
  } catch (err) {
    await proc.stop('SIGKILL');
    throw new Error(`registry did not start: ${err}\n${proc.stderr()}`);
  }
  return { proc, url, port: p };
}
