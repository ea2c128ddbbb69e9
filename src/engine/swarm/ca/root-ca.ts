import { createPrivateKey, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import {
  type DistinguishedName,
  issueCertificate,
  newKeyPair,
  privateKeyPem,
  subjectDer,
} from './certificates.js';

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
  certPem: string;
  keyPem: string;
}

export class RootCa {
  private readonly key: KeyObject;
  private readonly publicKey: KeyObject;

  constructor(readonly material: RootCaMaterial) {
    this.key = createPrivateKey(material.keyPem);
    this.publicKey = createPublicKey(this.key);
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
    return {
      TrustRoot: this.material.certPem,
      CertIssuerSubject: subjectDer(ROOT_CA_SUBJECT).toString('base64'),
      CertIssuerPublicKey: this.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    };
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
    return { certPem, keyPem: pair ? privateKeyPem(pair.privateKey) : '' };
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
    return { certPem, keyPem: pair ? privateKeyPem(pair.privateKey) : '' };
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
    return { subject: ROOT_CA_SUBJECT, privateKey: this.key, publicKey: this.publicKey };
  }
}
