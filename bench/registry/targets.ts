import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
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

/** CPU time (user + system) a process has used so far, in milliseconds (0 when it is gone). */
export function cpuMsOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : 0;
  } catch {
    return 0;
  }
}

/**
 * The V8 flags berth's registry is measured with, as docs/registry.md recommends launching it
 * (`NODE_OPTIONS=--max-semi-space-size=2`): a young generation of 2 MiB semi-spaces instead of
 * up to 16 keeps the RSS under load about 30 MiB lower at the same rates.
 */
export const BERTH_NODE_FLAGS = ['--max-semi-space-size=2'];

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
 * Compiled JavaScript of berth: dist/ when it is built, else a private build (tsc, type errors of
 * work in progress ignored) under .tmp/, so the server runs as plain node, without tsx's loader.
 */
function compiledBerth(repoRoot: string): string {
  const dist = resolve(repoRoot, 'dist');
  if (existsSync(join(dist, 'registry/index.js'))) return dist;
  const out = resolve(repoRoot, '.tmp/bench-registry-dist');
  process.stderr.write(`[berth] compiling to ${out} ...\n`);
  spawnSync(
    process.execPath,
    [
      resolve(repoRoot, 'node_modules/typescript/bin/tsc'),
      '-p',
      'tsconfig.json',
      '--outDir',
      out,
      '--sourceMap',
      'false',
    ],
    { cwd: repoRoot, stdio: 'ignore', timeout: 300_000 },
  );
  if (!existsSync(join(out, 'registry/index.js')))
    throw new Error('could not compile berth (tsc emitted no registry/index.js)');
  return out;
}

/**
 * berth's registry as its own process (so its RSS is its own): `main.js registry serve --config`
 * of the compiled CLI when it has the registry command, else a two-line launcher of the compiled
 * registry module (startRegistry, as the CLI does).
 */
export async function startBerth(
  repoRoot: string,
  extraConfig: string[] = [],
  name = 'berth',
  nodeFlags: string[] = BERTH_NODE_FLAGS,
): Promise<Target> {
  const root = mkdtempSync(join(tmpdir(), 'berth-bench-registry-'));
  const port = await freePort();
  const config = join(root, 'config.yml');
  writeFileSync(config, configText(join(root, 'data'), port, extraConfig));
  const built = compiledBerth(repoRoot);
  const main = join(built, 'cli/main.js');
  let args: string[];
  if (existsSync(main) && readFileSync(main, 'utf8').includes('runRegistryCommand')) {
    args = [...nodeFlags, main, 'registry', 'serve', '--config', config];
  } else {
    const index = JSON.stringify(join(built, 'registry/index.js'));
    const script = `const m = await import(${index}); const r = await m.startRegistry(await m.loadConfig(process.argv[1])); process.on('SIGTERM', () => r.close().then(() => process.exit(0)));`;
    args = [...nodeFlags, '--input-type=module', '-e', script, config];
  }
  return launch(name, process.execPath, args, port, root);
}

/**
 * The same config for both registries. The blob descriptor cache is what the reference
 * registry's packaged config.yml enables (berth accepts and ignores the setting).
 */
function configText(dataDir: string, port: number, extra: string[] = []): string {
  return [
    'version: 0.1',
    'log:',
    '  level: error',
    '  accesslog:',
    '    disabled: true',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${dataDir}`,
    '  delete:',
    '    enabled: true',
    '  cache:',
    '    blobdescriptor: inmemory',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    ...extra,
    '',
  ].join('\n');
}

export const REFERENCE_BINARY = '/usr/bin/docker-registry';

/** The reference registry (distribution) with its own temp root and config. */
export async function startReference(
  binary = REFERENCE_BINARY,
  extraConfig: string[] = [],
  name = 'reference',
): Promise<Target> {
  const root = mkdtempSync(join(tmpdir(), 'berth-bench-reference-'));
  const port = await freePort();
  const config = join(root, 'config.yml');
  writeFileSync(config, configText(join(root, 'data'), port, extraConfig));
  return launch(name, binary, ['serve', config], port, root);
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

/**
 * The floor: an empty Node HTTP server (every request answered 200 `{}`), run with the same
 * node and flags as berth, so its RSS is what Node itself costs.
 */
export async function startBareNode(nodeFlags: string[] = BERTH_NODE_FLAGS): Promise<Target> {
  const root = mkdtempSync(join(tmpdir(), 'berth-bench-bare-'));
  const port = await freePort();
  const script = `require('node:http').createServer((q, s) => { s.setHeader('Content-Type', 'application/json'); s.end('{}'); }).listen(${port}, '127.0.0.1');`;
  return launch('node listener', process.execPath, [...nodeFlags, '-e', script], port, root);
}

/** VmRSS split into anonymous memory (heap, code V8 made) and file pages (mostly /usr/bin/node). */
export function rssPartsOf(pid: number): { rss: number; anon: number; file: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
    return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
  } catch {
    return { rss: 0, anon: 0, file: 0 };
  }
}
