import type { HealthConfig } from '../../../common/docker-types.js';
import { errorMessage } from '../../../common/errors.js';
import { randomId } from '../../../common/ids.js';
import { type LongTimer, setLongTimeout } from '../../../common/long-timer.js';
import { rfc3339Nano } from '../../../common/time.js';
import type { ExecDriver } from '../../runtime/runtime.types.js';
import type { Container } from './container.js';
import type { ContainerEvents } from './events.js';
import type { HealthLogEntry } from './record.types.js';
import type { ContainerStore } from './store.js';

/**
 * Health checks as dockerd runs them: the Healthcheck test runs in the container (an exec) every
 * Interval (StartInterval during StartPeriod), Timeout bounds each probe, Retries consecutive
 * failures make the container unhealthy; failures during StartPeriod do not count. State.Health
 * keeps the last five probes; a change of status emits `health_status: <status>`.
 */

const NS = 1_000_000;
const DEFAULTS = { interval: 30_000, timeout: 30_000, startInterval: 5_000, retries: 3 };
const MAX_LOG = 5;
const MAX_OUTPUT = 4096;

/** The probe's command, or undefined when the container has no (enabled) health check. */
export function probeCommand(hc: HealthConfig | null | undefined): string[] | undefined {
  const test = hc?.Test ?? [];
  if (test.length === 0 || test[0] === 'NONE') return undefined;
  if (test[0] === 'CMD') return test.length > 1 ? test.slice(1) : undefined;
  if (test[0] === 'CMD-SHELL')
    return test.length > 1 ? ['/bin/sh', '-c', test.slice(1).join(' ')] : undefined;
  return undefined;
}

/** What a health check needs: exec in the container, its events, its record saved. */
export interface HealthDeps {
  runtime: ExecDriver;
  events: ContainerEvents;
  store: ContainerStore;
}

/** The health monitors of the running containers. */
export class HealthChecks {
  private readonly monitors = new Map<string, HealthMonitor>();

  constructor(private readonly deps: HealthDeps) {}

  /** Start probing (a start: `fresh`, status `starting`; a restore: the status kept). */
  start(c: Container, fresh: boolean): void {
    this.stop(c);
    const cmd = probeCommand(c.record.Config.Healthcheck);
    if (!cmd) return;
    if (fresh) c.state.Health = { Status: 'starting', FailingStreak: 0, Log: c.state.Health?.Log ?? [] };
    const monitor = new HealthMonitor(this.deps, c, cmd);
    this.monitors.set(c.id, monitor);
    monitor.start();
  }

  stop(c: Container): void {
    this.monitors.get(c.id)?.stop();
    this.monitors.delete(c.id);
  }

  stopAll(): void {
    for (const m of this.monitors.values()) m.stop();
    this.monitors.clear();
  }
}

export class HealthMonitor {
  private timer?: LongTimer;
  private stopped = false;
  private readonly started = Date.now();

  constructor(
    private readonly deps: HealthDeps,
    private readonly c: Container,
    private readonly cmd: string[],
  ) {}

  private get cfg(): HealthConfig {
    return this.c.record.Config.Healthcheck ?? {};
  }

  start(): void {
    const s = this.c.state;
    if (!s.Health || s.Health.Status === 'none') s.Health = { Status: 'starting', FailingStreak: 0, Log: [] };
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.clear();
  }

  private inStartPeriod(): boolean {
    const period = (this.cfg.StartPeriod ?? 0) / NS;
    return period > 0 && Date.now() - this.started < period;
  }

  private schedule(): void {
    if (this.stopped) return;
    const interval = (this.cfg.Interval ?? 0) / NS || DEFAULTS.interval;
    const startInterval = (this.cfg.StartInterval ?? 0) / NS || DEFAULTS.startInterval;
    const delay = this.inStartPeriod() && this.cfg.StartInterval ? startInterval : interval;
    this.timer = setLongTimeout(() => void this.probe(), delay, { unref: true });
  }

  private async probe(): Promise<void> {
    if (this.stopped || !this.c.isRunningProcess || this.c.state.Paused) {
      this.schedule();
      return;
    }
    const entry = await this.run().catch(
      (err): HealthLogEntry => ({
        Start: rfc3339Nano(),
        End: rfc3339Nano(),
        ExitCode: -1,
        Output: errorMessage(err),
      }),
    );
    if (this.stopped) return;
    await this.record(entry);
    this.schedule();
  }

  private async run(): Promise<HealthLogEntry> {
    const { deps, c } = this;
    const execId = randomId();
    const start = rfc3339Nano();
    const timeoutMs = (this.cfg.Timeout ?? 0) / NS || DEFAULTS.timeout;
    const chunks: Buffer[] = [];
    let size = 0;
    const cmdText = this.cmd.join(' ');
    deps.events.emit(c, `exec_create: ${cmdText}`, { execID: execId });
    deps.events.emit(c, `exec_start: ${cmdText}`, { execID: execId });
    const proc = await deps.runtime.exec({
      id: c.id,
      execId,
      config: { Cmd: this.cmd, User: c.record.Config.User ?? '', GroupAdd: c.hostConfig.GroupAdd ?? null },
      stdin: false,
      beforeStart: async () => {
        const conn = await deps.runtime.attachExec(execId);
        const take = (d: Buffer) => {
          if (size >= MAX_OUTPUT) return;
          chunks.push(d.subarray(0, MAX_OUTPUT - size));
          size += Math.min(d.length, MAX_OUTPUT - size);
        };
        conn.on('stdout', take);
        conn.on('stderr', take);
        conn.on('error', () => undefined);
      },
    });
    let timer: LongTimer | undefined;
    const timedOut = new Promise<{ exitCode: number; error: string }>((resolve) => {
      timer = setLongTimeout(
        () => resolve({ exitCode: -1, error: `Health check exceeded timeout (${timeoutMs / 1000}s)` }),
        timeoutMs,
        { unref: true },
      );
    });
    const result = await Promise.race([proc.exited, timedOut]);
    timer?.clear();
    deps.events.emit(c, 'exec_die', { execID: execId, exitCode: String(result.exitCode) });
    const output =
      result.error && result.exitCode === -1 ? result.error : Buffer.concat(chunks).toString('utf8');
    return { Start: start, End: rfc3339Nano(), ExitCode: result.exitCode, Output: output };
  }

  private async record(entry: HealthLogEntry): Promise<void> {
    const { deps, c } = this;
    const h = c.state.Health ?? { Status: 'starting' as const, FailingStreak: 0, Log: [] };
    const before = h.Status;
    h.Log = [...h.Log, entry].slice(-MAX_LOG);
    if (entry.ExitCode === 0) {
      h.FailingStreak = 0;
      h.Status = 'healthy';
    } else if (!this.inStartPeriod() || h.Status !== 'starting') {
      h.FailingStreak++;
      const retries = this.cfg.Retries || DEFAULTS.retries;
      if (h.FailingStreak >= retries) h.Status = 'unhealthy';
    }
    c.state.Health = h;
    if (h.Status !== before) deps.events.emit(c, `health_status: ${h.Status}`);
    await deps.store.persist(c).catch(() => undefined);
  }
}
