import { X509Certificate } from 'node:crypto';
import { children, type DerElement, readElement } from './der-reader.js';

/**
 * What the swarm reads out of a certificate that it did not necessarily write (a root CA given
 * with `swarm ca --rotate --ca-cert`): its raw subject and SubjectPublicKeyInfo (the TLSInfo
 * fields, compared byte for byte by the CLI) and its subject key identifier.
 */

export interface CertificateParts {
  /** The subject Name, DER. */
  subject: Buffer;
  /** The SubjectPublicKeyInfo, DER. */
  spki: Buffer;
  /** The subject key identifier extension's value, when there is one. */
  subjectKeyId?: Buffer;
}

const SUBJECT_KEY_ID = Buffer.from([0x06, 0x03, 0x55, 0x1d, 0x0e]);

/** The DER of the first certificate of a PEM text. */
export function pemDer(pem: string): Buffer {
  const m = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/.exec(pem);
  if (!m) throw new Error('not a PEM certificate');
  return Buffer.from((m[1] ?? '').replace(/\s+/g, ''), 'base64');
}

/** Every certificate of a PEM text (a chain or a bundle), each as its own PEM block. */
export function splitPem(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----\n?/g) ?? [];
}

export function certificateParts(pem: string): CertificateParts {
  const cert = readElement(pemDer(pem));
  const [tbs] = children(cert);
  if (!tbs) throw new Error('malformed certificate');
  const fields = children(tbs);
  // [0] version is explicit and optional: it shifts the fields after it
  const at = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = fields[at + 4];
  const spki = fields[at + 5];
  if (!subject || !spki) throw new Error('malformed certificate');
  const extensions = fields.find((f) => f.tag === 0xa3);
  return {
    subject: Buffer.from(subject.raw),
    spki: Buffer.from(spki.raw),
    ...(extensions ? optionalKeyId(extensions) : {}),
  };
}

function optionalKeyId(extensions: DerElement): { subjectKeyId?: Buffer } {
  const [list] = children(extensions);
  if (!list) return {};
  for (const ext of children(list)) {
    const [id, ...rest] = children(ext);
    if (!id?.raw.equals(SUBJECT_KEY_ID)) continue;
    const value = rest[rest.length - 1];
    if (!value) return {};
    return { subjectKeyId: Buffer.from(readElement(value.content).content) };
  }
  return {};
}

/** Whether `certPem` (its first certificate) was signed by `rootPem`'s key and is valid now. */
export function issuedBy(certPem: string, rootPem: string, now = new Date()): boolean {
  try {
    const cert = new X509Certificate(certPem);
    const root = new X509Certificate(rootPem);
    const valid = new Date(cert.validFrom) <= now && now <= new Date(cert.validTo);
    return valid && cert.verify(root.publicKey);
  } catch {
    return false;
  }
}

/**
 * Whether the certificate at the head of `chainPem` leads to `rootPem`: signed by it, or by an
 * intermediate that follows it in the chain and leads there (an external CA may sign through
 * one), each valid now.
 */
export function chainsTo(chainPem: string, rootPem: string, now = new Date()): boolean {
  const chain = splitPem(chainPem);
  let current: string | undefined = chain[0];
  for (let hops = 0; current !== undefined && hops <= chain.length; hops++) {
    const pem: string = current;
    if (issuedBy(pem, rootPem, now)) return true;
    const cert = new X509Certificate(pem);
    current = chain.find(
      (candidate) =>
        candidate !== pem &&
        cert.checkIssued(new X509Certificate(candidate)) &&
        issuedBy(pem, candidate, now),
    );
  }
  return false;
}
