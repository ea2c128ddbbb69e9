import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import bcrypt from 'bcryptjs';
import { BERTH_CLI } from '../../helpers/registry-process.js';

/**
 * A registry in a child process (`berth registry` from the built CLI, dist/), so that a
 * request that ends the process is seen as such (an in-process registry would take the fuzzer
 * with it). Loopback, port 0, a temp root, deletes enabled, htpasswd auth (user `fz`, password
 * `fz-pass`), the access log on.
 */

const repoRoot = resolve(import.meta.dirname, '../../..');
export const USER = 'fz';
export const PASSWORD = 'fz-pass';

export interface RegistryProcess {
  url: string;
  port: number;
  dir: string;
  child: ChildProcess;
  /** undefined while it runs. */
  exited(): string | undefined;
  /** What it printed. */
  log(): string;
  logTail(): string;
  stop(): Promise<void>;
}

export async function startRegistryProcess(): Promise<RegistryProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-fuzz-reg-'));
  const htpasswd = join(dir, 'htpasswd');
  await writeFile(htpasswd, `${USER}:${bcrypt.hashSync(PASSWORD, 4)}\n`);
  const config = join(dir, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: info',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'root')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      '  addr: 127.0.0.1:0',
      'auth:',
      '  htpasswd:',
      '    realm: fuzz',
      `    path: ${htpasswd}`,
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, [BERTH_CLI, 'registry', '--config', config], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const keep = (d: Buffer) => {
    log += d.toString('utf8');
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exit: string | undefined;
  child.on('exit', (code, signal) => {
    exit = `exited with ${signal ?? code}`;
  });
  const deadline = Date.now() + 30_000;
  let port = 0;
  while (Date.now() < deadline) {
    const m = /serving http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
    if (m) {
      port = Number(m[1]);
      break;
    }
    if (exit) throw new Error(`the registry ${exit}:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!port) {
    child.kill('SIGKILL');
    throw new Error(`the registry did not start within 30 s:\n${log}`);
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dir,
    child,
    exited: () => exit,
    log: () => log,
    logTail: () => log.slice(-6000),
    async stop() {
      if (!exit) {
        const done = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await done;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
