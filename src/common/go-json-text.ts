import { randomBytes } from 'node:crypto';

/**
 * JSON text for readers in Go (runc, the docker CLI) of values that hold integers a double cannot
 * hold exactly. A request's 9223372036854775807 (int64's largest) is 2^63 once parsed, which
 * JSON.stringify writes as 9223372036854776000: a number Go refuses for an int64 field. Here 2^63
 * is written as int64's largest value, 2^64 and above as uint64's largest, -2^63 and below as
 * int64's smallest, and other integers beyond 2^53 exactly (never with an exponent).
 */

export const U64_MAX_TEXT = '18446744073709551615';
const I64_MAX_TEXT = '9223372036854775807';
const I64_MIN_TEXT = '-9223372036854775808';

/** Makes the markers unlike any string a value holds (an env value, a label). */
const NONCE = randomBytes(8).toString('hex');
const MARKERS = new RegExp(`"__go_int_${NONCE}_(-?\\d+)__"`, 'g');

export function goIntegerText(value: number): string {
  if (value >= 2 ** 64) return U64_MAX_TEXT;
  if (value === 2 ** 63) return I64_MAX_TEXT;
  if (value <= -(2 ** 63)) return I64_MIN_TEXT;
  return BigInt(value).toString();
}

/**
 * JSON.stringify with integers beyond 2^53 written as goIntegerText says. `replace` may give a
 * key's value as literal integer text instead (rlimits of -1 as RLIM_INFINITY).
 */
export function goJsonText(
  value: unknown,
  replace?: (key: string, value: unknown) => string | undefined,
): string {
  const json = JSON.stringify(value, (key, v: unknown) => {
    const literal = replace?.(key, v);
    if (literal !== undefined) return `__go_int_${NONCE}_${literal}__`;
    if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) > Number.MAX_SAFE_INTEGER)
      return `__go_int_${NONCE}_${goIntegerText(v)}__`;
    return v;
  });
  return json === undefined ? 'null' : json.replace(MARKERS, '$1');
}
