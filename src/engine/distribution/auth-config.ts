import type { AuthConfig } from './types.js';

/**
 * Decode `X-Registry-Auth` (base64url, or standard base64, of a JSON AuthConfig) as moby does:
 * an empty or unreadable header means no credentials (dockerd ignores a bad header too). `auth`
 * (base64 `user:password`) fills username and password when they are missing.
 */
export function decodeAuthHeader(header: string | undefined): AuthConfig {
  if (!header) return {};
  let parsed: unknown;
  try {
    const b64 = header.trim().replace(/-/g, '+').replace(/_/g, '/');
    parsed = JSON.parse(Buffer.from(b64, 'base64').toString('utf8'));
  } catch {
    return {};
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
  const raw = parsed as Record<string, unknown>;
  const out: AuthConfig = {};
  for (const k of [
    'username',
    'password',
    'auth',
    'email',
    'serveraddress',
    'identitytoken',
    'registrytoken',
  ] as const) {
    const v = raw[k] ?? raw[k.charAt(0).toUpperCase() + k.slice(1)];
    if (typeof v === 'string' && v !== '') out[k] = v;
  }
  if (out.auth && !out.username && !out.password) {
    const decoded = Buffer.from(out.auth, 'base64').toString('utf8');
    const i = decoded.indexOf(':');
    if (i > 0) {
      out.username = decoded.slice(0, i);
      out.password = decoded.slice(i + 1);
    }
  }
  return out;
}

/** Whether the config carries anything to authenticate with. */
export function hasCredentials(a: AuthConfig): boolean {
  return Boolean(a.username || a.password || a.identitytoken || a.registrytoken);
}
