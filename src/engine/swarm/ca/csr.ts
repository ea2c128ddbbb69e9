import { createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { toPem } from './certificates.js';
import { bitString, context, integer, oid, sequence, set, utf8String } from './der.js';
import { children, readElement } from './der-reader.js';

/**
 * Certificate signing requests (PKCS#10) for the swarm's join and renewal: a node proves it holds
 * the key it wants certified; the manager takes only the public key from it (the subject is the
 * manager's to decide: node ID, role, cluster).
 */

const ECDSA_SHA256 = '1.2.840.10045.4.3.2';

/** A CSR for `privateKey`'s public half, subject `CN=<commonName>`, signed with it. */
export function createCsr(privateKey: KeyObject, commonName: string): string {
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const info = sequence(
    integer(0),
    sequence(set(sequence(oid('2.5.4.3'), utf8String(commonName)))),
    spki,
    context(0, Buffer.alloc(0)),
  );
  const signature = sign('sha256', info, { key: privateKey, dsaEncoding: 'der' });
  return toPem('CERTIFICATE REQUEST', sequence(info, sequence(oid(ECDSA_SHA256)), bitString(signature)));
}

/** The public key of a CSR whose signature it verifies; throws for anything else. */
export function csrPublicKey(pem: string): KeyObject {
  const m = /-----BEGIN CERTIFICATE REQUEST-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE REQUEST-----/.exec(
    pem,
  );
  if (!m) throw new Error('not a PEM certificate request');
  const der = Buffer.from((m[1] ?? '').replace(/\s+/g, ''), 'base64');
  const top = readElement(der);
  if (top.raw.length !== der.length) throw new Error('trailing data after the certificate request');
  const [info, alg, sig] = children(top);
  if (!info || !alg || !sig || sig.tag !== 0x03) throw new Error('malformed certificate request');
  const fields = children(info);
  const spki = fields[2];
  if (!spki) throw new Error('malformed certificate request');
  const key = createPublicKey({ key: spki.raw, format: 'der', type: 'spki' });
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error('the certificate request must be for an ECDSA P-256 key');
  }
  const signature = sig.content.subarray(1);
  if (!verify('sha256', info.raw, { key, dsaEncoding: 'der' }, signature)) {
    throw new Error('the certificate request is not signed by its key');
  }
  return key;
}
