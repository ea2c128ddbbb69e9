import { errorMessage } from '../../common/errors.js';

/** The `proxy` section: the upstream registry and the credentials berth uses there. */
export interface ProxyConfig {
  remoteurl: string;
  username?: string;
  password?: string;
  /** How long a tag fetched from the upstream is served without asking it again. */
  ttlMs: number;
}

/** The upstream could not be reached, or answered with a server error. */
export class UpstreamUnavailable extends Error {}

/** Every manifest type berth stores: what the proxy accepts from the upstream. */
export const ACCEPT_MANIFESTS = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');

/**
 * How long a request to the upstream may take: a blob GET until its headers (the body streams
 * for as long as it takes, guarded by the fetch's idle timeout), any other request whole.
 */
const ANSWER_TIMEOUT_MS = 30_000;

/**
 * `fetch` whose timeout ends when the answer's headers are in: the body is left to stream
 * (AbortSignal.timeout on the request would cut a body still arriving when it fires).
 */
async function fetchHeadersWithin(url: string, init: RequestInit, timeoutMs: number): Promise<Response> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
  try {
    return await fetch(url, { ...init, signal: ac.signal });
  } finally {
    clearTimeout(timer);
  }
}

/** Parameters of a `WWW-Authenticate` challenge: scheme and `key="value"` pairs. */
export function parseChallenge(header: string): { scheme: string; params: Map<string, string> } {
  const m = /^\s*(\w+)\s*(.*)$/s.exec(header);
  const params = new Map<string, string>();
  for (const p of (m?.[2] ?? '').matchAll(/(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) {
    params.set((p[1] ?? '').toLowerCase(), (p[2] ?? p[3] ?? '').replace(/\\(.)/g, '$1'));
  }
  return { scheme: (m?.[1] ?? '').toLowerCase(), params };
}

/**
 * A client of the upstream registry: `/v2/<name>/...` requests that follow its auth challenge
 * (Basic with the configured credentials, or a Bearer token from its token server, fetched
 * with those credentials or anonymously, cached per scope until it expires).
 */
export class Upstream {
  private readonly base: string;
  private readonly tokens = new Map<string, { header: string; expires: number }>();
  private basicOnly = false;

  constructor(
    private readonly config: ProxyConfig,
    private readonly answerTimeoutMs = ANSWER_TIMEOUT_MS,
  ) {
    this.base = config.remoteurl.replace(/\/+$/, '');
  }

  private basicHeader(): string | undefined {
    if (this.config.username === undefined) return undefined;
    return `Basic ${Buffer.from(`${this.config.username}:${this.config.password ?? ''}`).toString('base64')}`;
  }

  /** Whether the upstream answers `/v2/` with anything but a 5xx (401 included). */
  async reachable(): Promise<boolean> {
    try {
      const res = await fetch(`${this.base}/v2/`, { signal: AbortSignal.timeout(this.answerTimeoutMs) });
      await res.body?.cancel().catch(() => undefined);
      return res.status < 500;
    } catch {
      return false;
    }
  }

  /**
   * A request to the upstream for repository `name` (`path` after `/v2/<name>/`). Resolves with
   * any answer but a 5xx; rejects with UpstreamUnavailable when it cannot be reached. A blob
   * GET's timeout ends with its headers (a big layer may take longer than that to arrive).
   */
  async request(method: 'GET' | 'HEAD', name: string, path: string, accept?: string): Promise<Response> {
    const scope = `repository:${name}:pull`;
    const url = `${this.base}/v2/${name}/${path}`;
    const streams = method === 'GET' && path.startsWith('blobs/');
    let auth = this.cachedAuth(scope);
    for (let attempt = 0; attempt < 2; attempt++) {
      const headers = new Headers();
      if (accept) headers.set('Accept', accept);
      if (auth) headers.set('Authorization', auth);
      let res: Response;
      try {
        res = streams
          ? await fetchHeadersWithin(url, { method, headers }, this.answerTimeoutMs)
          : await fetch(url, { method, headers, signal: AbortSignal.timeout(this.answerTimeoutMs) });
      } catch (err) {
        throw new UpstreamUnavailable(`upstream ${this.base} unreachable: ${errorMessage(err)}`);
      }
      if (res.status >= 500) {
        await res.body?.cancel().catch(() => undefined);
        throw new UpstreamUnavailable(`upstream ${this.base} answered ${res.status}`);
      }
      if (res.status !== 401 || attempt > 0) return res;
      const challenge = res.headers.get('www-authenticate');
      await res.body?.cancel().catch(() => undefined);
      if (!challenge) return res;
      const next = await this.authorize(challenge, scope);
      if (!next) return res;
      auth = next;
    }
    throw new UpstreamUnavailable('unreachable');
  }

  private cachedAuth(scope: string): string | undefined {
    if (this.basicOnly) return this.basicHeader();
    const t = this.tokens.get(scope);
    if (t && t.expires > Date.now()) return t.header;
    return undefined;
  }

  /** Answer a challenge: the Authorization header to retry with, or undefined. */
  private async authorize(challenge: string, scope: string): Promise<string | undefined> {
    const { scheme, params } = parseChallenge(challenge);
    if (scheme === 'basic') {
      this.basicOnly = true;
      return this.basicHeader();
    }
    if (scheme !== 'bearer') return undefined;
    const realm = params.get('realm');
    if (!realm) return undefined;
    const q = new URLSearchParams();
    const service = params.get('service');
    if (service) q.set('service', service);
    q.set('scope', scope);
    const headers = new Headers();
    const basic = this.basicHeader();
    if (basic) headers.set('Authorization', basic);
    let res: Response;
    try {
      res = await fetch(`${realm}${realm.includes('?') ? '&' : '?'}${q}`, {
        headers,
        signal: AbortSignal.timeout(this.answerTimeoutMs),
      });
    } catch (err) {
      throw new UpstreamUnavailable(`upstream token server unreachable: ${errorMessage(err)}`);
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      return undefined;
    }
    const body = (await res.json().catch(() => ({}))) as {
      token?: string;
      access_token?: string;
      expires_in?: number;
    };
    const token = body.token ?? body.access_token;
    if (!token) return undefined;
    const lifetime = Math.max(10, Math.min(body.expires_in ?? 60, 3600)) * 1000;
    const header = `Bearer ${token}`;
    // Renewed a little before it expires; the cache stays bounded (one token per repository).
    if (this.tokens.size >= 10_000) this.tokens.clear();
    this.tokens.set(scope, { header, expires: Date.now() + lifetime - 5_000 });
    return header;
  }
}
