import { invalidParameter } from './errors.js';

/**
 * A time as Go's time.RFC3339Nano prints a UTC time (dockerd's Created, StartedAt, SystemTime,
 * LastTagTime): nanoseconds with trailing zeros dropped. JavaScript dates stop at milliseconds;
 * the nanoseconds within the millisecond are `nanosWithinMs` (default: from the monotonic clock,
 * so that times taken in a row differ).
 */
export function rfc3339Nano(
  date: Date | number = Date.now(),
  nanosWithinMs: number = Number(process.hrtime.bigint() % 1_000_000n),
): string {
  const iso = new Date(date).toISOString(); // 2026-11-21T07:16:04.901Z
  const frac = `${iso.slice(20, 23)}${String(nanosWithinMs).padStart(6, '0')}`.replace(/0+$/, '');
  return frac ? `${iso.slice(0, 19)}.${frac}Z` : `${iso.slice(0, 19)}Z`;
}

/** Parse an RFC 3339 timestamp to milliseconds (sub-ms digits dropped); NaN when invalid. */
export function parseTimestampMs(value: string): number {
  return Date.parse(value.replace(/(\.\d{3})\d+/, '$1'));
}

const GO_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * A filter time as dockerd takes it (`until`): Unix seconds (fraction allowed), an RFC 3339 date
 * or date-time, or a Go duration (`10m`, `1h30m`) before now. Milliseconds since the epoch.
 */
export function parseFilterTime(value: string, now = Date.now()): number {
  if (/^\d+(\.\d+)?$/.test(value)) return Math.floor(Number(value) * 1000);
  if (/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) {
    let ms = 0;
    for (const m of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g))
      ms += Number(m[1]) * (GO_UNITS[m[2] ?? 's'] ?? 0);
    return now - ms;
  }
  const ms = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00Z` : value);
  if (Number.isFinite(ms)) return ms;
  throw invalidParameter(`failed to parse value as time or duration: "${value}"`);
}
