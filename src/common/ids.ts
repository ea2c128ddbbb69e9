import { randomFillSync } from 'node:crypto';

/**
 * Random bytes for identifiers, drawn from the CSPRNG 128 identifiers at a time (as Node's
 * randomUUID caches its entropy): one draw costs about as much as its first byte.
 */
const pool = Buffer.alloc(32 * 128);
let poolAt = pool.length;

/** A 64-hex-digit random identifier, as Docker uses for containers, exec instances and networks. */
export function randomId(): string {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  poolAt += 32;
  return pool.toString('hex', poolAt - 32, poolAt);
}

export function shortId(id: string): string {
  const hex = id.startsWith('sha256:') ? id.slice(7) : id;
  return hex.slice(0, 12);
}

/** An RFC 4122 version 4 UUID (registry upload ids). */
export function uuidV4(): string {
  return crypto.randomUUID();
}
