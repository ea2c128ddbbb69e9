import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../../common/log.js';
import { ETCD_SOCKET_NAME, type EtcdMemberSpec, etcdArgs } from './etcd-args.js';
import type { EtcdProcessHost } from './etcd-process.js';

export interface EtcdSupervisorOptions {
  binary: string;
  /** `<exec-root>/swarm`: mode 0700, etcd's working directory, its socket, pid file and log. */
  runDir: string;
  host: EtcdProcessHost;
  log: Logger;
  /** Waits until the member answers on its socket (a status call); rejects after the time given. */
  ready: (socketPath: string, timeoutMs: number) => Promise<void>;
  /** Delay before a restart after the member died, doubled up to 10 s (default 500 ms). */
  restartDelayMs?: number;
  /** How often an adopted member (not our child) is checked for life (default 1 s). */
  pollMs?: number;
}

/**
 * Runs one etcd member for a manager and keeps it running: started in its own session with its
 * pid in `<run>/etcd.pid`, restarted when it dies, ended on `stop()`. A member left running by an
 * engine killed with SIGKILL is adopted (its pid file, and a command line naming our data dir)
 * rather than started twice.
 */
export class EtcdSupervisor {
  private pid?: number;
  private spec?: EtcdMemberSpec;
  private stopping = false;
  private restartDelay: number;
  private poller?: NodeJS.Timeout;
  private restarting = false;
  /** The restart a death scheduled (stop() and start() cancel it: it belongs to the member before). */
  private restartTimer?: NodeJS.Timeout;
  /** While start() waits for a member it launched: its early exit fails the start (no restart). */
  private onEarlyExit?: (why: string) => void;

  constructor(private readonly opts: EtcdSupervisorOptions) {
    this.restartDelay = opts.restartDelayMs ?? 500;
  }

  get socketPath(): string {
    return join(this.opts.runDir, ETCD_SOCKET_NAME);
  }

  get pidFile(): string {
    return join(this.opts.runDir, 'etcd.pid');
  }

  get running(): boolean {
    return this.pid !== undefined;
  }

  /** The member's pid (for tests and /info), while it runs. */
  get memberPid(): number | undefined {
    return this.pid;
  }

  /**
   * Starts the member (or adopts the one already running on this data dir) and waits until it
   * answers. `spec.clusterState` matters only for a data dir not yet made.
   */
  async start(spec: EtcdMemberSpec, timeoutMs = 20_000): Promise<void> {
    // a restart still pending from the member before (its death, then stop()) must not launch a
    // second etcd beside this one: it would remove this one's socket and fight it for the ports
    this.cancelRestart();
    this.restartDelay = this.opts.restartDelayMs ?? 500;
    this.spec = spec;
    this.stopping = false;
    await mkdir(this.opts.runDir, { recursive: true, mode: 0o700 });
    await chmod(this.opts.runDir, 0o700);
    await mkdir(spec.dataDir, { recursive: true, mode: 0o700 });
    const adopted = await this.findRunning(spec.dataDir);
    if (adopted !== undefined) {
      this.pid = adopted;
      this.watchAdopted(adopted);
      this.opts.log.info('adopted the running etcd member', { pid: adopted });
      await this.opts.ready(this.socketPath, timeoutMs);
      return;
    }
    // a member that exits before it answers (a busy port, bad data) fails the start at once
    let exited: (why: string) => void = () => {};
    const early = new Promise<never>((_, reject) => {
      exited = (why) => reject(new Error(`etcd could not start: ${why}`));
    });
    early.catch(() => {});
    this.onEarlyExit = exited;
    try {
      await this.launch();
      await Promise.race([this.opts.ready(this.socketPath, timeoutMs), early]);
    } finally {
      this.onEarlyExit = undefined;
    }
    // --force-new-cluster is for this start only: a restart must not cut the cluster down again
    if (spec.forceNewCluster) this.spec = { ...spec, forceNewCluster: false };
  }

