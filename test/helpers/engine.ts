import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { removeBridgeFromHost, removeUserNetworksFromHost } from '../../src/engine/network/host-cleanup.js';
import { type RunResult, runCommand } from './process.js';

const exec = promisify(execFile);
const repoRoot = resolve(import.meta.dirname, '../..');

export type { RunResult };

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text(): string;
  json<T = unknown>(): T;
}

export interface EngineOptions {
  runtime?: 'runc' | 'crun';
  /** Extra flags for `berth engine`. */
  args?: string[];
  logLevel?: string;
  /** The default bridge (default: a name of its own, `bt` + 8 hex digits); `none` for none. */
  bridge?: string;
  /** `--bip` of the default bridge (default: the engine picks a free block under its host lock). */
  bip?: string;
  /** Run the build in dist/ (as `bin/berth` does) rather than the sources through tsx. */
  compiled?: boolean;
}

/**
 * `--runtime` of a test engine: the test's own choice, else BERTH_TEST_RUNTIME (`runc` runs the
 * suite with runc as every engine's default runtime), else the engine's default (crun here).
 */
function runtimeArgs(runtime: EngineOptions['runtime']): string[] {
  const env = process.env.BERTH_TEST_RUNTIME;
  if (env !== undefined && env !== '' && env !== 'runc' && env !== 'crun')
    throw new Error(`BERTH_TEST_RUNTIME must be runc or crun, not ${env}`);
  const chosen = runtime ?? (env || undefined);
  return chosen ? ['--runtime', chosen] : [];
}

/**
 * A real berth engine in a child process, on its own socket, data root and exec root under a
 * temp dir, for integration tests. `docker()` runs the real docker CLI against it.
 */
export class TestEngine {
  readonly socket: string;
  readonly dataRoot: string;
  readonly execRoot: string;
  readonly dockerConfig: string;
  /** The engine's default bridge: its own, so that engines running together never share one. */
  readonly bridge: string;
  /** Names this engine's swarm links apart from other engines' in the machine's namespace. */
  private readonly linkSuffix: string;
  private child?: ChildProcess;
  private logChunks: Buffer[] = [];

  private constructor(
    readonly dir: string,
    private readonly opts: EngineOptions,
  ) {
    this.socket = join(dir, 'berth.sock');
    this.dataRoot = join(dir, 'data');
    this.execRoot = join(dir, 'exec');
    this.dockerConfig = join(dir, 'docker-config');
    this.bridge = opts.bridge ?? `bt${randomBytes(4).toString('hex')}`;
    this.linkSuffix = randomBytes(4).toString('hex');
  }

  static async start(opts: EngineOptions = {}): Promise<TestEngine> {
    const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
    const engine = new TestEngine(dir, opts);
    await engine.launch();
    return engine;
  }

