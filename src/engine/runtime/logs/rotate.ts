import { type FSWatcher, watch } from 'node:fs';
import { rename, rm, stat, truncate } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { LogConfig } from '../../../common/docker-types.js';
import { errnoCode, invalidParameter } from '../../../common/errors.js';

/** json-file's max-size / max-file, parsed. `maxSize` -1: no limit. */
export interface LogLimits {
  maxSize: number;
  maxFiles: number;
}

const units: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  m: 1024 ** 2,
  g: 1024 ** 3,
  t: 1024 ** 4,
  p: 1024 ** 5,
};

/** Docker's RAMInBytes: `10m`, `1.5g`, `512k`, `100` (binary units). */
export function parseSize(value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$/i.exec(value);
  if (!m) throw invalidParameter(`invalid size: '${value}'`);
  return Math.floor(Number(m[1]) * units[m[2]!.toLowerCase()]!);
}

/** max-size and max-file of a LogConfig (json-file / k8s-file options), validated as dockerd does. */
export function parseLogLimits(config: LogConfig | undefined): LogLimits {
  const opts = config?.Config ?? {};
  let maxSize = -1;
  let maxFiles = 1;
  if (opts['max-size'] !== undefined && opts['max-size'] !== '') {
    maxSize = parseSize(opts['max-size']);
    if (maxSize <= 0) throw invalidParameter('max-size must be a positive number');
  }
  if (opts['max-file'] !== undefined && opts['max-file'] !== '') {
    maxFiles = Number(opts['max-file']);
    if (!Number.isInteger(maxFiles) || maxFiles < 1) throw invalidParameter('max-file cannot be less than 1');
    if (maxFiles > 1 && maxSize === -1) throw invalidParameter("max-file can't be set without max-size");
  }
  return { maxSize, maxFiles };
}

/**
 * The size conmon enforces on its own (`--log-size-max`, StartOptions.logSizeMax) while the engine
 * is not there to rotate: the whole budget of max-size x max-file. conmon's own "rotation" empties
 * the log (it counts bytes since it started, not the file size), so it is only the safety cap.
 */
export function monitorLogSizeMax(limits: LogLimits): number | undefined {
  if (limits.maxSize <= 0) return undefined;
  return limits.maxSize * Math.max(1, limits.maxFiles);
}

/**
 * Rotate a log as json-file does: `path.(N-2)` -> `path.(N-1)` ... `path` -> `path.1`, dropping
 * the oldest; with maxFiles < 2 the log is emptied instead. Returns true when the monitor must
 * reopen its log (driver.reopenLog): it keeps writing to the renamed file until then.
 */
export async function rotateLog(path: string, maxFiles: number): Promise<boolean> {
  if (maxFiles < 2) {
    try {
      await truncate(path, 0);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    return false;
  }
  await rm(`${path}.${maxFiles - 1}`, { force: true });
  for (let i = maxFiles - 2; i >= 1; i--) {
    try {
      await rename(`${path}.${i}`, `${path}.${i + 1}`);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
  }
  try {
    await rename(path, `${path}.1`);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
  return true;
}

/** Whether the log reached max-size. */
export async function logNeedsRotation(path: string, maxSize: number): Promise<boolean> {
  if (maxSize <= 0) return false;
  try {
    return (await stat(path)).size >= maxSize;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/** The size check the engine calls: rotate (and have the monitor reopen) when max-size is reached. */
export async function rotateLogIfNeeded(
  path: string,
  limits: LogLimits,
  reopen: () => Promise<void>,
): Promise<boolean> {
  if (!(await logNeedsRotation(path, limits.maxSize))) return false;
  if (await rotateLog(path, limits.maxFiles)) await reopen();
  return true;
}

/**
 * Watches a running container's log (fs.watch, no polling) and rotates it when it reaches
 * max-size. Checks are coalesced: at most one at a time, one more if writes came in meanwhile.
 */
export class LogRotationWatcher {
  private watcher: FSWatcher | null = null;
  private running = false;
  private again = false;

  constructor(
    private readonly path: string,
    private readonly limits: LogLimits,
    private readonly reopen: () => Promise<void>,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  start(): this {
    if (this.limits.maxSize <= 0) return this;
    const base = basename(this.path);
    this.watcher = watch(dirname(this.path), { persistent: false }, (_e, name) => {
      if (name?.toString() === base) this.check();
    });
    this.watcher.on('error', (err) => this.onError(err));
    this.check();
    return this;
  }

  check(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    rotateLogIfNeeded(this.path, this.limits, this.reopen)
      .catch((err) => this.onError(err))
      .finally(() => {
        this.running = false;
        if (this.again && this.watcher) {
          this.again = false;
          this.check();
        }
      });
  }

  close(): void {
    this.watcher?.close();
    this.watcher = null;
  }
}
