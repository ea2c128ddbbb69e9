import {
  createPublicKey,
  sign as cryptoSign,
  verify as cryptoVerify,
  type JsonWebKey,
  type KeyObject,
  X509Certificate,
} from 'node:crypto';

/**
 * Docker image manifest schema 1, signed (`application/vnd.docker.distribution.manifest.v1+prettyjws`):
 * a JSON document with a `signatures` array of JWS signatures in libtrust's "pretty" form. The
 * signed payload is the document without the signatures, rebuilt from the protected header's
 * `formatLength` and `formatTail`; its sha256 is the manifest's digest.
 */
export interface Schema1Signature {
  header: { jwk?: JsonWebKey; alg?: string; x5c?: string[] };
  signature: string;
  protected: string;
}

export class Schema1Error extends Error {
  constructor(
    message: string,
    readonly reason: 'invalid' | 'unverified',
  ) {
    super(message);
  }
}

function b64urlDecode(s: string): Buffer {
  if (typeof s !== 'string' || !/^[A-Za-z0-9_-]*={0,2}$/.test(s))
    throw new Schema1Error('invalid base64url', 'invalid');
  return Buffer.from(s, 'base64url');
}

const ALGORITHMS: Record<string, { hash: string; ec: boolean }> = {
  ES256: { hash: 'sha256', ec: true },
  ES384: { hash: 'sha384', ec: true },
  ES512: { hash: 'sha512', ec: true },
  RS256: { hash: 'sha256', ec: false },
  RS384: { hash: 'sha384', ec: false },
  RS512: { hash: 'sha512', ec: false },
};

function publicKeyOf(header: Schema1Signature['header']): KeyObject {
  try {
    if (header.jwk && typeof header.jwk === 'object') {
      const { kid: _kid, ...jwk } = header.jwk as JsonWebKey & { kid?: string };
      return createPublicKey({ key: jwk, format: 'jwk' });
    }
    if (Array.isArray(header.x5c) && typeof header.x5c[0] === 'string') {
      return new X509Certificate(Buffer.from(header.x5c[0], 'base64')).publicKey;
    }
  } catch (err) {
    throw new Schema1Error(`invalid signing key: ${(err as Error).message}`, 'unverified');
  }
  throw new Schema1Error('signature header has neither jwk nor x5c', 'unverified');
}

/**
 * Verify every signature of a signed schema-1 manifest and return the payload (the canonical
 * bytes whose digest names the manifest). Throws Schema1Error.
 */
export function verifySchema1(content: Buffer): Buffer {
  let doc: unknown;
  try {
    doc = JSON.parse(content.toString('utf8'));
  } catch (err) {
    throw new Schema1Error(`invalid JSON: ${(err as Error).message}`, 'invalid');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc))
    throw new Schema1Error('not a JSON object', 'invalid');
  const sigs = (doc as { signatures?: unknown }).signatures;
  if (!Array.isArray(sigs) || sigs.length === 0)
    throw new Schema1Error('manifest is not signed', 'unverified');
  let payload: Buffer | undefined;
  for (const raw of sigs) {
    const sig = raw as Schema1Signature;
    if (
      !sig ||
      typeof sig !== 'object' ||
      typeof sig.protected !== 'string' ||
      typeof sig.signature !== 'string'
    ) {
      throw new Schema1Error('malformed signature', 'invalid');
    }
    let prot: { formatLength?: unknown; formatTail?: unknown };
    try {
      prot = JSON.parse(b64urlDecode(sig.protected).toString('utf8'));
    } catch {
      throw new Schema1Error('malformed protected header', 'invalid');
    }
    const { formatLength, formatTail } = prot;
    if (
      typeof formatLength !== 'number' ||
      !Number.isInteger(formatLength) ||
      formatLength < 0 ||
      formatLength > content.length ||
      typeof formatTail !== 'string'
    ) {
      throw new Schema1Error('protected header lacks formatLength/formatTail', 'invalid');
    }
    const p = Buffer.concat([content.subarray(0, formatLength), b64urlDecode(formatTail)]);
    if (payload && !payload.equals(p))
      throw new Schema1Error('signatures sign different payloads', 'invalid');
    payload = p;
    const header = sig.header ?? {};
    const alg = ALGORITHMS[header.alg ?? ''];
    if (!alg)
      throw new Schema1Error(`unsupported signature algorithm ${JSON.stringify(header.alg)}`, 'unverified');
    const key = publicKeyOf(header);
    const input = Buffer.from(`${sig.protected}.${p.toString('base64url')}`);
    let ok = false;
    try {
      ok = cryptoVerify(
        alg.hash,
        input,
        alg.ec ? { key, dsaEncoding: 'ieee-p1363' } : key,
        b64urlDecode(sig.signature),
      );
    } catch {
      ok = false;
    }
    if (!ok) throw new Schema1Error('signature verification failed', 'unverified');
  }
  if (!payload) throw new Schema1Error('manifest is not signed', 'unverified');
  return payload;
}

/**
 * Sign a schema-1 payload (pretty JSON ending in '}') with an EC P-256 or RSA private key,
 * producing libtrust's pretty JWS form.
 */
export function signSchema1(payload: string | Buffer, key: KeyObject): Buffer {
  const content = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const text = content.toString('utf8');
  const close = text.trimEnd().length - 1;
  if (text[close] !== '}') throw new Error('payload must be a JSON object');
  const beforeClose = text.slice(0, close).trimEnd();
  const formatLength = Buffer.byteLength(beforeClose);
  const formatTail = content.subarray(formatLength);
  const indentMatch = /\n([ \t]+)"/.exec(text);
  const indent = indentMatch?.[1] ?? '   ';
  const ec = key.asymmetricKeyType === 'ec';
  const alg = ec ? 'ES256' : 'RS256';
  const prot = Buffer.from(
    JSON.stringify({
      formatLength,
      formatTail: formatTail.toString('base64url'),
      time: new Date().toISOString(),
    }),
  ).toString('base64url');
  const input = Buffer.from(`${prot}.${content.toString('base64url')}`);
  const signature = cryptoSign('sha256', input, ec ? { key, dsaEncoding: 'ieee-p1363' } : key).toString(
    'base64url',
  );
  const jwk = createPublicKey(key).export({ format: 'jwk' });
  const sigs = [{ header: { jwk, alg }, signature, protected: prot }];
  const sigJson = JSON.stringify(sigs, null, indent).replace(/\n/g, `\n${indent}`);
  return Buffer.concat([
    content.subarray(0, formatLength),
    Buffer.from(`,\n${indent}"signatures": ${sigJson}`),
    formatTail,
  ]);
}
