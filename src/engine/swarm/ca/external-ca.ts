import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { ExternalCa } from '../swarm.types.js';

/**
 * An external CA speaking cfssl's API (swarmkit's ExternalCA): a node's CSR is POSTed to
 * `<URL>` (cfssl's `/api/v1/cfssl/sign`) with the subject and SANs the swarm decides; the answer's
 * certificate is the node's. Each URL is tried in turn; what the last one said is the error.
 */

/** The host call: a JSON POST, its status and body (a fake in unit tests). */
export type CfsslTransport = (
  url: string,
  body: string,
  caPem?: string,
) => Promise<{ status: number; text: string }>;

const TIMEOUT_MS = 10_000;

export const httpTransport: CfsslTransport = (url, body, caPem) =>
  new Promise((resolve, reject) => {
    const u = new URL(url);
    const request = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = request(
      u,
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
        ...(u.protocol === 'https:' && caPem ? { ca: caPem } : {}),
        timeout: TIMEOUT_MS,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });

export interface ExternalSignRequest {
  /** PEM PKCS#10 request, signed by the key to certify. */
  csrPem: string;
  commonName: string;
  organizationalUnit?: string;
  organization?: string;
  /** Subject alternative names (DNS names, IP addresses). */
  hosts: string[];
}

interface CfsslAnswer {
  success?: boolean;
  result?: { certificate?: string };
  errors?: { code?: number; message?: string }[];
}

/** The error of an external CA: what it said, or why it could not be asked. */
export class ExternalCaError extends Error {}

/** Whether `url` is one berth can ask: http or https with a host. */
export function validExternalUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

export class ExternalCaSigner {
  constructor(
    private readonly cas: ExternalCa[],
    /** The roots an https endpoint is checked against when its entry gives no CACert. */
    private readonly trust: string,
    private readonly transport: CfsslTransport = httpTransport,
  ) {}

  async sign(req: ExternalSignRequest): Promise<string> {
    const names =
      req.organizationalUnit || req.organization ? [{ OU: req.organizationalUnit, O: req.organization }] : [];
    const body = JSON.stringify({
      certificate_request: req.csrPem,
      hosts: req.hosts,
      subject: { CN: req.commonName, names },
    });
    let last = 'no external CA is configured';
    for (const ca of this.cas) {
      if (!validExternalUrl(ca.URL)) {
        last = `${JSON.stringify(ca.URL)} is not an http or https URL`;
        continue;
      }
      try {
        const answer = await this.transport(ca.URL, body, ca.CACert || this.trust);
        let parsed: CfsslAnswer;
        try {
          parsed = JSON.parse(answer.text) as CfsslAnswer;
        } catch {
          last = `${ca.URL} answered ${answer.status} without cfssl's JSON`;
          continue;
        }
        const cert = parsed.result?.certificate;
        if (answer.status === 200 && parsed.success && cert) return cert.endsWith('\n') ? cert : `${cert}\n`;
        const said = (parsed.errors ?? []).map((e) => e.message ?? `code ${e.code}`).join('; ');
        last = `${ca.URL} refused to sign (${answer.status}): ${said || 'no reason given'}`;
      } catch (err) {
        last = `cannot reach ${ca.URL}: ${err instanceof Error ? err.message : String(err)}`;
      }
    }
    throw new ExternalCaError(`the external CA could not sign the certificate: ${last}`);
  }
}
