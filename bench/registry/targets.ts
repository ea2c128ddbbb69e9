import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** A registry process under test, on loopback, with its own temporary root. */
export interface Target {
  name: string;
  url: string;
  host: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolvePort(port));
    });
  });
}

/** VmRSS of a process, in bytes (0 when it is gone). */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

async function waitReady(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`registry exited with ${child.exitCode}:\n${log()}`);
    try {
      const res = await fetch(`${url}/v2/`);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`registry at ${url} did not become ready:\n${log()}`);
}

function launch(
  name: string,
  command: string,
  args: string[],
  port: number,
  root: string,
  env: NodeJS.ProcessEnv = {},
): Promise<Target> {
  const child = spawn(command, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-8000);
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.pid) {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(
        () => child.pid && child.exitCode === null && process.kill(child.pid, 'SIGKILL'),
        5000,
      );
      await exited;
      clearTimeout(timer);
    }
    rmSync(root, { recursive: true, force: true });
  };
  return waitReady(url, child, () => stderr).then(
    () => ({ name, url, host: '127.0.0.1', port, pid: child.pid ?? 0, stop }),
    async (err) => {
      await stop();
      throw err;
    },
  );
}

/**
 * berth's registry as its own process (so its RSS is its own): the built CLI (dist/cli/main.js)
 * when it exists, else the TypeScript entry point through tsx.
 */
export async function startBerth(repoRoot: string): Promise<Target> {
  const root = mkdtempSync(join(tmpdir(), 'berth-bench-registry-'));
  const port = await freePort();
  const config = join(root, 'config.yml');
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(root, 'data')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  const dist = resolve(repoRoot, 'dist/cli/main.js');
  const [command, args] = existsSync(dist)
    ? [process.execPath, [dist, 'registry', 'serve', '--config', config]]
    : [
        process.execPath,
        ['--import', 'tsx', resolve(repoRoot, 'src/cli/main.ts'), 'registry', 'serve', '--config', config],
      ];
  return launch('berth', command, args as string[], port, root);
}

export const REFERENCE_BINARY = '/usr/bin/docker-registry';

/** The reference registry (distribution) with its own temp root and config. */
export async function startReference(binary = REFERENCE_BINARY): Promise<Target> {
  const root = mkdtempSync(join(tmpdir(), 'berth-bench-reference-'));
  const port = await freePort();
  const config = join(root, 'config.yml');
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(root, 'data')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  return launch('reference', binary, ['serve', config], port, root);
}

/** A registry somebody else runs (given by URL): nothing to start or stop, RSS unknown. */
export function external(name: string, url: string): Target {
  const u = new URL(url);
  return {
    name,
    url: url.replace(/\/$/, ''),
    host: u.hostname,
    port: Number(u.port || 80),
    pid: 0,
    stop: async () => {},
  };
}