  get host(): string {
    return `unix://${this.socket}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** What the engine printed so far (for failure messages). */
  log(): string {
    return Buffer.concat(this.logChunks).toString('utf8');
  }

  /**
   * The engine's command line (node's arguments) on this engine's roots; `overrides` replace a
   * flag's value (`--host`, `--data-root`, `--exec-root`...), e.g. for a second engine sharing
   * one root with this one.
   */
  commandLine(overrides: Record<string, string> = {}): string[] {
    const args = this.engineArgs();
    for (const [flag, value] of Object.entries(overrides)) {
      const i = args.indexOf(flag);
      if (i < 0) args.push(flag, value);
      else args[i + 1] = value;
    }
    return args;
  }

  private engineArgs(): string[] {
    return [
      ...(this.opts.compiled
        ? [join(repoRoot, 'dist/cli/main.js')]
        : ['--import', 'tsx', join(repoRoot, 'src/cli/main.ts')]),
      'engine',
      '--host',
      this.host,
      '--data-root',
      this.dataRoot,
      '--exec-root',
      this.execRoot,
      '--log-level',
      this.opts.logLevel ?? 'info',
      ...runtimeArgs(this.opts.runtime),
      '--bridge',
      this.bridge,
      // engines sharing the machine's namespace each have their own swarm links (and nft table)
      '--swarm-gateway-bridge',
      `gw${this.linkSuffix}`,
      '--swarm-ingress-link',
      `ig${this.linkSuffix}`,
      ...(this.opts.bip ? ['--bip', this.opts.bip] : []),
      ...(this.opts.args ?? []),
    ];
  }

  /** Start the engine process on this engine's roots (again, after a stop or a kill) and wait for /_ping. */
  async launch(): Promise<void> {
    const child = spawn(process.execPath, this.engineArgs(), {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => this.logChunks.push(d));
    child.stderr?.on('data', (d: Buffer) => this.logChunks.push(d));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`engine exited with ${child.exitCode}:\n${this.log()}`);
      try {
        const r = await this.request('GET', '/_ping');
        if (r.status === 200) return;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    throw new Error(`engine did not answer /_ping within 30 s:\n${this.log()}`);
  }

  /** Run the real docker CLI against this engine. */
  docker(args: string[], opts: { input?: string | Buffer; timeoutMs?: number } = {}): Promise<RunResult> {
    return runCommand('docker', ['-H', this.host, ...args], {
      ...opts,
      env: { DOCKER_CONFIG: this.dockerConfig, DOCKER_HOST: '', DOCKER_CLI_HINTS: 'false' },
    });
  }

  /** docker(...) that must succeed; returns trimmed stdout. */
  async dockerOk(
    args: string[],
    opts: { input?: string | Buffer; timeoutMs?: number } = {},
  ): Promise<string> {
    const r = await this.docker(args, opts);
    if (r.code !== 0) {
      throw new Error(`docker ${args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    }
    return r.stdout.trim();
  }

  /**
   * `docker events` from `since` (Unix seconds) up to a second from now, with `--filter`s
   * (`key=value`) and a `--format`; the trimmed output.
   */
  events(since: number, format: string, filters: string[] = []): Promise<string> {
    return this.dockerOk([
      'events',
      '--since',
      String(since),
      '--until',
      String(Math.floor(Date.now() / 1000) + 1),
      ...filters.flatMap((f) => ['--filter', f]),
      '--format',
      format,
    ]);
  }

  /** A raw HTTP request over the engine's socket. */
  request(
    method: string,
    path: string,
    opts: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<HttpResult> {
    return new Promise((resolvePromise, reject) => {
      let payload: Buffer | undefined;
      const headers: Record<string, string> = { ...opts.headers };
      if (opts.body !== undefined) {
        payload = Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(JSON.stringify(opts.body));
        if (!Buffer.isBuffer(opts.body)) headers['Content-Type'] ??= 'application/json';
        headers['Content-Length'] = String(payload.length);
      }
      const req = httpRequest({ socketPath: this.socket, method, path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolvePromise({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text: () => body.toString('utf8'),
            json: <T>() => JSON.parse(body.toString('utf8')) as T,
          });
        });
        res.on('error', reject);
      });
      req.setTimeout(opts.timeoutMs ?? 60_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** SIGTERM and wait for the process to exit. Containers keep running (live restore). */
  async stop(): Promise<void> {
    await this.signalAndWait('SIGTERM');
  }

  /** kill -9 the engine process. */
  async kill9(): Promise<void> {
    await this.signalAndWait('SIGKILL');
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.launch();
  }

  private async signalAndWait(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  }

  /**
   * Remove every container through the API, stop the engine, unmount what is left under the
   * temp dir (sandbox namespaces too) and delete it, then remove the engine's bridge and its
   * iptables rules from the host.
   */
  async destroy(): Promise<void> {
    if (this.child && this.child.exitCode === null) {
      const ids = await this.docker(['ps', '-aq']).catch(() => undefined);
      const list = ids?.stdout.split('\n').filter(Boolean) ?? [];
      if (list.length) await this.docker(['rm', '-f', ...list], { timeoutMs: 60_000 }).catch(() => undefined);
      await this.stop();
    }
    const mounts = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
    const targets = mounts
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((t) => t.startsWith(this.dir))
      .sort((a, b) => b.length - a.length);
    for (const t of targets) await exec('umount', ['-l', t]).catch(() => undefined);
    await removeUserNetworksFromHost(this.dataRoot).catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
    if (this.bridge !== 'none') await removeBridgeFromHost(this.bridge);
  }
}
