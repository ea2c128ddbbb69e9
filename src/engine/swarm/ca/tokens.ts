import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Join tokens, unlock keys and object IDs in swarmkit's formats:
 * - join token `SWMTKN-1-<root CA digest>-<secret>`: the SHA-256 of the root CA certificate's
 *   PEM in base 36 zero-padded to 50 characters, then 128 random bits in base 36 padded to 25;
 * - unlock key `SWMKEY-1-<32 random bytes, base64 without padding>`;
 * - IDs: 128 random bits in base 36, padded to 25 characters.
 */

const TOKEN_PREFIX = 'SWMTKN';
const TOKEN_VERSION = '1';
const KEY_PREFIX = 'SWMKEY-1-';
const DIGEST_CHARS = 50;
const SECRET_CHARS = 25;

function base36(bytes: Buffer, width: number): string {
  return BigInt(`0x${bytes.toString('hex') || '0'}`)
    .toString(36)
    .padStart(width, '0');
}

/** 25 lowercase base-36 characters from 128 random bits (swarmkit's identity.NewID). */
export function newSwarmId(): string {
  return base36(randomBytes(16), SECRET_CHARS);
}

/** The digest part of a join token for this root CA certificate (PEM, as stored). */
export function caDigest(rootCaPem: string): string {
  return base36(createHash('sha256').update(rootCaPem).digest(), DIGEST_CHARS);
}

export function newJoinToken(rootCaPem: string): string {
  return `${TOKEN_PREFIX}-${TOKEN_VERSION}-${caDigest(rootCaPem)}-${newSwarmId()}`;
}

export interface ParsedJoinToken {
  caDigest: string;
  secret: string;
}

/** A join token's parts, or undefined when it is not one. */
export function parseJoinToken(token: string): ParsedJoinToken | undefined {
  const m = /^SWMTKN-1-([0-9a-z]{50})-([0-9a-z]{25})$/.exec(token);
  return m ? { caDigest: m[1], secret: m[2] } : undefined;
}

/** Whether `given` is `expected`, in time that does not depend on where they differ. */
export function tokenMatches(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function newUnlockKey(): string {
  return `${KEY_PREFIX}${randomBytes(32).toString('base64').replace(/=+$/, '')}`;
}

/** The 32 key bytes of an unlock key, or undefined when it is not one. */
export function parseUnlockKey(key: string): Buffer | undefined {
  if (!key.startsWith(KEY_PREFIX)) return undefined;
  const raw = key.slice(KEY_PREFIX.length);
  if (!/^[A-Za-z0-9+/]{43}$/.test(raw)) return undefined;
  const bytes = Buffer.from(raw, 'base64');
  return bytes.length === 32 ? bytes : undefined;
}
