import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import { loadCaState, signerFor, trustState } from '../../../../../src/engine/swarm/ca/ca-state.js';
import {
  certificateParts,
  chainsTo,
  issuedBy,
  splitPem,
} from '../../../../../src/engine/swarm/ca/cert-info.js';
import {
  issueCertificate,
  newKeyPair,
  privateKeyPem,
} from '../../../../../src/engine/swarm/ca/certificates.js';
import { createCsr } from '../../../../../src/engine/swarm/ca/csr.js';
import { RootCa, tlsInfoOf } from '../../../../../src/engine/swarm/ca/root-ca.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import { newDek, seal } from '../../../../../src/engine/swarm/seal.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';

/** A CA of the user's own, with a subject berth would not write (as `--ca-cert` may bring). */
function userRoot(): { certPem: string; keyPem: string } {
  const pair = newKeyPair();
  const now = Date.now();
  const certPem = issueCertificate({
    subject: { commonName: 'Example Root', organization: 'Example Inc' },
    publicKey: pair.privateKey,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + 365 * 24 * 3600_000),
    isCA: true,
  });
  return { certPem, keyPem: privateKeyPem(pair.privateKey) };
}

describe('root CA rotation pieces', () => {
  it("reads a certificate's raw subject, key and key identifier; TLSInfo comes from them", () => {
    const root = userRoot();
    const parts = certificateParts(root.certPem);
    const cert = new X509Certificate(root.certPem);
    assert.equal(
      parts.spki.toString('base64'),
      cert.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    );
    assert.match(parts.subject.toString('latin1'), /Example Root/);
    assert.equal(parts.subjectKeyId?.length, 20);
    const info = tlsInfoOf(root.certPem);
    assert.equal(info.TrustRoot, root.certPem);
    assert.equal(info.CertIssuerSubject, parts.subject.toString('base64'));
  });

  it("issues under a user's root with its subject and key identifier", () => {
    const given = userRoot();
    const ca = RootCa.fromUser(given.certPem, given.keyPem);
    const leaf = ca.issueNode('node1', 'worker', 'c1', 3600_000);
    const cert = new X509Certificate(leaf.certPem);
    assert.equal(cert.issuer, 'O=Example Inc\nCN=Example Root');
    assert.ok(cert.checkIssued(new X509Certificate(given.certPem)));
    assert.ok(issuedBy(leaf.certPem, given.certPem));
    assert.throws(() => RootCa.fromUser(given.certPem, userRoot().keyPem), /certificate key mismatch/);
    assert.throws(() => RootCa.fromUser('junk', given.keyPem), /not a PEM certificate/);
    assert.throws(() => RootCa.fromUser(leaf.certPem, leaf.keyPem), /not a CA certificate/);
  });

  it('chains a new leaf to the old root through the cross-signed certificate', () => {
    const old = RootCa.create();
    const next = RootCa.create();
    const cross = old.crossSign(next.certPem);
    const crossCert = new X509Certificate(cross);
    assert.equal(crossCert.subject, new X509Certificate(next.certPem).subject);
    assert.ok(crossCert.ca);
    assert.ok(issuedBy(cross, old.certPem));
    assert.deepEqual(certificateParts(cross).subjectKeyId, certificateParts(next.certPem).subjectKeyId);
    const leaf = next.withChain(cross).issueNode('n', 'manager', 'c', 3600_000);
    const [first, second] = splitPem(leaf.certPem);
    assert.ok(first && second);
    assert.ok(new X509Certificate(first).checkIssued(new X509Certificate(second)));
    assert.ok(new X509Certificate(first).verify(new X509Certificate(second).publicKey));
  });

  it('signs with the new root during a rotation and with the rotated root after it, chain kept', async () => {
    const store = new MemoryStore(() => Date.now());
    const dek = newDek();
    const old = RootCa.create();
    const next = RootCa.create();
    const cross = old.crossSign(next.certPem);
    await store.put(keys.caRoot, JSON.stringify({ cert: old.certPem, key: seal(dek, old.material.keyPem) }));
    const before = await loadCaState(store);
    assert.deepEqual(trustState(before), { TrustRoots: old.certPem, Issuer: old.certPem });
    await store.put(
      keys.caNext,
      JSON.stringify({ cert: next.certPem, key: seal(dek, next.material.keyPem), crossSigned: cross }),
    );
    const during = await loadCaState(store);
    assert.deepEqual(trustState(during), { TrustRoots: old.certPem + next.certPem, Issuer: next.certPem });
    const pair = newKeyPair();
    const csr = { pem: createCsr(pair.privateKey, 'x'), key: pair.publicKey };
    const signer = signerFor(during, dek, undefined);
    assert.equal(signer.rootPem, next.certPem);
    const cert = await signer.issueNode(csr, 'n1', 'worker', 'c1', 3600_000, new Date());
    assert.deepEqual(splitPem(cert).length, 2);
    assert.ok(issuedBy(cert, next.certPem));
    const peer = await signer.issueEtcdPeer(csr, ['10.0.0.1'], 3600_000, new Date());
    assert.equal(new X509Certificate(peer).subject, 'CN=berth-etcd-peer');
  });
});

describe('a certificate chain leading to a root', () => {
  it('follows intermediates in the chain, and nothing else', () => {
    const root = RootCa.create();
    const intermediatePair = newKeyPair();
    const now = Date.now();
    const intermediatePem = root.withChain('').crossSign(
      issueCertificate({
        subject: { commonName: 'Intermediate' },
        publicKey: intermediatePair.privateKey,
        notBefore: new Date(now - 3600_000),
        notAfter: new Date(now + 3600_000 * 24),
        isCA: true,
      }),
    );
    const intermediate = RootCa.fromUser(
      issueCertificate({
        subject: { commonName: 'Intermediate' },
        publicKey: intermediatePair.privateKey,
        notBefore: new Date(now - 3600_000),
        notAfter: new Date(now + 3600_000 * 24),
        isCA: true,
      }),
      privateKeyPem(intermediatePair.privateKey),
    );
    const leaf = intermediate.withChain(intermediatePem).issueNode('n', 'worker', 'c', 3600_000);
    assert.ok(chainsTo(leaf.certPem, root.certPem));
    assert.ok(!chainsTo(splitPem(leaf.certPem)[0] ?? '', root.certPem), 'not without its intermediate');
    assert.ok(!chainsTo(leaf.certPem, RootCa.create().certPem));
  });
});
