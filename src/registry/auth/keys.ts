import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
  X509Certificate,
} from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../../common/fs/atomic.js';

/**
 * The key id docker's libtrust gives a public key, which the reference registry matches a token's
 * `kid` against: SHA-256 of the DER SubjectPublicKeyInfo, first 240 bits, base32 without padding,
 * in 12 groups of 4 characters joined by ':'.
 */
export function libtrustKeyId(key: KeyObject): string {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const der = pub.export({ type: 'spki', format: 'der' });
  const digest = createHash('sha256').update(der).digest().subarray(0, 30);
  const b32 = base32(digest);
  const groups: string[] = [];
  for (let i = 0; i < b32.length; i += 4) groups.push(b32.slice(i, i + 4));
  return groups.join(':');
}

function base32(data: Uint8Array): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of data) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

/** Every certificate of a PEM bundle. */
export function parseCertBundle(pem: string, origin = 'certificate bundle'): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error(`${origin}: no PEM certificate found`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new Error(`${origin}: certificate ${i + 1}: ${(err as Error).message}`);
    }
  });
}

export function loadCertBundle(path: string): X509Certificate[] {
  return parseCertBundle(readFileSync(path, 'utf8'), path);
}

/** Public keys of a JWK Set file (`{"keys":[...]}`), by `kid` (and by libtrust key id too). */
export function loadJwks(path: string): Map<string, KeyObject> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`jwks file ${path}: ${(err as Error).message}`);
  }
  const keys = (parsed as { keys?: unknown })?.keys;
  if (!Array.isArray(keys)) throw new Error(`jwks file ${path}: expected an object with a "keys" array`);
  const out = new Map<string, KeyObject>();
  keys.forEach((jwk, i) => {
    if (!jwk || typeof jwk !== 'object') throw new Error(`jwks file ${path}: key ${i + 1} is not an object`);
    let key: KeyObject;
    try {
      // biome-ignore lint/suspicious/noExplicitAny: a JWK is a loose JSON object.
      key = createPublicKey({ key: publicJwk(jwk as Record<string, unknown>) as any, format: 'jwk' });
    } catch (err) {
      throw new Error(`jwks file ${path}: key ${i + 1}: ${(err as Error).message}`);
    }
    const kid = (jwk as { kid?: unknown }).kid;
    if (typeof kid === 'string' && kid !== '') out.set(kid, key);
    out.set(libtrustKeyId(key), key);
  });
  return out;
}

/** A JWK with only its public members (a JWKS should hold no private parts; be safe anyway). */
export function publicJwk(jwk: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['kty', 'crv', 'x', 'y', 'n', 'e']) if (k in jwk) out[k] = jwk[k];
  return out;
}

/**
 * Verify an `x5c` chain (leaf first, base64 DER) against trusted roots: each certificate is
 * signed by the next, the last by a root (or is a root), and every one is within its validity.
 * Returns the leaf's public key.
 */
export function verifyX5c(x5c: unknown, roots: readonly X509Certificate[], now = new Date()): KeyObject {
  if (!Array.isArray(x5c) || x5c.length === 0 || !x5c.every((c) => typeof c === 'string')) {
    throw new Error('x5c header must be a non-empty array of base64 certificates');
  }
  const chain = (x5c as string[]).map((b64, i) => {
    try {
      return new X509Certificate(Buffer.from(b64, 'base64'));
    } catch (err) {
      throw new Error(`x5c certificate ${i + 1}: ${(err as Error).message}`);
    }
  });
  for (const cert of chain) {
    if (now < new Date(cert.validFrom) || now > new Date(cert.validTo)) {
      throw new Error(`x5c certificate ${cert.subject} is not valid now`);
    }
  }
  for (let i = 0; i + 1 < chain.length; i++) {
    const cert = chain[i]!;
    const issuer = chain[i + 1]!;
    if (!cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) {
      throw new Error(`x5c certificate ${i + 1} is not signed by the next one`);
    }
  }
  const top = chain[chain.length - 1]!;
  const trusted = roots.some(
    (root) =>
      root.fingerprint256 === top.fingerprint256 ||
      (top.checkIssued(root) && top.verify(root.publicKey) && now <= new Date(root.validTo)),
  );
  if (!trusted) throw new Error('x5c chain does not lead to a trusted root certificate');
  return chain[0]!.publicKey;
}

// ---------------------------------------------------------------------------------------------
// A signing key and a self-signed certificate for the built-in token server, made with node:crypto
// and a small DER writer (node can parse certificates but not create them).

export type SigningKeyKind = 'ES256' | 'RS256';

export interface KeyPairPem {
  privateKeyPem: string;
  certificatePem: string;
}

