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
