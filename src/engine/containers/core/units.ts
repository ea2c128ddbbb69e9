import { invalidParameter } from '../../../common/errors.js';

/**
 * Docker's size strings (`10m`, `1.5g`, `512k`, `100`): binary multiples, case-insensitive,
 * an optional `b`/`ib` suffix. Returns bytes.
 */
export function parseRamSize(value: string, what = 'size'): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?$/i.exec(value.trim());
  if (!m) throw invalidParameter(`invalid ${what}: '${value}'`);
  const mult: Record<string, number> = {
    '': 1,
    k: 1024,
    m: 1024 ** 2,
    g: 1024 ** 3,
    t: 1024 ** 4,
    p: 1024 ** 5,
  };
  return Math.floor(Number(m[1]) * (mult[(m[2] ?? '').toLowerCase()] ?? 1));
}

/** Docker's HumanDuration ("Less than a second", "About a minute", "3 hours"...). */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < 1) return 'Less than a second';
  if (seconds === 1) return '1 second';
  if (seconds < 60) return `${seconds} seconds`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes === 1) return 'About a minute';
  if (minutes < 60) return `${minutes} minutes`;
  const hours = Math.round(ms / 3_600_000);
  if (hours === 1) return 'About an hour';
  if (hours < 48) return `${hours} hours`;
  if (hours < 24 * 7 * 2) return `${Math.floor(hours / 24)} days`;
  if (hours < 24 * 30 * 2) return `${Math.floor(hours / 24 / 7)} weeks`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24 / 30)} months`;
  return `${Math.floor(ms / 3_600_000 / 24 / 365)} years`;
}

/** A sortable key for an RFC 3339 UTC timestamp (fraction padded to nanoseconds). */
export function timeKey(ts: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) return ts;
  return `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}Z`;
}