/** Make a private key (P-256 or RSA 2048) and a self-signed CA certificate for it. */
export function generateSigningKeyPair(
  kind: SigningKeyKind = 'ES256',
  commonName = 'berth token signer',
  validDays = 3650,
): KeyPairPem {
  const { privateKey, publicKey } =
    kind === 'ES256'
      ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 });
  const now = Date.now();
  const cert = selfSignedCertificate(
    privateKey,
    publicKey,
    commonName,
    new Date(now - 60_000),
    new Date(now + validDays * 86_400_000),
  );
  return {
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    certificatePem: toPem(cert, 'CERTIFICATE'),
  };
}

/**
 * Write `key.pem` and `cert.pem` into a directory unless both exist already (for `berth up` and
 * tests). Returns their paths.
 */
export async function ensureSigningKeyPair(
  dir: string,
  kind: SigningKeyKind = 'ES256',
): Promise<{ keyPath: string; certPath: string }> {
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  if (existsSync(keyPath) && existsSync(certPath)) return { keyPath, certPath };
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const pair = generateSigningKeyPair(kind);
  await writeFileAtomic(keyPath, pair.privateKeyPem, 0o600);
  await writeFileAtomic(certPath, pair.certificatePem, 0o644);
  return { keyPath, certPath };
}

/** Write a key pair to explicit paths (no existence check). */
export async function writeKeyPair(pair: KeyPairPem, keyPath: string, certPath: string): Promise<void> {
  await writeFile(keyPath, pair.privateKeyPem, { mode: 0o600 });
  await writeFile(certPath, pair.certificatePem, { mode: 0o644 });
}

export function loadPrivateKey(path: string): KeyObject {
  try {
    return createPrivateKey(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`private key ${path}: ${(err as Error).message}`);
  }
}

function toPem(der: Buffer, label: string): string {
  const b64 = der.toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${b64}-----END ${label}-----\n`;
}

function selfSignedCertificate(
  privateKey: KeyObject,
  publicKey: KeyObject,
  commonName: string,
  notBefore: Date,
  notAfter: Date,
): Buffer {
  const ec = privateKey.asymmetricKeyType === 'ec';
  // ecdsa-with-SHA256 (no parameters) or sha256WithRSAEncryption (NULL parameters).
  const sigAlg = ec
    ? seq(oid('1.2.840.10045.4.3.2'))
    : seq(oid('1.2.840.113549.1.1.11'), Buffer.from([0x05, 0x00]));
  const name = seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(commonName, 'utf8')))));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f; // positive
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const basicConstraints = seq(
    oid('2.5.29.19'),
    tlv(0x01, Buffer.from([0xff])),
    octets(seq(tlv(0x01, Buffer.from([0xff])))),
  );
  // keyUsage: digitalSignature (bit 0) and keyCertSign (bit 5) → 0b10000100, 2 unused bits.
  const keyUsage = seq(
    oid('2.5.29.15'),
    tlv(0x01, Buffer.from([0xff])),
    octets(tlv(0x03, Buffer.from([0x02, 0x84]))),
  );
  const subjectKeyId = seq(oid('2.5.29.14'), octets(octets(createHash('sha1').update(spki).digest())));
  const tbs = seq(
    tlv(0xa0, integer(Buffer.from([2]))),
    integer(serial),
    sigAlg,
    name,
    seq(time(notBefore), time(notAfter)),
    name,
    spki,
    tlv(0xa3, seq(basicConstraints, keyUsage, subjectKeyId)),
  );
  const signature = sign('sha256', tbs, privateKey);
  return seq(tbs, sigAlg, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
}

function tlv(tag: number, body: Buffer): Buffer {
  const len = body.length;
  let header: Buffer;
  if (len < 0x80) header = Buffer.from([tag, len]);
  else {
    const bytes: number[] = [];
    for (let n = len; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
    header = Buffer.from([tag, 0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([header, body]);
}

const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
const octets = (body: Buffer): Buffer => tlv(0x04, body);

function integer(value: Buffer): Buffer {
  let v = value;
  while (v.length > 1 && v[0] === 0 && ((v[1] ?? 0) & 0x80) === 0) v = v.subarray(1);
  if (((v[0] ?? 0) & 0x80) !== 0) v = Buffer.concat([Buffer.from([0]), v]);
  return tlv(0x02, v);
}

function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const bytes: number[] = [40 * (parts[0] ?? 0) + (parts[1] ?? 0)];
  for (const part of parts.slice(2)) {
    const enc: number[] = [part & 0x7f];
    for (let n = Math.floor(part / 128); n > 0; n = Math.floor(n / 128)) enc.unshift(0x80 | (n & 0x7f));
    bytes.push(...enc);
  }
  return tlv(0x06, Buffer.from(bytes));
}

function time(date: Date): Buffer {
  const iso = date.toISOString().replace(/[-:T]/g, '').slice(0, 14); // YYYYMMDDHHMMSS
  const year = date.getUTCFullYear();
  return year < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}
