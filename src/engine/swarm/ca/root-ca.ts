import { createPrivateKey, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { type CertificateParts, certificateParts } from './cert-info.js';
import { type DistinguishedName, issueCertificate, newKeyPair, privateKeyPem } from './certificates.js';

/** The swarm's root CA: its certificate and key, and the node certificates it signs. */

export const ROOT_CA_SUBJECT: DistinguishedName = { commonName: 'swarm-ca' };
/** swarmkit's root CA lives 20 years. */
const ROOT_CA_LIFETIME_MS = 20 * 365 * 24 * 3600 * 1000;
/** Certificates start an hour in the past, so that clocks a little behind accept them. */
const BACKDATE_MS = 3600 * 1000;

export type NodeRole = 'manager' | 'worker';

export interface RootCaMaterial {
  certPem: string;
  keyPem: string;
}

/** The Swarm object's TLSInfo: the trust root and the issuer's raw subject and public key (base64). */
export interface TlsInfo {
  TrustRoot: string;
  CertIssuerSubject: string;
  CertIssuerPublicKey: string;
}

export interface IssuedCertificate {
  /** The certificate, followed by the intermediate that chains it to the old root during a rotation. */
  certPem: string;
  keyPem: string;
}

/** The TLSInfo of a root certificate: its PEM, raw subject and public key (read from the certificate). */
export function tlsInfoOf(rootPem: string): TlsInfo {
  const parts = certificateParts(rootPem);
  return {
    TrustRoot: rootPem,
    CertIssuerSubject: parts.subject.toString('base64'),
    CertIssuerPublicKey: parts.spki.toString('base64'),
  };
}

/**
 * A root certificate given by the user (with its key, or signed for by an external CA): a CA
 * certificate valid now, as PEM ending in a newline; throws with the reason otherwise.
 */
export function checkRootCertificate(certPem: string, now = new Date()): string {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    throw new Error('could not parse the signing CA certificate: not a PEM certificate');
  }
  if (!cert.ca) throw new Error('the signing CA certificate is not a CA certificate');
  if (now < new Date(cert.validFrom) || now > new Date(cert.validTo)) {
    throw new Error('the signing CA certificate is expired or not yet valid');
  }
  const pem = cert.toString();
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

export class RootCa {
  private readonly key: KeyObject;
  private readonly publicKey: KeyObject;
  private readonly parts: CertificateParts;

  /**
   * `chainPem`: what follows every certificate this root issues (during a rotation, the new
   * root cross-signed by the old one, so that nodes still trusting only the old root accept it).
   */
  constructor(
    readonly material: RootCaMaterial,
    private readonly chainPem = '',
  ) {
    this.key = createPrivateKey(material.keyPem);
    this.publicKey = createPublicKey(this.key);
    this.parts = certificateParts(material.certPem);
  }

  /**
   * A root given by the user (`swarm ca --rotate --ca-cert --ca-key`, `SigningCACert`/`Key`): a CA
   * certificate valid now whose key is the one given; throws with the reason otherwise.
   */
  static fromUser(certPem: string, keyPem: string, now = new Date()): RootCa {
    const pem = checkRootCertificate(certPem, now);
    const cert = new X509Certificate(pem);
    let key: KeyObject;
    try {
      key = createPrivateKey(keyPem);
    } catch {
      throw new Error('could not parse the signing CA key: not a PEM private key');
    }
    if (!cert.checkPrivateKey(key)) throw new Error('certificate key mismatch');
    return new RootCa({ certPem: pem, keyPem: privateKeyPem(key) });
  }

  /** This root issuing through `chainPem` (see the constructor). */
  withChain(chainPem: string): RootCa {
    return new RootCa(this.material, chainPem);
  }

  /**
   * `nextPem`'s certificate signed by this root: same subject, key and key identifier as its
   * own, so that a chain `leaf → cross-signed` ends at this root for a node that trusts only it.
   */
  crossSign(nextPem: string, now = new Date()): string {
    const cert = new X509Certificate(nextPem);
    const parts = certificateParts(nextPem);
    return issueCertificate(
      {
        subject: parts.subject,
        publicKey: cert.publicKey,
        notBefore: new Date(Math.max(now.getTime() - BACKDATE_MS, Date.parse(cert.validFrom))),
        notAfter: new Date(cert.validTo),
        isCA: true,
        ...(parts.subjectKeyId ? { subjectKeyId: parts.subjectKeyId } : {}),
      },
      this.issuer(),
    );
  }

  static create(now = new Date()): RootCa {
    const pair = newKeyPair();
    const certPem = issueCertificate({
      subject: ROOT_CA_SUBJECT,
      publicKey: pair.privateKey,
      notBefore: new Date(now.getTime() - BACKDATE_MS),
      notAfter: new Date(now.getTime() + ROOT_CA_LIFETIME_MS),
      isCA: true,
    });
    return new RootCa({ certPem, keyPem: privateKeyPem(pair.privateKey) });
  }

  get certPem(): string {
    return this.material.certPem;
  }

  tlsInfo(): TlsInfo {
    return tlsInfoOf(this.material.certPem);
  }

  /**
   * A node's TLS certificate: `CN=<node ID>, OU=swarm-<role>, O=<cluster ID>`, valid for
   * `expiryMs` from now; with a fresh key unless `publicKey` (from a CSR) is given.
   */
  issueNode(
    nodeId: string,
    role: NodeRole,
    clusterId: string,
    expiryMs: number,
    publicKey?: KeyObject,
    now = new Date(),
  ): IssuedCertificate {
    const pair = publicKey ? undefined : newKeyPair();
    const ou = `swarm-${role}`;
    const certPem = issueCertificate(
      {
        subject: { commonName: nodeId, organizationalUnit: ou, organization: clusterId },
        publicKey: publicKey ?? (pair as { publicKey: KeyObject }).publicKey,
        notBefore: new Date(now.getTime() - BACKDATE_MS),
        notAfter: new Date(now.getTime() + expiryMs),
        isCA: false,
        altNames: [ou, nodeId],
      },
      this.issuer(),
    );
    return { certPem: certPem + this.chainPem, keyPem: pair ? privateKeyPem(pair.privateKey) : '' };
  }

  /** The certificate of a manager's etcd member on its peer port (etcd accepts only this CN). */
  issueEtcdPeer(
    peerCn: string,
    addresses: string[],
    expiryMs: number,
    now = new Date(),
    publicKey?: KeyObject,
  ): IssuedCertificate {
    const pair = publicKey ? undefined : newKeyPair();
    const certPem = issueCertificate(
      {
        subject: { commonName: peerCn },
        publicKey: publicKey ?? (pair as { publicKey: KeyObject }).publicKey,
        notBefore: new Date(now.getTime() - BACKDATE_MS),
        notAfter: new Date(now.getTime() + expiryMs),
        isCA: false,
        altNames: addresses,
      },
      this.issuer(),
    );
    return { certPem: certPem + this.chainPem, keyPem: pair ? privateKeyPem(pair.privateKey) : '' };
  }

  /** Whether `certPem` was signed by this root and is valid now. */
  verifies(certPem: string, now = new Date()): boolean {
    try {
      const cert = new X509Certificate(certPem);
      const valid = new Date(cert.validFrom) <= now && now <= new Date(cert.validTo);
      return valid && cert.verify(this.publicKey);
    } catch {
      return false;
    }
  }

  private issuer() {
    return {
      subject: this.parts.subject,
      privateKey: this.key,
      publicKey: this.publicKey,
      ...(this.parts.subjectKeyId ? { keyId: this.parts.subjectKeyId } : {}),
    };
  }
}
