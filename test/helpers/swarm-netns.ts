import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type RunResult, runCommand } from './process.js';

const repoRoot = resolve(import.meta.dirname, '../..');

async function ip(args: string[]): Promise<void> {
  const r = await runCommand('ip', args);
  if (r.code !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
}

/**
 * Hosts in network namespaces on one "switch" namespace's bridge, for swarm tests: each host has
 * `eth0` on `<block>.<n>/24`, reaches the others through the switch and nothing else; no address
 * or route appears in the machine's own namespace. `cut(host)`/`restore(host)` take a host's
 * link down and up. `destroy()` removes every namespace.
 */
export class TestNetwork {
  readonly hosts: string[] = [];

  private constructor(
    readonly prefix: string,
    readonly block: string,
  ) {}

  get switchNs(): string {
    return `${this.prefix}sw`;
  }

  static async create(count: number, block = '192.168.203'): Promise<TestNetwork> {
    const net = new TestNetwork(`bs${randomBytes(3).toString('hex')}`, block);
    try {
      await ip(['netns', 'add', net.switchNs]);
      await ip(['-n', net.switchNs, 'link', 'add', 'br0', 'type', 'bridge']);
      await ip(['-n', net.switchNs, 'link', 'set', 'br0', 'up']);
      for (let i = 1; i <= count; i++) {
        const host = `${net.prefix}h${i}`;
        await ip(['netns', 'add', host]);
        net.hosts.push(host);
        await ip([
          '-n',
          net.switchNs,
          'link',
          'add',
          `port${i}`,
          'type',
          'veth',
          'peer',
          'name',
          'eth0',
          'netns',
          host,
        ]);
        await ip(['-n', net.switchNs, 'link', 'set', `port${i}`, 'master', 'br0', 'up']);
        await ip(['-n', host, 'addr', 'add', `${block}.${i}/24`, 'dev', 'eth0']);
        await ip(['-n', host, 'link', 'set', 'eth0', 'up']);
        await ip(['-n', host, 'link', 'set', 'lo', 'up']);
      }
    } catch (err) {
      await net.destroy();
      throw err;
    }
    return net;
  }

  address(i: number): string {
    return `${this.block}.${i}`;
  }

  /** Takes host `i`'s link (its switch port) down or up. */
  async link(i: number, state: 'up' | 'down'): Promise<void> {
    await ip(['-n', this.switchNs, 'link', 'set', `port${i}`, state]);
  }

  /** A command in host `i`'s namespace. */
  exec(i: number, cmd: string[], timeoutMs = 10_000): Promise<RunResult> {
    return runCommand('nsenter', [`--net=/run/netns/${this.hosts[i - 1]}`, ...cmd], { timeoutMs });
  }

  async destroy(): Promise<void> {
    for (const ns of [...this.hosts, this.switchNs]) await runCommand('ip', ['netns', 'del', ns]);
  }
}

/**
 * A berth engine (compiled: dist/) inside host `i` of a TestNetwork, with its own UTS hostname,
 * data root, exec root and socket, started as the fixture says:
 * `nsenter --net=… unshare --uts sh -c 'hostname <h>; exec berth engine …'`. The test reaches it
 * through its socket; it is ended by its pid.
 */
export class NsEngine {
  private child?: ChildProcess;
  private logText = '';

  private constructor(
    readonly dir: string,
    readonly netns: string,
    readonly hostname: string,
    private readonly args: string[],
  ) {}

  get socket(): string {
    return join(this.dir, 'berth.sock');
  }
  get dataRoot(): string {
    return join(this.dir, 'data');
  }

  static async start(netns: string, hostname: string, args: string[] = []): Promise<NsEngine> {
    const dir = await mkdtemp(join(tmpdir(), 'berth-ns-'));
    const e = new NsEngine(dir, netns, hostname, args);
    await e.launch();
    return e;
  }

  log(): string {
    return this.logText;
  }

  async launch(): Promise<void> {
    const engine = [
      process.execPath,
      join(repoRoot, 'dist/cli/main.js'),
      'engine',
      '--host',
      `unix://${this.socket}`,
      '--data-root',
      this.dataRoot,
      '--exec-root',
      join(this.dir, 'exec'),
      '--bridge',
      'none',
      ...this.args,
    ]
      .map((a) => `'${a.replace(/'/g, "'\\''")}'`)
      .join(' ');
    const child = spawn(
      'nsenter',
      [
        `--net=/run/netns/${this.netns}`,
        'unshare',
        '--uts',
        'sh',
        '-c',
        `hostname ${this.hostname}; exec ${engine}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => {
      this.logText += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.logText += d.toString();
    });
    for (let i = 0; i < 300; i++) {
      if (child.exitCode !== null) throw new Error(`engine exited ${child.exitCode}: ${this.logText}`);
      const r = await runCommand('curl', ['-sf', '--unix-socket', this.socket, 'http://x/_ping'], {
        timeoutMs: 2000,
      });
      if (r.code === 0) return;
      await sleep(100);
    }
    throw new Error(`engine did not answer: ${this.logText}`);
  }

  docker(args: string[]): Promise<RunResult> {
    return runCommand('docker', ['-H', `unix://${this.socket}`, ...args], {
      env: { DOCKER_CONFIG: join(this.dir, 'docker-config'), DOCKER_HOST: '', DOCKER_CLI_HINTS: 'false' },
    });
  }

  async dockerOk(args: string[]): Promise<string> {
    const r = await this.docker(args);
    if (r.code !== 0) throw new Error(`docker ${args.join(' ')}: ${r.code}\n${r.stdout}${r.stderr}`);
    return r.stdout.trim();
  }

  /** SIGKILL to the engine (its etcd member, a process of its own, keeps running). */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  }

  async destroy(): Promise<void> {
    // a killed engine's task containers live on (live restore): it comes back to remove them
    const child = this.child;
    if (child && (child.exitCode !== null || child.signalCode !== null))
      await this.launch().catch(() => undefined);
    await this.docker(['swarm', 'leave', '--force']).catch(() => undefined);
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** What a test's context says once it ran (node 20.20 has them; its typings do not yet). */
interface FinishedTest {
  passed?: boolean;
  error?: unknown;
}

/** Log lines of each engine a failed test's error carries. */
const LOG_TAIL_LINES = 40;

/**
 * In a describe body: when one of its tests fails, its error carries the last log lines of each
 * engine (the error is all a CI run shows of a failure; the engines' logs go with their folders).
 */
export function engineLogsOnFailure(engines: () => readonly NsEngine[] | undefined): void {
  afterEach((ctx) => {
    const t = ctx as FinishedTest;
    if (t.passed !== false || !(t.error instanceof Error)) return;
    // (the runner wraps what the test threw: the message printed is the cause's)
    const err = t.error.cause instanceof Error ? t.error.cause : t.error;
    let extra = '';
    for (const e of engines() ?? []) {
      const tail = e.log().trimEnd().split('\n').slice(-LOG_TAIL_LINES).join('\n');
      extra += `\n--- ${e.hostname}: the engine's last ${LOG_TAIL_LINES} log lines ---\n${tail}`;
    }
    // the stack is what is printed, and it may hold the message already (an AssertionError's does)
    const stack = err.stack ?? '';
    const message = err.message;
    err.message += extra;
    err.stack = message && stack.includes(message) ? stack.replace(message, err.message) : `${stack}${extra}`;
  });
}
