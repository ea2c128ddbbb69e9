import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { type RunResult, requireTool, runCommand } from './process.js';

export type { RunResult };

const exec = promisify(execFile);

export interface DockerRunOptions {
  input?: string | Buffer;
  timeoutMs?: number;
  env?: Record<string, string>;
  /** Another docker CLI binary for this call. */
  cli?: string;
}

export interface ReferenceDockerdOptions {
  /** `host:port` (or CIDR) entries passed as `--insecure-registry`. */
  insecureRegistries?: string[];
  /** URLs passed as `--registry-mirror` (docker.io pulls go to them first). */
  registryMirrors?: string[];
  /** The docker CLI to drive it with (default: Debian's /usr/bin/docker, else `docker` on PATH). */
  cli?: string;
  /** How long to wait for /_ping (default 30 s). */
  startTimeoutMs?: number;
}

/** The docker CLI of Debian's docker.io package when present (it matches dockerd 20.10). */
function defaultCli(): string {
  return existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';
}

/** True while a process exists and is not a zombie. */
async function alive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // "pid (comm) S ...": the state follows the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== '' && state !== 'Z' && state !== 'X';
}

async function waitGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!(await alive(pid))) return true;
    await sleep(100);
  }
  return !(await alive(pid));
}

/**
 * Debian's dockerd (docker.io 20.10, the reference engine) with its own managed containerd, on
 * its own socket, data root, exec root and pid file under a temp dir, for client tests against
 * berth. Started with `--iptables=false --ip-masq=false` (never `--bridge=none`, which deletes
 * the host's docker0); stopped by PID, never by name.
 */
export class ReferenceDockerd {
  readonly socket: string;
  readonly dataRoot: string;
  readonly execRoot: string;
  readonly pidFile: string;
  /** The managed containerd's socket (for `ctr --address`). */
  readonly containerdSocket: string;
  /** DOCKER_CONFIG of the CLI (credentials of `docker login` land here). */
  readonly dockerConfig: string;
  readonly cli: string;
  private child?: ChildProcess;
  private containerdPid?: number;
  private logChunks: Buffer[] = [];

  private constructor(
    readonly dir: string,
    private readonly opts: ReferenceDockerdOptions,
  ) {
    this.socket = join(dir, 'docker.sock');
    this.dataRoot = join(dir, 'data');
    this.execRoot = join(dir, 'exec');
    this.pidFile = join(dir, 'docker.pid');
    this.containerdSocket = join(this.execRoot, 'containerd', 'containerd.sock');
    this.dockerConfig = join(dir, 'docker-config');
    this.cli = opts.cli ?? defaultCli();
  }

  static async start(opts: ReferenceDockerdOptions = {}): Promise<ReferenceDockerd> {
    requireTool('dockerd', "Debian's docker.io package is needed (scripts/install-deps.sh)");
    const dir = await mkdtemp(join(tmpdir(), 'berth-refd-'));
    const d = new ReferenceDockerd(dir, opts);
    requireTool(d.cli, "the docker CLI is needed (Debian's docker.io package)");
    try {
      await d.launch();
    } catch (err) {
      await d.destroy().catch(() => undefined);
      throw err;
    }
    return d;
  }

  get host(): string {
    return `unix://${this.socket}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** What dockerd printed so far (for failure messages). */
  log(): string {
    return Buffer.concat(this.logChunks).toString('utf8');
  }

  private async launch(): Promise<void> {
    await mkdir(this.dockerConfig, { recursive: true });
    const args = [
      '--host',
      this.host,
      '--data-root',
      this.dataRoot,
      '--exec-root',
      this.execRoot,
      '--pidfile',
      this.pidFile,
      '--iptables=false',
      '--ip-masq=false',
      ...(this.opts.insecureRegistries ?? []).flatMap((r) => ['--insecure-registry', r]),
      ...(this.opts.registryMirrors ?? []).flatMap((m) => ['--registry-mirror', m]),
    ];
    const child = spawn('dockerd', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => this.logChunks.push(d));
    child.stderr?.on('data', (d: Buffer) => this.logChunks.push(d));
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 30_000);
    while (Date.now() < deadline) {
      const err = await Promise.race([spawnError, sleep(100).then(() => undefined)]);
      if (err) throw new Error(`dockerd could not be started: ${err.message}`);
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`dockerd exited (${child.exitCode ?? child.signalCode}):\n${this.log()}`);
      }
      const ok = await this.ping().catch(() => false);
      if (ok) {
        const pid = await readFile(join(this.execRoot, 'containerd', 'containerd.pid'), 'utf8').catch(
          () => '',
        );
        if (/^\d+$/.test(pid.trim())) this.containerdPid = Number(pid.trim());
        if (!existsSync(this.containerdSocket)) {
          throw new Error(`dockerd's managed containerd has no socket at ${this.containerdSocket}`);
        }
        return;
      }
    }
    throw new Error(`dockerd did not answer /_ping within the timeout:\n${this.log()}`);
  }

  private ping(): Promise<boolean> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ socketPath: this.socket, method: 'GET', path: '/_ping' }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
      });
      req.setTimeout(2_000, () => req.destroy(new Error('ping timed out')));
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * The docker CLI against this daemon (DOCKER_CONFIG = `dockerConfig` unless `env` says
   * otherwise; `cli` picks another docker binary for this call).
   */
  docker(args: string[], opts: DockerRunOptions = {}): Promise<RunResult> {
    return runCommand(opts.cli ?? this.cli, ['-H', this.host, ...args], {
      ...opts,
      env: {
        DOCKER_CONFIG: this.dockerConfig,
        DOCKER_HOST: '',
        DOCKER_CONTEXT: '',
        DOCKER_CLI_HINTS: 'false',
        ...opts.env,
      },
    });
  }

  /** docker(...) that must succeed; returns trimmed stdout. */
  async dockerOk(args: string[], opts: DockerRunOptions = {}): Promise<string> {
    const r = await this.docker(args, opts);
    if (r.code !== 0) {
      throw new Error(`docker ${args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    }
    return r.stdout.trim();
  }

  /** containerd's `ctr` against the managed containerd. */
  ctr(args: string[], opts: { timeoutMs?: number } = {}): Promise<RunResult> {
    requireTool('ctr', "containerd's ctr is needed (Debian's containerd package)");
    return runCommand('ctr', ['--address', this.containerdSocket, ...args], opts);
  }

  /** ctr(...) that must succeed; returns trimmed stdout. */
  async ctrOk(args: string[], opts: { timeoutMs?: number } = {}): Promise<string> {
    const r = await this.ctr(args, opts);
    if (r.code !== 0) {
      throw new Error(`ctr ${args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    }
    return r.stdout.trim();
  }

  /**
   * SIGTERM dockerd by its PID and wait for it (SIGKILL after 20 s), then wait for its managed
   * containerd (which dockerd stops) to be gone too (SIGKILL by its PID after 10 s).
   */
  async stop(): Promise<void> {
    const child = this.child;
    if (child?.pid && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    const ctd = this.containerdPid;
    if (ctd !== undefined && !(await waitGone(ctd, 10_000))) {
      try {
        process.kill(ctd, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
      await waitGone(ctd, 5_000);
    }
  }

  /** Stop, unmount whatever is left under the temp dir (deepest first) and delete it. */
  async destroy(): Promise<void> {
    await this.stop();
    const mounts = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
    const targets = mounts
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((t) => t === this.dir || t.startsWith(`${this.dir}/`))
      .sort((a, b) => b.length - a.length);
    for (const t of targets) await exec('umount', ['-l', t]).catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
  }
}