  /** Ends the member: SIGTERM, SIGKILL after `graceMs`; it is not restarted. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    this.cancelRestart();
    if (this.poller) clearInterval(this.poller);
    this.poller = undefined;
    const pid = this.pid;
    this.pid = undefined;
    if (pid !== undefined && (await this.isOurs(pid))) {
      this.opts.host.signal(pid, 'SIGTERM');
      const deadline = Date.now() + graceMs;
      while (Date.now() < deadline && (await this.isOurs(pid))) await sleep(50);
      if (await this.isOurs(pid)) {
        this.opts.host.signal(pid, 'SIGKILL');
        for (let i = 0; i < 100 && (await this.isOurs(pid)); i++) await sleep(20);
      }
    }
    await rm(this.pidFile, { force: true });
    await rm(this.socketPath, { force: true });
  }

  private async launch(): Promise<void> {
    const spec = this.spec;
    if (!spec) return;
    // a socket file left by a member that died would make its successor's listen fail
    await rm(this.socketPath, { force: true });
    const pid = this.opts.host.start(
      this.opts.binary,
      etcdArgs(spec),
      this.opts.runDir,
      join(this.opts.runDir, 'etcd.log'),
      (code) => {
        if (this.pid === pid) this.died(`exit status ${code}`);
      },
    );
    this.pid = pid;
    await writeFile(this.pidFile, `${pid}\n`, { mode: 0o600 });
    this.opts.log.info('etcd member started', { pid, name: spec.name });
  }

  /** A member adopted from an earlier engine is not our child: its death is seen by polling. */
  private watchAdopted(pid: number): void {
    if (this.poller) clearInterval(this.poller);
    this.poller = setInterval(() => {
      void this.isOurs(pid).then((alive) => {
        if (!alive && this.pid === pid) {
          clearInterval(this.poller);
          this.poller = undefined;
          this.died('gone');
        }
      });
    }, this.opts.pollMs ?? 1000);
    this.poller.unref();
  }

  private died(why: string): void {
    this.pid = undefined;
    if (this.onEarlyExit) {
      const report = this.onEarlyExit;
      this.onEarlyExit = undefined;
      void this.lastError().then((err) => report(err ?? why));
      return;
    }
    if (this.stopping || this.restarting) return;
    this.restarting = true;
    const delay = this.restartDelay;
    this.restartDelay = Math.min(this.restartDelay * 2, 10_000);
    this.opts.log.warn('etcd member died; restarting it', { why, delayMs: delay });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restarting = false;
      if (this.stopping) return;
      this.launch()
        .then(
          () =>
            this.opts.ready(this.socketPath, 20_000).then(() => {
              this.restartDelay = this.opts.restartDelayMs ?? 500;
            }),
          (err: Error) => this.opts.log.error('cannot restart the etcd member', { error: err.message }),
        )
        .catch((err: Error) =>
          this.opts.log.warn('the restarted etcd member is not answering yet', { error: err.message }),
        );
    }, delay).unref();
  }

  private cancelRestart(): void {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    this.restarting = false;
  }

  /** The last `error` etcd wrote to its log (zap's JSON lines), if any. */
  private async lastError(): Promise<string | undefined> {
    const log = await readFile(join(this.opts.runDir, 'etcd.log'), 'utf8').catch(() => '');
    const lines = log.trimEnd().split('\n').slice(-20).reverse();
    for (const line of lines) {
      try {
        const entry = JSON.parse(line) as { error?: unknown };
        if (typeof entry.error === 'string') return entry.error;
      } catch {}
    }
    return undefined;
  }

  /** The pid in the pid file, when that process is an etcd on our data dir. */
  private async findRunning(dataDir: string): Promise<number | undefined> {
    const pid = Number((await readFile(this.pidFile, 'utf8').catch(() => '')).trim());
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    const cmd = await this.opts.host.commandLine(pid);
    return cmd?.includes(`--data-dir=${dataDir}`) ? pid : undefined;
  }

  private async isOurs(pid: number): Promise<boolean> {
    const cmd = await this.opts.host.commandLine(pid);
    return cmd !== undefined && this.spec !== undefined && cmd.includes(`--data-dir=${this.spec.dataDir}`);
  }
}
