import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Sealing under the cluster's data-encryption key (DEK): AES-256-GCM, `v1:` then base64 of
 * nonce (12 bytes), tag (16) and ciphertext. What is sealed in etcd (the root CA key, the unlock
 * key) is unreadable without a manager's DEK, which lives only on managers' disks.
 */

export function newDek(): Buffer {
  return randomBytes(32);
}

export function seal(dek: Buffer, plain: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', dek, iv);
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
}

export function unseal(dek: Buffer, sealed: string): string {
  if (!sealed.startsWith('v1:')) throw new Error('not a sealed value');
  const raw = Buffer.from(sealed.slice(3), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', dek, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
