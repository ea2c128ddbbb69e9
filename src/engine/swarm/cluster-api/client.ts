import { X509Certificate } from 'node:crypto';
import { request } from 'node:https';
import type { PeerCertificate } from 'node:tls';
import { BerthError, type ErrorKind } from '../../../common/errors.js';

/**
 * A client of another engine's cluster API. Before a node has the swarm's root it may fetch it
 * unverified (`GET /v1/ca`: the caller pins it to the token's digest); every other call trusts
 * only that root and wants the server to be a manager (OU=swarm-manager).
 */

export interface ClientTls {
  /** The swarm's root CA (PEM); absent only for `fetchRootCa`. */
  ca?: string;
  cert?: string;
  key?: string;
}

const TIMEOUT_MS = 10_000;

/** The error kind of a manager's answer by its status; any other failure is Unavailable. */
const KIND_OF_STATUS: Partial<Record<number, ErrorKind>> = {
  400: 'InvalidParameter',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  501: 'NotImplemented',
};

export function checkManager(_host: string, cert: PeerCertificate): Error | undefined {
  const ou = cert.subject?.OU;
  const ous = Array.isArray(ou) ? ou : [ou];
  return ous.includes('swarm-manager') ? undefined : new Error('the remote node is not a swarm manager');
}

export function clusterCall<T>(
  addr: string,
  method: string,
  path: string,
  body: unknown,
  tls: ClientTls,
): Promise<T> {
  const url = new URL(`https://${addr}${path}`);
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise<T>((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: payload ? { 'Content-Type': 'application/json', 'Content-Length': payload.length } : {},
        minVersion: 'TLSv1.2',
        ...(tls.ca ? { ca: tls.ca, checkServerIdentity: checkManager } : { rejectUnauthorized: false }),
        ...(tls.cert && tls.key ? { cert: tls.cert, key: tls.key } : {}),
        agent: false,
        timeout: TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = JSON.parse(text || '{}');
          } catch {
            parsed = { message: text };
          }
          if (res.statusCode === 200) return resolve(parsed as T);
          const message = (parsed as { message?: string }).message ?? `status ${res.statusCode}`;
          const kind = KIND_OF_STATUS[res.statusCode ?? 0] ?? 'Unavailable';
          reject(new BerthError(kind, message));
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${addr} did not answer in ${TIMEOUT_MS} ms`)));
    req.on('error', (err) => reject(new BerthError('Unavailable', `cannot reach ${addr}: ${err.message}`)));
    req.end(payload);
  });
}

/** The root CA a manager serves, not yet trusted: the caller compares its digest with the token's. */
export async function fetchRootCa(addr: string): Promise<string> {
  const { RootCA } = await clusterCall<{ RootCA?: string }>(addr, 'GET', '/v1/ca', undefined, {});
  if (typeof RootCA !== 'string') throw new BerthError('Unavailable', `${addr} sent no root CA`);
  // it must at least be a CA certificate
  if (!new X509Certificate(RootCA).ca) throw new BerthError('Unavailable', `${addr} sent no CA certificate`);
  return RootCA;
}
