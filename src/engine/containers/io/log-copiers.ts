import { errorMessage } from '../../../common/errors.js';
import { userGoRegExp } from '../../../common/go-regexp.js';
import type { Logger } from '../../../common/log.js';
import { LogCopier, type LogLimits, monitorLogSizeMax, parseLogLimits } from '../../runtime/index.js';
import type { RuntimeDriver } from '../../runtime/runtime.types.js';
import type { Container } from '../core/container.js';
import type { LogsPort } from '../core/ports.js';

/**
 * The engine as the containers' log writer (dockerd's copier + json-file driver): a LogCopier per
 * running container turns what its monitor writes (conmon's k8s-file, in the runtime's directory
 * for the container) into the container's json-file log at LogPath.
 */

/** Whether the container's output is logged (every log type but `none`). */
export function writesLog(c: Container): boolean {
  return c.hostConfig.LogConfig?.Type !== 'none';
}

/** max-size / max-file / compress of the container's log (json-file's, or local's defaults). */
export function logLimits(c: Container): LogLimits {
  return parseLogLimits(c.hostConfig.LogConfig);
}

/**
 * json-file's `attrs` of the container's entries, as moby's Info.ExtraAttributes: the labels
 * named by `labels` or matching `labels-regex`, the environment variables named by `env` or
 * matching `env-regex`. Undefined when there are none.
 */
export function logAttributes(c: Container): Record<string, string> | undefined {
  const lc = c.hostConfig.LogConfig;
  if ((lc?.Type || 'json-file') !== 'json-file') return undefined;
  const cfg = lc?.Config ?? {};
  const out: Record<string, string> = {};
  const labels = c.record.Config.Labels ?? {};
  for (const l of (cfg.labels ?? '').split(',')) if (l && Object.hasOwn(labels, l)) out[l] = labels[l]!;
  if (cfg['labels-regex']) {
    const re = userGoRegExp(cfg['labels-regex']);
    for (const [k, v] of Object.entries(labels)) if (re.test(k)) out[k] = v;
  }
  const env = new Map<string, string>();
  for (const e of c.record.Config.Env ?? []) {
    const i = e.indexOf('=');
    if (i >= 0) env.set(e.slice(0, i), e.slice(i + 1));
  }
  for (const k of (cfg.env ?? '').split(',')) if (k && env.has(k)) out[k] = env.get(k)!;
  if (cfg['env-regex']) {
    const re = userGoRegExp(cfg['env-regex']);
    for (const [k, v] of env) if (re.test(k)) out[k] = v;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The log copiers of the running containers. */
export class ContainerLogs implements LogsPort {
  private readonly copiers = new Map<string, Promise<LogCopier | null>>();

  constructor(
    private readonly runtime: Pick<RuntimeDriver, 'monitorLogPath' | 'reopenLog'>,
    private readonly log: Logger,
  ) {}

  monitorOptions(c: Container): { logPath?: string; logSizeMax?: number } {
    if (!writesLog(c)) return {};
    // the monitor writes there; the copier turns it into the container's log
    const cap = monitorLogSizeMax(logLimits(c));
    return { logPath: this.runtime.monitorLogPath(c.id), ...(cap ? { logSizeMax: cap } : {}) };
  }

  private open(c: Container): Promise<LogCopier | null> {
    if (!writesLog(c)) return Promise.resolve(null);
    const id = c.id;
    const onError = (err: unknown) =>
      this.log.warn('container log copy failed', { id, error: errorMessage(err) });
    return LogCopier.start({
      source: this.runtime.monitorLogPath(id),
      target: c.record.LogPath,
      limits: logLimits(c),
      attrs: logAttributes(c),
      reopen: () => this.runtime.reopenLog(id),
      onError,
    }).catch((err) => {
      onError(err);
      return null;
    });
  }

  /** Copy the running container's output into its log from now on (start, restore). */
  start(c: Container): void {
    if (!this.copiers.has(c.id)) this.copiers.set(c.id, this.open(c));
  }

  /**
   * The container's process ended: copy what is left. Once this resolves its log is complete.
   * Works without start() too (the exit happened while the engine was down).
   */
  async finish(c: Container): Promise<void> {
    const copier = this.copiers.get(c.id) ?? this.open(c);
    this.copiers.delete(c.id);
    try {
      await (await copier)?.finish();
    } catch (err) {
      this.log.warn('container log copy failed', { id: c.id, error: errorMessage(err) });
    }
  }

  /** Stop copying for a container being removed (its log goes with it). */
  async stop(c: Container): Promise<void> {
    const copier = this.copiers.get(c.id);
    this.copiers.delete(c.id);
    await (await copier)?.close().catch(() => undefined);
  }

  /** Stop copying (engine shutdown): the containers go on, the next engine takes up from here. */
  async close(): Promise<void> {
    const all = [...this.copiers.values()];
    this.copiers.clear();
    await Promise.all(all.map(async (p) => (await p)?.close().catch(() => undefined)));
  }
}
