import { readFile } from 'node:fs/promises';
import { request } from 'node:https';

/**
 * Whether an etcd member answers on its peer URL: `GET <peer>/version` over the peers' mutual
 * TLS, with this manager's own etcd peer certificate (the peer port asks for a client
 * certificate of the swarm's CA). Any answer but a 200 within `timeoutMs` is no.
 */

export interface PeerTlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}

export type PeerProbe = (peerUrl: string, tls: PeerTlsFiles, timeoutMs: number) => Promise<boolean>;

export const probePeer: PeerProbe = async (peerUrl, tls, timeoutMs) => {
  // read each time: a renewal replaces them
  const [cert, key, ca] = await Promise.all([
    readFile(tls.certFile),
    readFile(tls.keyFile),
    readFile(tls.caFile),
  ]);
  const url = new URL('/version', peerUrl);
  return new Promise<boolean>((resolve) => {
    const req = request(url, { method: 'GET', cert, key, ca, timeout: timeoutMs, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200));
      res.on('error', () => resolve(false));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end();
  });
};
