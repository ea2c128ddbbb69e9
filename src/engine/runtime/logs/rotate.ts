import { rename, rm, unlink } from 'node:fs/promises';
import type { LogConfig } from '../../../common/docker-types.js';
import { errnoCode, invalidParameter } from '../../../common/errors.js';
import { goParseBool, parseBoolError } from '../../../common/go-strconv.js';

/** max-size / max-file / compress of a container's log, parsed. `maxSize` -1: no limit. */
export interface LogLimits {
  maxSize: number;
  maxFiles: number;
  compress: boolean;
}

const prefixes = ['', 'k', 'm', 'g', 't', 'p'];

/**
 * go-units' size strings: `10m`, `1.5g`, `512k`, `100`, `1kb`, `1 KiB`. json-file reads max-size
 * with FromHumanSize (decimal: k = 1000), the local driver with RAMInBytes (binary: k = 1024).
 */
export function parseSize(value: string, unit: 1000 | 1024 = 1024): number {
  const m = /^(\d+(?:\.\d+)?) ?([kmgtp])?i?b?$/i.exec(value);
  if (!m) throw invalidParameter(`invalid size: '${value}'`);
  return Math.floor(Number(m[1]) * unit ** prefixes.indexOf((m[2] ?? '').toLowerCase()));
}

function parseBool(name: string, value: string): boolean {
  const b = goParseBool(value);
  if (b === undefined) throw invalidParameter(`invalid ${name}: ${parseBoolError(value)}`);
  return b;
}

function parseMaxFile(value: string): number {
  if (!/^[+-]?\d+$/.test(value)) throw invalidParameter(`invalid max-file: ${value}`);
  return Number(value);
}

/**
 * The limits of a LogConfig, validated as dockerd's drivers do when they start. json-file: no
 * limit by default, max-file 1, no compression (max-file means nothing without max-size);
 * local: 20 MiB x 5, compressed. Other types have no limits.
 */
export function parseLogLimits(config: LogConfig | undefined): LogLimits {
  const type = config?.Type || 'json-file';
  const opts = config?.Config ?? {};
  const given = (k: string) => opts[k] !== undefined && opts[k] !== '';
  if (type === 'local') {
    const limits: LogLimits = { maxSize: 20 * 1024 * 1024, maxFiles: 5, compress: true };
    if (given('max-size')) limits.maxSize = parseSize(opts['max-size']!, 1024);
    if (given('max-file')) limits.maxFiles = parseMaxFile(opts['max-file']!);
    if (given('compress')) limits.compress = parseBool('compress', opts.compress!);
    if (limits.maxSize < 0) throw invalidParameter('max size should be a positive number');
    if (limits.maxFiles < 0) throw invalidParameter('max file count cannot be less than 0');
    if (limits.compress && limits.maxFiles <= 1) {
      throw invalidParameter('compression cannot be enabled when max file count is 1');
    }
    // 0 means unlimited for the local driver
    if (limits.maxSize === 0) limits.maxSize = -1;
    if (limits.maxFiles === 0) limits.maxFiles = 1;
    return limits;
  }
  if (type !== 'json-file') return { maxSize: -1, maxFiles: 1, compress: false };
  const limits: LogLimits = { maxSize: -1, maxFiles: 1, compress: false };
  if (given('max-size')) {
    limits.maxSize = parseSize(opts['max-size']!, 1000);
    if (limits.maxSize <= 0) throw invalidParameter('max-size must be a positive number');
  }
  if (given('max-file')) {
    limits.maxFiles = parseMaxFile(opts['max-file']!);
    if (limits.maxFiles < 1) throw invalidParameter('max-file cannot be less than 1');
  }
  if (given('compress')) limits.compress = parseBool('compress', opts.compress!);
  if (limits.compress && (limits.maxFiles < 2 || limits.maxSize === -1)) {
    throw invalidParameter('compress cannot be true when max-file is less than 2 or max-size is not set');
  }
  return limits;
}

/** The least size cap the monitor gets (see monitorLogSizeMax). */
export const MONITOR_LOG_FLOOR = 64 * 1024 * 1024;

/**
 * The size at which conmon empties its output file on its own (`--log-size-max`,
 * StartOptions.logSizeMax): only the bound for while the engine is down (it copies the file into
 * the container's log and has conmon reopen it long before). The budget of max-size x max-file,
 * but at least 64 MiB, so that conmon's own reopen (it counts bytes since its last one, whatever
 * the engine asked meanwhile) never comes before the engine opened the file it replaces.
 * Undefined (no cap) when the log has no size limit.
 */
export function monitorLogSizeMax(limits: LogLimits): number | undefined {
  if (limits.maxSize <= 0) return undefined;
  return Math.max(limits.maxSize * Math.max(1, limits.maxFiles), MONITOR_LOG_FLOOR);
}

async function renameIfExists(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
  }
}

/**
 * Move the log out of the way as json-file does at max-size: `path.(N-2)` -> `path.(N-1)` ...
 * `path` -> `path.1`, the oldest dropped (`.gz` names for compressed ones; a plain file left by a
 * compression that did not finish moves along too). With maxFiles < 2 the log is unlinked (the
 * current dockerd does so: readers keep their file). The caller creates the new file.
 */
export async function rotateFiles(path: string, maxFiles: number): Promise<void> {
  if (maxFiles < 2) {
    await unlink(path).catch((err) => {
      if (errnoCode(err) !== 'ENOENT') throw err;
    });
    return;
  }
  await Promise.all([
    rm(`${path}.${maxFiles - 1}`, { force: true }),
    rm(`${path}.${maxFiles - 1}.gz`, { force: true }),
  ]);
  for (let i = maxFiles - 1; i > 1; i--) {
    await renameIfExists(`${path}.${i - 1}`, `${path}.${i}`);
    await renameIfExists(`${path}.${i - 1}.gz`, `${path}.${i}.gz`);
  }
  await renameIfExists(path, `${path}.1`);
}
