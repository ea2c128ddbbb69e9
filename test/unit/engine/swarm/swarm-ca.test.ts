import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import { RootCa } from '../../../../src/engine/swarm/ca/root-ca.js';
import {
  caDigest,
  newJoinToken,
  newSwarmId,
  newUnlockKey,
  parseJoinToken,
  parseUnlockKey,
  tokenMatches,
} from '../../../../src/engine/swarm/ca/tokens.js';

describe('swarm root CA', () => {
  const ca = RootCa.create();

  it('is a self-signed CA certificate named swarm-ca, valid for 20 years', () => {
    const cert = new X509Certificate(ca.certPem);
    assert.equal(cert.subject, 'CN=swarm-ca');
    assert.equal(cert.issuer, 'CN=swarm-ca');
    assert.equal(cert.ca, true);
    assert.ok(cert.verify(cert.publicKey));
    const years = (Date.parse(cert.validTo) - Date.now()) / (365 * 24 * 3600 * 1000);
    assert.ok(years > 19.9 && years <= 20, String(years));
  });

  it('signs node certificates with the role in OU and the cluster in O', () => {
    const node = newSwarmId();
    const issued = ca.issueNode(node, 'manager', 'cluster1', 90 * 24 * 3600 * 1000);
    const cert = new X509Certificate(issued.certPem);
    assert.equal(cert.subject, `O=cluster1\nOU=swarm-manager\nCN=${node}`);
    assert.equal(cert.ca, false);
    assert.ok(cert.checkIssued(new X509Certificate(ca.certPem)));
    assert.ok(ca.verifies(issued.certPem));
    assert.ok(!RootCa.create().verifies(issued.certPem));
    assert.match(issued.keyPem, /BEGIN PRIVATE KEY/);
    assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
    const days = (Date.parse(cert.validTo) - Date.now()) / (24 * 3600 * 1000);
    assert.ok(days > 89.9 && days <= 90);
    assert.match(cert.subjectAltName ?? '', /DNS:swarm-manager/);
    const worker = new X509Certificate(ca.issueNode(node, 'worker', 'cluster1', 3600_000).certPem);
    assert.match(worker.subject, /OU=swarm-worker/);
  });

  it('gives TLSInfo as dockerd does: the PEM root, the raw issuer subject and public key', () => {
    const info = ca.tlsInfo();
    assert.equal(info.TrustRoot, ca.certPem);
    const cert = new X509Certificate(ca.certPem);
    const spki = cert.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    assert.equal(info.CertIssuerPublicKey, spki);
    // the subject's DER appears in the certificate as written
    assert.ok(cert.raw.includes(Buffer.from(info.CertIssuerSubject, 'base64')));
  });
});

describe('join tokens, unlock keys and IDs', () => {
  it('makes IDs of 25 base-36 characters', () => {
    for (let i = 0; i < 50; i++) assert.match(newSwarmId(), /^[0-9a-z]{25}$/);
  });

  it('writes the CA digest as base 36 of the PEM sha256, padded to 50', () => {
    const pem = RootCa.create().certPem;
    const digest = caDigest(pem);
    assert.match(digest, /^[0-9a-z]{50}$/);
    const n = BigInt(`0x${createHash('sha256').update(pem).digest('hex')}`);
    assert.equal(BigInt(`0x${BigInt(parseInt36(digest)).toString(16)}`), n);
  });

  it('parses what it makes and refuses the rest', () => {
    const pem = RootCa.create().certPem;
    const token = newJoinToken(pem);
    assert.match(token, /^SWMTKN-1-[0-9a-z]{50}-[0-9a-z]{25}$/);
    const parsed = parseJoinToken(token);
    assert.equal(parsed?.caDigest, caDigest(pem));
    assert.notEqual(newJoinToken(pem), token);
    assert.equal(parseJoinToken('SWMTKN-2-abc-def'), undefined);
    assert.equal(parseJoinToken(`${token}x`), undefined);
    assert.equal(tokenMatches(token, token), true);
    assert.equal(tokenMatches(token, newJoinToken(pem)), false);
    assert.equal(tokenMatches('short', token), false);
  });

  it('makes unlock keys of 32 bytes in unpadded base64', () => {
    const key = newUnlockKey();
    assert.match(key, /^SWMKEY-1-[A-Za-z0-9+/]{43}$/);
    assert.equal(parseUnlockKey(key)?.length, 32);
    assert.equal(parseUnlockKey('SWMKEY-1-abc'), undefined);
    assert.equal(parseUnlockKey(key.replace('SWMKEY', 'SWMTKN')), undefined);
  });
});

function parseInt36(s: string): bigint {
  let n = 0n;
  for (const c of s) n = n * 36n + BigInt(Number.parseInt(c, 36));
  return n;
}
