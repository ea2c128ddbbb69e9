import { STATUS_CODES } from 'node:http';
import { BerthError, invalidParameter, unauthorized, unavailable } from '../../common/errors.js';
import { parseChallenges } from './challenge.js';
import type { RegistryClient } from './client.js';
import { type Endpoint, HUB_DOMAIN } from './endpoint.js';
import { errorFromResponse } from './registry-error.js';
import { NetworkError, readBody } from './transport.js';
import type { AuthConfig } from './types.js';

/** What POST /auth answers on success. */
export interface LoginResult {
  status: 'Login Succeeded';
  /** A refresh token the token server gave (`offline_token=true`), else empty. */
  identityToken: string;
}

/** The registry host of a login's `serveraddress` (`https://host:port/...` → `host:port`). */
export function loginHost(serveraddress: string | undefined): string {
  const raw = (serveraddress ?? '').trim();
  if (!raw) return HUB_DOMAIN;
  const noScheme = raw.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const host = noScheme.split('/')[0] ?? '';
  if (!host) throw invalidParameter(`invalid registry address ${JSON.stringify(raw)}`);
  const lower = host.toLowerCase();
  if (lower === 'index.docker.io' || lower === 'registry-1.docker.io' || lower === HUB_DOMAIN)
    return HUB_DOMAIN;
  return lower;
}

function basic(creds: AuthConfig): string {
  return `Basic ${Buffer.from(`${creds.username ?? ''}:${creds.password ?? ''}`).toString('base64')}`;
}

/** `Get "<url>": <what went wrong>`, as Go's http client words a failed request. */
function getError(url: string, message: string): string {
  return `Get "${url}": ${message}`;
}

/**
 * docker login (moby's loginV2): GET /v2/ of the registry; 200 means there is nothing to log in
 * to. A Basic challenge is answered with the credentials; a Bearer one by asking the realm for a
 * token (Basic credentials, or the identity token as OAuth2 refresh token) with
 * `offline_token=true`, so that a token server may give a refresh token — answered as the
 * IdentityToken the CLI keeps instead of the password. Then /v2/ must answer 200 with it.
 * Wrong credentials are Unauthorized with dockerd's words.
 */
export async function login(
  client: RegistryClient,
  creds: AuthConfig,
  signal?: AbortSignal,
): Promise<LoginResult> {
  const host = loginHost(creds.serveraddress);
  if (host === HUB_DOMAIN)
    throw unavailable(
      getError(
        'https://registry-1.docker.io/v2/',
        'there is no Docker Hub here; log in to a registry by its host:port (docker login <host:port>)',
      ),
    );
  const endpoints = await client.resolver.endpoints(host, host);
  let last: unknown;
  for (const ep of endpoints) {
    try {
      return await loginTo(client, ep, creds, signal);
    } catch (err) {
      last = err;
      if (!(err instanceof NetworkError) || signal?.aborted) throw err;
    }
  }
  if (last instanceof NetworkError) {
    const cause = last.cause instanceof Error ? last.cause.message : last.message;
    throw unavailable(getError(`${endpoints[endpoints.length - 1]?.base ?? ''}/v2/`, cause));
  }
  throw last ?? unavailable(`no endpoint for ${host}`);
}

async function loginTo(
  client: RegistryClient,
  ep: Endpoint,
  creds: AuthConfig,
  signal?: AbortSignal,
): Promise<LoginResult> {
  const v2 = `${ep.base}/v2/`;
  // a NetworkError (TLS refused, nothing listening) moves on to the next endpoint (http after https)
  const send = (headers: Record<string, string>) =>
    client.transport.send(ep, { method: 'GET', url: v2, headers, signal });
  const first = await send({});
  const status = first.statusCode ?? 0;
  first.resume();
  if (status === 200) return { status: 'Login Succeeded', identityToken: '' };
  if (status !== 401) {
    throw unavailable(`login attempt to ${v2} failed with status: ${status} ${statusText(status)}`);
  }
  const challenges = parseChallenges(first.headers['www-authenticate']);
  const bearer = challenges.find((c) => c.scheme === 'bearer' && c.params.realm);
  let authorization: string;
  let identityToken = '';
  if (creds.registrytoken) {
    authorization = `Bearer ${creds.registrytoken}`;
  } else if (bearer) {
    const t = await fetchToken(
      client,
      ep,
      bearer.params.realm as string,
      bearer.params.service ?? '',
      creds,
      v2,
      signal,
    );
    authorization = `Bearer ${t.token}`;
    identityToken = t.refreshToken;
  } else if (challenges.some((c) => c.scheme === 'basic')) {
    if (!creds.username && !creds.password) throw unauthorized(getError(v2, 'no basic auth credentials'));
    authorization = basic(creds);
  } else {
    throw unauthorized(`login attempt to ${v2} failed with status: 401 Unauthorized`);
  }
  const again = await send({ Authorization: authorization });
  const status2 = again.statusCode ?? 0;
  again.resume();
  if (status2 === 200) return { status: 'Login Succeeded', identityToken };
  const message = `login attempt to ${v2} failed with status: ${status2} ${statusText(status2)}`;
  throw status2 === 401 || status2 === 403 ? unauthorized(message) : unavailable(message);
}

/** A token for /v2/ from the realm: GET with Basic credentials, or POST a refresh-token grant. */
async function fetchToken(
  client: RegistryClient,
  ep: Endpoint,
  realm: string,
  service: string,
  creds: AuthConfig,
  v2: string,
  signal?: AbortSignal,
): Promise<{ token: string; refreshToken: string }> {
  let res: import('node:http').IncomingMessage;
  if (creds.identitytoken) {
    const form = new URLSearchParams({
      grant_type: 'refresh_token',
      refresh_token: creds.identitytoken,
      service,
      client_id: 'docker',
      access_type: 'offline',
    });
    res = await client.transport.send(ep, {
      method: 'POST',
      url: realm,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
      signal,
    });
  } else {
    const url = new URL(realm);
    if (service) url.searchParams.set('service', service);
    url.searchParams.set('client_id', 'docker');
    url.searchParams.set('offline_token', 'true');
    const headers: Record<string, string> = {};
    if (creds.username) {
      url.searchParams.set('account', creds.username);
      headers.Authorization = basic(creds);
    }
    res = await client.transport.send(ep, { method: 'GET', url: url.href, headers, signal });
  }
  if (res.statusCode !== 200) {
    const err = await errorFromResponse(res);
    const kind = res.statusCode === 401 || res.statusCode === 403 ? 'Unauthorized' : 'Unavailable';
    throw new BerthError(kind, getError(v2, err.message));
  }
  let body: { token?: unknown; access_token?: unknown; refresh_token?: unknown };
  try {
    body = JSON.parse((await readBody(res, 1024 * 1024)).toString('utf8'));
  } catch {
    throw unavailable(getError(v2, `the token server ${realm} answered something that is not JSON`));
  }
  const token =
    typeof body.token === 'string' && body.token
      ? body.token
      : typeof body.access_token === 'string'
        ? body.access_token
        : '';
  if (!token) throw unauthorized(getError(v2, `the token server ${realm} answered no token`));
  return { token, refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : '' };
}

function statusText(status: number): string {
  return STATUS_CODES[status] ?? '';
}
