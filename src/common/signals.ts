import { constants } from 'node:os';
import { invalidParameter } from './errors.js';

const SIGNALS = constants.signals as Record<string, number>;

/**
 * Parse a signal as dockerd does: a number, or a name with or without the SIG prefix, in any
 * case (`9`, `KILL`, `sigkill`, `SIGRTMIN+3`). Throws InvalidParameter `Invalid signal: x`.
 */
export function parseSignal(raw: string | number): number {
  if (typeof raw === 'number') {
    if (Number.isInteger(raw) && raw > 0 && raw <= 64) return raw;
    throw invalidParameter(`Invalid signal: ${raw}`);
  }
  const value = raw.trim();
  if (/^\d+$/.test(value)) {
    const n = Number(value);
    if (n > 0 && n <= 64) return n;
    throw invalidParameter(`Invalid signal: ${raw}`);
  }
  let name = value.toUpperCase();
  if (!name.startsWith('SIG')) name = `SIG${name}`;
  const rt = /^SIGRTM(IN|AX)([+-]\d+)?$/.exec(name);
  if (rt) {
    const base = rt[1] === 'IN' ? 34 : 64;
    const n = base + Number(rt[2] ?? 0);
    if (n >= 34 && n <= 64) return n;
  }
  const n = SIGNALS[name];
  if (n !== undefined && n > 0) return n;
  throw invalidParameter(`Invalid signal: ${raw}`);
}

export const SIGKILL = 9;
export const SIGTERM = 15;
