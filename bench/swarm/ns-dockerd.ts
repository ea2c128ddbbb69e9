import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runCommand } from '../../test/helpers/process.js';

/** The cgroup v1 controllers (or the v2 root) `--cgroup-parent /<name>` makes a directory in. */
const CGROUP_ROOT = '/sys/fs/cgroup';

/**
 * Debian's dockerd 20.10 inside host namespace `netns` of a TestNetwork, as issue 14's benchmark
 * runs the anchor: `nsenter --net=… unshare --uts sh -c 'hostname <h>; exec dockerd --data-root D/data
 * --exec-root D/run --pidfile D/dockerd.pid -H unix://D/docker.sock --cgroup-parent /<netns>'`; it
 * starts its own containerd under its exec root. `DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1` keeps its
 * swarm executor from trying the (unreachable) registry before each task, as berth's agent does
 * with an image it has. Ended by its pid; `destroy()` removes its mounts, directory and cgroups.
 */
export class NsDockerd {
  private child?: ChildProcess;
  private logText = '';

  private constructor(
    readonly dir: string,
    readonly netns: string,
    readonly hostname: string,
  ) {}

  get socket(): string {
    return join(this.dir, 'docker.sock');
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  static async start(netns: string, hostname: string): Promise<NsDockerd> {
    const d = new NsDockerd(await mkdtemp(join(tmpdir(), 'berth-bench-dockerd-')), netns, hostname);
    await d.launch();
    return d;
  }

  log(): string {
    return this.logText;
  }

  private async launch(): Promise<void> {
    const dockerd = [
      'dockerd',
      '--data-root',
      join(this.dir, 'data'),
      '--exec-root',
      join(this.dir, 'run'),
      '--pidfile',
      join(this.dir, 'dockerd.pid'),
      '-H',
      `unix://${this.socket}`,
      '--cgroup-parent',
      `/${this.netns}`,
    ].join(' ');
    const child = spawn(
      'nsenter',
      [
        `--net=/run/netns/${this.netns}`,
        'unshare',
        '--uts',
        'sh',
        '-c',
        `hostname ${this.hostname}; exec ${dockerd}`,
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: '1' },
      },
    );
    this.child = child;
    const keep = (d: Buffer): void => {
      this.logText = (this.logText + d.toString()).slice(-20_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    for (let i = 0; i < 300; i++) {
      if (child.exitCode !== null) throw new Error(`dockerd exited ${child.exitCode}: ${this.logText}`);
      const r = await runCommand('curl', ['-sf', '--unix-socket', this.socket, 'http://x/_ping'], {
        timeoutMs: 2000,
      });
      if (r.code === 0) return;
      await sleep(100);
    }
    throw new Error(`dockerd did not answer: ${this.logText}`);
  }

  /** Its managed containerd's pid (from the pid file under its exec root). */
  async containerdPid(): Promise<number | undefined> {
    const raw = await readFile(join(this.dir, 'run', 'containerd', 'containerd.pid'), 'utf8').catch(() => '');
    return /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : undefined;
  }

  private async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const ctd = await this.containerdPid();
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
    // dockerd ends the containerd it started; a containerd left by a killed dockerd is ended here.
    if (ctd !== undefined) {
      for (let i = 0; i < 50; i++) {
        try {
          process.kill(ctd, i < 40 ? 0 : 'SIGKILL');
        } catch {
          break;
        }
        await sleep(100);
      }
    }
  }

  async destroy(): Promise<void> {
    await this.stop();
    const mounts = await runCommand('findmnt', ['-rn', '-o', 'TARGET']);
    const under = mounts.stdout
      .split('\n')
      .filter((m) => m.startsWith(`${this.dir}/`))
      .sort()
      .reverse();
    for (const m of under) await runCommand('umount', ['-l', m]);
    await rm(this.dir, { recursive: true, force: true });
    const controllers = (await runCommand('ls', [CGROUP_ROOT])).stdout.split('\n').filter(Boolean);
    for (const c of ['', ...controllers])
      await rmdir(join(CGROUP_ROOT, c, this.netns)).catch(() => undefined);
  }
}
