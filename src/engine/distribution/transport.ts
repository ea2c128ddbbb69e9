import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { unavailable } from '../../common/errors.js';
import type { Endpoint } from './endpoint.js';

/** One HTTP request to a registry. */
export interface HttpRequest {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute URL. */
  url: string;
  headers?: Record<string, string>;
  /** A stream (an upload's PATCH) is sent with chunked transfer encoding, never replayed. */
  body?: Buffer | string | AsyncIterable<Buffer>;
  signal?: AbortSignal;
  /** Follow redirects (GET/HEAD); Authorization is dropped when the host changes. Default true. */
  followRedirects?: boolean;
}

const MAX_REDIRECTS = 10;
/** A registry silent this long (connect, headers or body) has dropped the connection. */
export const IDLE_TIMEOUT_MS = 60_000;

/** A network failure (no HTTP answer): the caller may try the next endpoint or resume. */
export class NetworkError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'NetworkError';
  }
}

/**
 * HTTP(S) with keep-alive agents per endpoint, TLS from the endpoint's certs.d material (server
 * verification off for insecure registries, as dockerd), redirects followed with the
 * Authorization header dropped when the host changes.
 */
export class Transport {
  private readonly agents = new Map<string, HttpAgent | HttpsAgent>();

  constructor(readonly userAgent: string) {}

  private agentFor(url: URL, ep: Endpoint | undefined): HttpAgent | HttpsAgent {
    const sameHost = ep !== undefined && new URL(ep.base).host === url.host;
    const key = `${url.protocol}//${url.host}|${sameHost ? 'ep' : 'plain'}`;
    let agent = this.agents.get(key);
    if (!agent) {
      if (url.protocol === 'https:') {
        const tls = sameHost ? ep.tls : undefined;
        agent = new HttpsAgent({
          keepAlive: true,
          maxSockets: 16,
          ...(tls?.ca.length ? { ca: tls.ca } : {}),
          ...(tls?.cert ? { cert: tls.cert, key: tls.key } : {}),
          // an insecure registry over https: its certificate is not checked (dockerd's InsecureSkipVerify)
          rejectUnauthorized: !(sameHost && ep.insecure),
        });
      } else {
        agent = new HttpAgent({ keepAlive: true, maxSockets: 16 });
      }
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** Send a request; resolves with the response once its head arrived (the body unread). */
  async send(ep: Endpoint | undefined, req: HttpRequest): Promise<IncomingMessage> {
    let url = new URL(req.url);
    const headers: Record<string, string> = { 'User-Agent': this.userAgent, ...(req.headers ?? {}) };
    const startHost = url.host;
    for (let hop = 0; ; hop++) {
      const res = await this.once(url, ep, req.method, headers, req.body, req.signal);
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (
        req.followRedirects !== false &&
        (req.method === 'GET' || req.method === 'HEAD') &&
        [301, 302, 303, 307, 308].includes(status) &&
        location
      ) {
        res.resume();
        if (hop >= MAX_REDIRECTS) throw unavailable(`stopped after ${MAX_REDIRECTS} redirects`);
        url = new URL(location, url);
        if (url.host !== startHost) {
          delete headers.Authorization;
          delete headers.authorization;
        }
        continue;
      }
      return res;
    }
  }

  private once(
    url: URL,
    ep: Endpoint | undefined,
    method: string,
    headers: Record<string, string>,
    body: Buffer | string | AsyncIterable<Buffer> | undefined,
    signal: AbortSignal | undefined,
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason ?? new Error('aborted'));
        return;
      }
      const fn = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const r = fn(url, { method, headers, agent: this.agentFor(url, ep), signal }, (res) => resolve(res));
      // a registry that stops answering (connect, headers or body) for a minute: a network
      // failure, which a blob download resumes from
      r.setTimeout(IDLE_TIMEOUT_MS, () =>
        r.destroy(Object.assign(new Error('i/o timeout'), { code: 'ETIMEDOUT' })),
      );
      r.on('error', (err) => {
        if (signal?.aborted) reject(signal.reason ?? err);
        else
          reject(new NetworkError(`${goMethod(method)} "${url.href}": ${describeNetError(err, url)}`, err));
      });
      if (body === undefined) r.end();
      else if (typeof body === 'string' || Buffer.isBuffer(body)) r.end(body);
      else {
        (async () => {
          for await (const chunk of body) {
            if (r.destroyed) return;
            if (!r.write(chunk))
              await new Promise<void>((ok) => r.once('drain', () => ok()).once('close', () => ok()));
          }
          r.end();
        })().catch((err: Error) => r.destroy(err));
      }
    });
  }

  close(): void {
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
  }
}

/** Go's url.Error names the method like this: `Get`, `Head`, `Post`. */
function goMethod(m: string): string {
  return m.charAt(0) + m.slice(1).toLowerCase();
}

/** A connection failure in the words of Go's net package (what dockerd's messages carry). */
function describeNetError(err: Error, url: URL): string {
  const code = (err as { code?: string }).code;
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  const addr = `${url.hostname}:${port}`;
  if (code === 'ECONNREFUSED') return `dial tcp ${addr}: connect: connection refused`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `dial tcp: lookup ${url.hostname}: no such host`;
  if (code === 'ETIMEDOUT') return `dial tcp ${addr}: i/o timeout`;
  if (code === 'ECONNRESET') return 'read: connection reset by peer';
  if (code === 'EPROTO' || /wrong version number|packet length too long/i.test(err.message))
    return 'http: server gave HTTP response to HTTPS client';
  return err.message;
}

/** Read a response body whole (bounded). */
export async function readBody(res: IncomingMessage, limit = 8 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res) {
    n += (c as Buffer).length;
    if (n > limit) {
      res.destroy();
      throw unavailable(`response body larger than ${limit} bytes`);
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}
