import { randomBytes } from 'node:crypto';

/** A 64-hex-digit random identifier, as Docker uses for containers, exec instances and networks. */
export function randomId(): string {
  return randomBytes(32).toString('hex');
}

export function shortId(id: string): string {
  const hex = id.startsWith('sha256:') ? id.slice(7) : id;
  return hex.slice(0, 12);
}

/** An RFC 4122 version 4 UUID (registry upload ids). */
export function uuidV4(): string {
  return crypto.randomUUID();
}
