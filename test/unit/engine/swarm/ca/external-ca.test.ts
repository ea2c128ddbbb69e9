import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { externalCasFor, signerFor } from '../../../../../src/engine/swarm/ca/ca-state.js';
import { newKeyPair } from '../../../../../src/engine/swarm/ca/certificates.js';
import { createCsr } from '../../../../../src/engine/swarm/ca/csr.js';
import {
  type CfsslTransport,
  ExternalCaSigner,
  validExternalUrl,
} from '../../../../../src/engine/swarm/ca/external-ca.js';
import { RootCa } from '../../../../../src/engine/swarm/ca/root-ca.js';
import { newDek } from '../../../../../src/engine/swarm/seal.js';

const cfssl = (URL: string, CACert = '') => ({ Protocol: 'cfssl', URL, CACert });

describe('the external CA client (cfssl sign)', () => {
  it('sends the CSR with the subject and SANs the swarm decides, and takes the certificate', async () => {
    const sent: { url: string; body: unknown }[] = [];
    const transport: CfsslTransport = async (url, body) => {
      sent.push({ url, body: JSON.parse(body) });
      return { status: 200, text: JSON.stringify({ success: true, result: { certificate: 'CERT' } }) };
    };
    const csr = createCsr(newKeyPair().privateKey, 'x');
    const signer = new ExternalCaSigner([cfssl('http://ca/api/v1/cfssl/sign')], '', transport);
    const cert = await signer.sign({
      csrPem: csr,
      commonName: 'node1',
      organizationalUnit: 'swarm-worker',
      organization: 'cluster1',
      hosts: ['swarm-worker', 'node1'],
    });
    assert.equal(cert, 'CERT\n');
    assert.deepEqual(sent, [
      {
        url: 'http://ca/api/v1/cfssl/sign',
        body: {
          certificate_request: csr,
          hosts: ['swarm-worker', 'node1'],
          subject: { CN: 'node1', names: [{ OU: 'swarm-worker', O: 'cluster1' }] },
        },
      },
    ]);
  });

  it('skips a URL it cannot ask, saying so', async () => {
    const never: CfsslTransport = async () => assert.fail('asked');
    await assert.rejects(
      new ExternalCaSigner([cfssl('ftp:/x')], '', never).sign({ csrPem: 'x', commonName: 'n', hosts: [] }),
      /the external CA could not sign the certificate: "ftp:\/x" is not an http or https URL/,
    );
  });

  it('tries each URL and says what the last one said', async () => {
    const transport: CfsslTransport = async (url) => {
      if (url.includes('down')) throw new Error('connect ECONNREFUSED');
      return {
        status: 400,
        text: JSON.stringify({
          success: false,
          errors: [{ code: 1003, message: 'Invalid certificate request' }],
        }),
      };
    };
    const signer = new ExternalCaSigner([cfssl('http://down/'), cfssl('http://up/')], '', transport);
    await assert.rejects(
      signer.sign({ csrPem: 'x', commonName: 'n', hosts: [] }),
      /the external CA could not sign the certificate: http:\/\/up\/ refused to sign \(400\): Invalid certificate request/,
    );
    const html: CfsslTransport = async () => ({ status: 502, text: '<html>' });
    await assert.rejects(
      new ExternalCaSigner([cfssl('http://x/')], '', html).sign({ csrPem: 'x', commonName: 'n', hosts: [] }),
      /answered 502 without cfssl's JSON/,
    );
  });

  it('picks the external CAs of a root, and a keyless root without one cannot sign', () => {
    const root = RootCa.create();
    const other = RootCa.create();
    const cas = [
      cfssl('http://a/'),
      cfssl('http://b/', other.certPem),
      { ...cfssl('http://c/'), Protocol: 'acme' },
    ];
    assert.deepEqual(
      externalCasFor(cas, root.certPem, true).map((c) => c.URL),
      ['http://a/'],
    );
    assert.deepEqual(
      externalCasFor(cas, other.certPem, false).map((c) => c.URL),
      ['http://b/'],
    );
    assert.throws(
      () => signerFor({ root: { cert: root.certPem, key: '' }, rootRevision: 1 }, newDek(), undefined),
      /no key here and no external CA/,
    );
    assert.ok(validExternalUrl('https://ca.example:8888/api/v1/cfssl/sign'));
    assert.ok(!validExternalUrl('ftp:/x'));
    assert.ok(!validExternalUrl('ftp://x/'));
    assert.ok(!validExternalUrl('not a url'));
  });
});
