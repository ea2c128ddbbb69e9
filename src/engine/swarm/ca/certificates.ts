import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from 'node:crypto';
import { isIP } from 'node:net';
import {
  bitString,
  boolean,
  context,
  integer,
  octetString,
  oid,
  sequence,
  set,
  time,
  tlv,
  utf8String,
} from './der.js';

/**
 * X.509 certificates of the swarm: its root CA and the node certificates it signs, ECDSA P-256
 * with SHA-256, written in DER here (der.ts) and signed with node:crypto.
 */

export interface DistinguishedName {
  commonName: string;
  organizationalUnit?: string;
  organization?: string;
}

export interface CertificateRequest {
  /** The subject: a name written here, or another certificate's raw subject (DER) kept as is. */
  subject: DistinguishedName | Buffer;
  /** The certified key (public, or a private key whose public half is meant). */
  publicKey: KeyObject;
  notBefore: Date;
  notAfter: Date;
  /** A CA certificate (basicConstraints CA, keyCertSign) or a TLS leaf (server and client auth). */
  isCA: boolean;
  /** A CA's own subject key identifier when it must stay that of another certificate (a cross-signed root). */
  subjectKeyId?: Buffer;
  /** Subject alternative names: DNS names and IP addresses. */
  altNames?: string[];
}

export interface Issuer {
  subject: DistinguishedName | Buffer;
  privateKey: KeyObject;
  /** The issuer's public key (for the authority key identifier). */
  publicKey: KeyObject;
  /** The issuer certificate's subject key identifier, when it has one (else the key's SHA-1). */
  keyId?: Buffer;
}

const OID = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  organizationalUnit: '2.5.4.11',
  subjectKeyId: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyId: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
};

export function newKeyPair(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' });
}

/** A distinguished name in DER (O, OU, CN, as swarmkit's certificates order them); raw DER as is. */
export function subjectDer(dn: DistinguishedName | Buffer): Buffer {
  if (Buffer.isBuffer(dn)) return dn;
  const rdn = (type: string, value: string) => set(sequence(oid(type), utf8String(value)));
  return sequence(
    ...(dn.organization !== undefined ? [rdn(OID.organization, dn.organization)] : []),
    ...(dn.organizationalUnit !== undefined ? [rdn(OID.organizationalUnit, dn.organizationalUnit)] : []),
    rdn(OID.commonName, dn.commonName),
  );
}

function spki(key: KeyObject): Buffer {
  const pub = key.type === 'public' ? key : createPublicKey(key);
  return pub.export({ type: 'spki', format: 'der' });
}

/** The key identifier: SHA-1 of the SubjectPublicKeyInfo (RFC 7093 allows any such hash). */
function keyId(key: KeyObject): Buffer {
  return createHash('sha1').update(spki(key)).digest();
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

function altName(n: string): Buffer {
  const family = isIP(n);
  if (family === 4) return tlv(0x87, Buffer.from(n.split('.').map(Number)));
  if (family === 6) {
    const groups = expandIPv6(n);
    return tlv(0x87, Buffer.from(groups.flatMap((g) => [g >> 8, g & 0xff])));
  }
  return tlv(0x82, Buffer.from(n, 'ascii'));
}

function expandIPv6(addr: string): number[] {
  const [head, tail] = addr.split('::');
  const parse = (s: string | undefined) => (s ? s.split(':').map((g) => Number.parseInt(g, 16)) : []);
  const h = parse(head);
  const t = tail === undefined ? [] : parse(tail);
  return [...h, ...new Array(8 - h.length - t.length).fill(0), ...t];
}

/** A certificate for `req`, signed by `issuer` (itself when absent: a self-signed root), in PEM. */
export function issueCertificate(req: CertificateRequest, issuer?: Issuer): string {
  const signer = issuer ?? { subject: req.subject, privateKey: req.publicKey, publicKey: req.publicKey };
  const serial = randomBytes(16);
  serial[0] &= 0x7f;
  const algorithm = sequence(oid(OID.ecdsaWithSha256));
  const extensions = [
    extension(OID.basicConstraints, true, req.isCA ? sequence(boolean(true)) : sequence()),
    // CA: digitalSignature, keyCertSign, cRLSign (bits 0, 5, 6); leaf: digitalSignature, keyEncipherment (0, 2)
    extension(
      OID.keyUsage,
      true,
      req.isCA ? bitString(Buffer.from([0x86]), 1) : bitString(Buffer.from([0xa0]), 5),
    ),
    ...(req.isCA
      ? []
      : [extension(OID.extKeyUsage, false, sequence(oid(OID.serverAuth), oid(OID.clientAuth)))]),
    extension(OID.subjectKeyId, false, octetString(req.subjectKeyId ?? keyId(req.publicKey))),
    extension(
      OID.authorityKeyId,
      false,
      sequence(context(0, issuer?.keyId ?? keyId(signer.publicKey), false)),
    ),
    ...(req.altNames?.length
      ? [extension(OID.subjectAltName, false, sequence(...req.altNames.map(altName)))]
      : []),
  ];
  const tbs = sequence(
    context(0, integer(2)),
    integer(serial),
    algorithm,
    subjectDer(signer.subject),
    sequence(time(req.notBefore), time(req.notAfter)),
    subjectDer(req.subject),
    spki(req.publicKey),
    context(3, sequence(...extensions)),
  );
  if (!issuer && req.publicKey.type !== 'private')
    throw new Error('a self-signed certificate needs the private key');
  const signature = sign('sha256', tbs, { key: signer.privateKey, dsaEncoding: 'der' });
  return toPem('CERTIFICATE', sequence(tbs, algorithm, bitString(signature)));
}

export function toPem(label: string, der: Buffer): string {
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

export function privateKeyPem(key: KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }).toString();
}
