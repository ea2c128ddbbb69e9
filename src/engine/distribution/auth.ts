import { unauthorized } from '../../common/errors.js';
import type { Challenge } from './challenge.js';
import type { Endpoint } from './endpoint.js';
import { errorFromResponse } from './registry-error.js';
import { readBody, type Transport } from './transport.js';
import type { AuthConfig } from './types.js';

/** A bearer token and when it stops being good. */
interface CachedToken {
  token: string;
  expiresAt: number;
}

/** Tokens a registry gave, by realm, service, scopes and credentials; shared by every session. */
export class TokenCache {
  private readonly tokens = new Map<string, CachedToken>();

  get(key: string): string | undefined {
    const t = this.tokens.get(key);
    if (!t) return undefined;
    if (t.expiresAt <= Date.now()) {
      this.tokens.delete(key);
      return undefined;
    }
    return t.token;
  }

  set(key: string, token: string, ttlSeconds: number): void {
    // renew a little early; a token without expiry is good for 60 s (the distribution spec's minimum)
    const ttl = Math.max(1, (ttlSeconds > 0 ? ttlSeconds : 60) - 5);
    this.tokens.set(key, { token, expiresAt: Date.now() + ttl * 1000 });
    if (this.tokens.size > 1000) {
      const now = Date.now();
      for (const [k, v] of this.tokens) if (v.expiresAt <= now) this.tokens.delete(k);
    }
  }
}

/** `repository:<name>:<actions>` */
export function repositoryScope(name: string, actions: string[]): string {
  return `repository:${name}:${actions.join(',')}`;
}

/**
 * How requests to one registry are authorised, from the challenges of its `/v2/` answer:
 * nothing (200), Basic with the credentials, or Bearer tokens from the realm (anonymous, with
 * Basic credentials, or an identity token as OAuth2 refresh token); a registrytoken is sent as
 * it is. As docker/distribution's client session does.
 */
export class Authorizer {
  private challenges: Challenge[];

  constructor(
    private readonly transport: Transport,
    private readonly endpoint: Endpoint,
    private readonly creds: AuthConfig,
    challenges: Challenge[],
    private readonly cache: TokenCache,
  ) {
    this.challenges = challenges;
  }

  /** Replace the challenges (a 401 on a later request brings new ones). */
  update(challenges: Challenge[]): void {
    if (challenges.length) this.challenges = challenges;
  }

  get hasChallenge(): boolean {
    return this.challenges.length > 0;
  }

  /** The registry asks for Basic credentials and there are none (Go's "no basic auth credentials"). */
  get basicWithoutCredentials(): boolean {
    return (
      !this.creds.registrytoken &&
      !this.challenges.some((c) => c.scheme === 'bearer') &&
      this.challenges.some((c) => c.scheme === 'basic') &&
      this.creds.username === undefined
    );
  }

  /** The Authorization header for a request needing `scopes`, if any. */
  async header(scopes: string[], signal?: AbortSignal): Promise<string | undefined> {
    if (this.creds.registrytoken) return `Bearer ${this.creds.registrytoken}`;
    const bearer = this.challenges.find((c) => c.scheme === 'bearer');
    if (bearer?.params.realm) return `Bearer ${await this.token(bearer, scopes, signal)}`;
    const basic = this.challenges.find((c) => c.scheme === 'basic');
    if (basic && this.creds.username !== undefined) {
      return `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password ?? ''}`).toString('base64')}`;
    }
    return undefined;
  }

  private async token(ch: Challenge, scopes: string[], signal?: AbortSignal): Promise<string> {
    const realm = ch.params.realm as string;
    const service = ch.params.service ?? '';
    const who = this.creds.identitytoken
      ? `id:${this.creds.identitytoken}`
      : this.creds.username
        ? `u:${this.creds.username}:${this.creds.password ?? ''}`
        : 'anon';
    const key = `${realm}|${service}|${[...scopes].sort().join(' ')}|${who}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    const { token, expiresIn } = this.creds.identitytoken
      ? await this.refreshToken(realm, service, scopes, signal)
      : await this.basicToken(realm, service, scopes, signal);
    this.cache.set(key, token, expiresIn);
    return token;
  }

  /** OAuth2: POST the realm a refresh_token grant (an identity token from docker login). */
  private async refreshToken(
    realm: string,
    service: string,
    scopes: string[],
    signal?: AbortSignal,
  ): Promise<{ token: string; expiresIn: number }> {
    const form = new URLSearchParams({
      grant_type: 'refresh_token',
      refresh_token: this.creds.identitytoken as string,
      service,
      client_id: 'docker',
      scope: scopes.join(' '),
    });
    const res = await this.transport.send(this.endpoint, {
      method: 'POST',
      url: realm,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
      signal,
    });
    return this.readToken(realm, res);
  }

  /** GET the realm with service and scopes, with Basic credentials when there are some. */
  private async basicToken(
    realm: string,
    service: string,
    scopes: string[],
    signal?: AbortSignal,
  ): Promise<{ token: string; expiresIn: number }> {
    const url = new URL(realm);
    if (service) url.searchParams.set('service', service);
    for (const s of scopes) url.searchParams.append('scope', s);
    const headers: Record<string, string> = {};
    if (this.creds.username) {
      url.searchParams.set('account', this.creds.username);
      headers.Authorization = `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password ?? ''}`).toString('base64')}`;
    }
    const res = await this.transport.send(this.endpoint, { method: 'GET', url: url.href, headers, signal });
    return this.readToken(realm, res);
  }

  private async readToken(
    realm: string,
    res: import('node:http').IncomingMessage,
  ): Promise<{ token: string; expiresIn: number }> {
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      const err = await errorFromResponse(res);
      if (status === 401 || status === 403) throw err;
      throw unauthorized(`getting a token from ${realm}: ${err.message}`);
    }
    let body: { token?: unknown; access_token?: unknown; expires_in?: unknown };
    try {
      body = JSON.parse((await readBody(res, 1024 * 1024)).toString('utf8'));
    } catch {
      throw unauthorized(`the token server ${realm} answered something that is not JSON`);
    }
    const token =
      typeof body.token === 'string' && body.token
        ? body.token
        : typeof body.access_token === 'string'
          ? body.access_token
          : '';
    if (!token) throw unauthorized(`the token server ${realm} answered no token`);
    const expiresIn = typeof body.expires_in === 'number' ? body.expires_in : 60;
    return { token, expiresIn };
  }
}
