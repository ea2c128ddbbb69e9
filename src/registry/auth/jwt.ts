import { constants, createHash, type KeyObject, sign, verify } from 'node:crypto';

/** JWS algorithms berth signs and verifies (asymmetric only; `none` and HMAC are refused). */
export type JwsAlgorithm =
  | 'RS256'
  | 'RS384'
  | 'RS512'
  | 'PS256'
  | 'PS384'
  | 'PS512'
  | 'ES256'
  | 'ES384'
  | 'ES512'
  | 'EdDSA';

export interface JwsHeader {
  alg: string;
  typ?: string;
  kid?: string;
  x5c?: string[];
  jwk?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface JwtClaims {
  iss?: string;
  sub?: string;
  aud?: string | string[];
  exp?: number;
  nbf?: number;
  iat?: number;
  jti?: string;
  access?: Array<{ type: string; name: string; actions: string[] }>;
  [key: string]: unknown;
}

export class JwtError extends Error {}

export function base64url(data: Uint8Array | string): string {
  return Buffer.from(data).toString('base64url');
}

export function fromBase64url(text: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new JwtError('malformed token: bad base64url');
  return Buffer.from(text, 'base64url');
}

interface AlgSpec {
  hash: string | null;
  keyType: 'rsa' | 'ec' | 'ed25519';
  curve?: string;
  pss?: boolean;
}

const ALGS: Record<JwsAlgorithm, AlgSpec> = {
  RS256: { hash: 'sha256', keyType: 'rsa' },
  RS384: { hash: 'sha384', keyType: 'rsa' },
  RS512: { hash: 'sha512', keyType: 'rsa' },
  PS256: { hash: 'sha256', keyType: 'rsa', pss: true },
  PS384: { hash: 'sha384', keyType: 'rsa', pss: true },
  PS512: { hash: 'sha512', keyType: 'rsa', pss: true },
  ES256: { hash: 'sha256', keyType: 'ec', curve: 'prime256v1' },
  ES384: { hash: 'sha384', keyType: 'ec', curve: 'secp384r1' },
  ES512: { hash: 'sha512', keyType: 'ec', curve: 'secp521r1' },
  EdDSA: { hash: null, keyType: 'ed25519' },
};

export function isSupportedAlg(alg: string): alg is JwsAlgorithm {
  return Object.hasOwn(ALGS, alg);
}

/** The algorithm to sign with for a private (or public) key: ES256/384/512 by curve, RS256, EdDSA. */
export function algorithmForKey(key: KeyObject): JwsAlgorithm {
  const type = key.asymmetricKeyType;
  if (type === 'rsa') return 'RS256';
  if (type === 'ed25519') return 'EdDSA';
  if (type === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'prime256v1') return 'ES256';
    if (curve === 'secp384r1') return 'ES384';
    if (curve === 'secp521r1') return 'ES512';
    throw new JwtError(`unsupported EC curve ${curve}`);
  }
  throw new JwtError(`unsupported key type ${type}`);
}

/** Whether a key may be used with an algorithm (guards against algorithm confusion). */
export function keyFitsAlg(key: KeyObject, alg: JwsAlgorithm): boolean {
  const spec = ALGS[alg];
  if (key.asymmetricKeyType !== spec.keyType) return false;
  if (spec.curve && key.asymmetricKeyDetails?.namedCurve !== spec.curve) return false;
  return true;
}

function signOptions(alg: JwsAlgorithm, key: KeyObject) {
  const spec = ALGS[alg];
  if (spec.keyType === 'ec') return { key, dsaEncoding: 'ieee-p1363' as const };
  if (spec.pss) {
    return { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST };
  }
  return { key };
}

/** Sign a JWT (compact JWS) with a private key. */
export function signJwt(claims: JwtClaims, privateKey: KeyObject, header: Partial<JwsHeader> = {}): string {
  const alg = (header.alg as JwsAlgorithm | undefined) ?? algorithmForKey(privateKey);
  if (!isSupportedAlg(alg)) throw new JwtError(`unsupported algorithm ${alg}`);
  const head = base64url(JSON.stringify({ typ: 'JWT', ...header, alg }));
  const body = base64url(JSON.stringify(claims));
  const input = Buffer.from(`${head}.${body}`);
  const signature = sign(ALGS[alg].hash, input, signOptions(alg, privateKey));
  return `${head}.${body}.${base64url(signature)}`;
}

export interface DecodedJws {
  header: JwsHeader;
  claims: JwtClaims;
  signingInput: Buffer;
  signature: Buffer;
}

/** Split and decode a compact JWS without checking anything but its form. */
export function decodeJws(token: string): DecodedJws {
  const parts = token.split('.');
  if (parts.length !== 3) throw new JwtError('malformed token: expected three dot-separated parts');
  const [h, c, s] = parts as [string, string, string];
  let header: unknown;
  let claims: unknown;
  try {
    header = JSON.parse(fromBase64url(h).toString('utf8'));
    claims = JSON.parse(fromBase64url(c).toString('utf8'));
  } catch (err) {
    if (err instanceof JwtError) throw err;
    throw new JwtError('malformed token: header or claims are not JSON');
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) {
    throw new JwtError('malformed token: header is not an object');
  }
  if (!claims || typeof claims !== 'object' || Array.isArray(claims)) {
    throw new JwtError('malformed token: claims are not an object');
  }
  if (typeof (header as JwsHeader).alg !== 'string') throw new JwtError('malformed token: no alg');
  return {
    header: header as JwsHeader,
    claims: claims as JwtClaims,
    signingInput: Buffer.from(`${h}.${c}`),
    signature: fromBase64url(s),
  };
}

/** Check a decoded JWS's signature with a public key. */
export function verifySignature(jws: DecodedJws, key: KeyObject): boolean {
  const alg = jws.header.alg;
  if (!isSupportedAlg(alg)) throw new JwtError(`unsupported token algorithm ${JSON.stringify(alg)}`);
  if (!keyFitsAlg(key, alg)) throw new JwtError(`token algorithm ${alg} does not fit the signing key`);
  try {
    return verify(ALGS[alg].hash, jws.signingInput, signOptions(alg, key), jws.signature);
  } catch {
    return false;
  }
}

/** A short fingerprint of a token for cache keys and logs (never the token itself). */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
