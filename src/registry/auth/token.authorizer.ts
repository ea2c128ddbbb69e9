import { createPublicKey, type KeyObject, type X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { forbidden, unauthorized } from '../../common/errors.js';
import type { Access, Authorizer, Grant } from './authorizer.js';
import { decodeJws, type JwtClaims, JwtError, tokenFingerprint, verifySignature } from './jwt.js';
import { libtrustKeyId, publicJwk, verifyX5c } from './keys.js';
import { missingAccess, quoteParam, scopeParam } from './scope.js';

export interface TokenVerifierOptions {
  /** Expected `iss`. */
  issuer: string;
  /** Expected `aud` (the registry's service name). */
  service: string;
  /** Trusted root certificates: `x5c` chains must lead to one; their keys are trusted by libtrust kid. */
  rootCerts?: readonly X509Certificate[];
  /** More trusted public keys by `kid` (a JWKS file, the built-in token server's key). */
  keys?: ReadonlyMap<string, KeyObject>;
  /** Clock skew allowed on `exp`/`nbf` (seconds). */
  leewaySeconds?: number;
  /** How many verified tokens are remembered (until they expire). */
  cacheMax?: number;
  now?: () => number;
}

export interface VerifiedToken {
  subject: string | undefined;
  access: Access[];
  expiresAt: number;
}

/**
 * Verifies JWT bearer tokens as issued per Docker's token authentication spec: signature (RS*, PS*,
 * ES*, EdDSA; key by `x5c` chain to a trusted root, by `jwk` header whose key is trusted, or by
 * `kid`), `iss`, `aud`, `exp`/`nbf` with leeway, and the `access` claim.
 */
export class TokenVerifier {
  private readonly keys = new Map<string, KeyObject>();
  private readonly roots: readonly X509Certificate[];
  private readonly leeway: number;
  private readonly cache = new Map<string, VerifiedToken>();
  private readonly cacheMax: number;
  private readonly now: () => number;

  constructor(readonly options: TokenVerifierOptions) {
    this.roots = options.rootCerts ?? [];
    for (const cert of this.roots) this.keys.set(libtrustKeyId(cert.publicKey), cert.publicKey);
    for (const [kid, key] of options.keys ?? []) {
      this.keys.set(kid, key);
      this.keys.set(libtrustKeyId(key), key);
    }
    if (this.keys.size === 0) throw new Error('token auth needs trusted keys: set rootcertbundle or jwks');
    this.leeway = options.leewaySeconds ?? 60;
    this.cacheMax = options.cacheMax ?? 4096;
    this.now = options.now ?? Date.now;
  }

  /** Verify a token; throws JwtError with the reason when it is not acceptable. */
  verify(token: string): VerifiedToken {
    const fp = tokenFingerprint(token);
    const nowMs = this.now();
    const hit = this.cache.get(fp);
    if (hit) {
      if (hit.expiresAt > nowMs) return hit;
      this.cache.delete(fp);
    }
    const verified = this.verifyUncached(token, nowMs);
    if (this.cache.size >= this.cacheMax) {
      for (const [k, v] of this.cache) if (v.expiresAt <= nowMs) this.cache.delete(k);
      for (const k of this.cache.keys()) {
        if (this.cache.size < this.cacheMax) break;
        this.cache.delete(k);
      }
    }
    this.cache.set(fp, verified);
    return verified;
  }

  /** A verified token from the cache only (cheap; for the rate limiter). */
  cached(token: string): VerifiedToken | undefined {
    const hit = this.cache.get(tokenFingerprint(token));
    return hit && hit.expiresAt > this.now() ? hit : undefined;
  }

  private verifyUncached(token: string, nowMs: number): VerifiedToken {
    const jws = decodeJws(token);
    const key = this.signingKey(jws.header);
    if (!verifySignature(jws, key)) throw new JwtError('token signature is invalid');
    const claims = jws.claims;
    if (claims.iss !== this.options.issuer) {
      throw new JwtError(`token issuer ${JSON.stringify(claims.iss)} is not the trusted issuer`);
    }
    const aud = typeof claims.aud === 'string' ? [claims.aud] : Array.isArray(claims.aud) ? claims.aud : [];
    if (!aud.includes(this.options.service)) {
      throw new JwtError(`token audience ${JSON.stringify(claims.aud)} does not include this service`);
    }
    const now = nowMs / 1000;
    if (typeof claims.exp !== 'number') throw new JwtError('token has no expiry');
    if (now > claims.exp + this.leeway) throw new JwtError('token has expired');
    if (typeof claims.nbf === 'number' && now + this.leeway < claims.nbf)
      throw new JwtError('token is not valid yet');
    const expiresAt = Math.min((claims.exp + this.leeway) * 1000, nowMs + 3600_000);
    return {
      subject: typeof claims.sub === 'string' ? claims.sub : undefined,
      access: accessClaim(claims),
      expiresAt,
    };
  }

  private signingKey(header: { kid?: unknown; x5c?: unknown; jwk?: unknown }): KeyObject {
    if (header.x5c !== undefined) {
      if (this.roots.length === 0)
        throw new JwtError('token carries x5c but no root certificates are configured');
      try {
        return verifyX5c(header.x5c, this.roots, new Date(this.now()));
      } catch (err) {
        throw new JwtError((err as Error).message);
      }
    }
    if (header.jwk !== undefined) {
      let kid: string;
      try {
        kid = libtrustKeyId(createJwkKey(header.jwk));
      } catch {
        throw new JwtError('token jwk header is not a public key');
      }
      const key = this.keys.get(kid);
      if (!key) throw new JwtError('token jwk header names an untrusted key');
      return key;
    }
    if (typeof header.kid === 'string') {
      const key = this.keys.get(header.kid);
      if (!key) throw new JwtError(`token key id ${JSON.stringify(header.kid)} is not trusted`);
      return key;
    }
    throw new JwtError('token header names no key (kid, jwk or x5c)');
  }
}

function createJwkKey(jwk: unknown): KeyObject {
  if (!jwk || typeof jwk !== 'object') throw new Error('not a JWK');
  // biome-ignore lint/suspicious/noExplicitAny: a JWK is a loose JSON object.
  return createPublicKey({ key: publicJwk(jwk as Record<string, unknown>) as any, format: 'jwk' });
}

function accessClaim(claims: JwtClaims): Access[] {
  const raw = claims.access;
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new JwtError('token access claim is not an array');
  const out: Access[] = [];
  for (const entry of raw) {
    if (!entry || typeof entry !== 'object') throw new JwtError('token access claim holds a non-object');
    const { type, name, actions } = entry as { type?: unknown; name?: unknown; actions?: unknown };
    if (typeof type !== 'string' || typeof name !== 'string')
      throw new JwtError('token access entry lacks type or name');
    if (type !== 'repository' && type !== 'registry') continue; // other resource types grant nothing here
    const list = Array.isArray(actions) ? actions.filter((a): a is string => typeof a === 'string') : [];
    out.push({ type, name, actions: list });
  }
  return out;
}

export interface TokenAuthorizerOptions {
  realm: string;
  service: string;
  verifier: TokenVerifier;
}

/**
 * Bearer token auth. No or bad token: 401 with
 * `WWW-Authenticate: Bearer realm=..,service=..,scope=..` (plus `error="invalid_token"`).
 * A valid token that names the resource but not every wanted action: 403 DENIED (the token
 * server already decided). A valid token that does not name the resource at all (the client asked
 * for another scope): 401 with `error="insufficient_scope"` so the client fetches a token for it.
 */
export class TokenAuthorizer implements Authorizer {
  constructor(readonly options: TokenAuthorizerOptions) {}

  /**
   * The challenge value. A realm starting with '/' (the built-in token server's path) is made
   * absolute from the request's Host, so clients reach the token server the way they reached us.
   */
  challenge(
    access: readonly Access[],
    error?: 'invalid_token' | 'insufficient_scope',
    req?: IncomingMessage,
  ): string {
    let realm = this.options.realm;
    if (realm.startsWith('/') && req) {
      const tls = (req.socket as { encrypted?: boolean } | undefined)?.encrypted === true;
      const host =
        req.headers.host ?? `${req.socket?.localAddress ?? '127.0.0.1'}:${req.socket?.localPort ?? 80}`;
      realm = `${tls ? 'https' : 'http'}://${host}${realm}`;
    }
    let value = `Bearer realm=${quoteParam(realm)},service=${quoteParam(this.options.service)}`;
    const scope = scopeParam(access);
    if (scope !== '') value += `,scope=${quoteParam(scope)}`;
    if (error) value += `,error=${quoteParam(error)}`;
    return value;
  }

  async authorize(req: IncomingMessage, access: Access[]): Promise<Grant> {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) {
      throw unauthorized('authentication required', { challenge: this.challenge(access, undefined, req) });
    }
    let verified: VerifiedToken;
    try {
      verified = this.options.verifier.verify(token);
    } catch (err) {
      if (!(err instanceof JwtError)) throw err;
      throw unauthorized(`invalid token: ${err.message}`, {
        challenge: this.challenge(access, 'invalid_token', req),
      });
    }
    const missing = missingAccess(verified.access, access);
    if (missing.length > 0) {
      const unnamed = missing.filter(
        (m) => !verified.access.some((g) => g.type === m.type && g.name === m.name),
      );
      const challenge = this.challenge(access, 'insufficient_scope', req);
      if (unnamed.length > 0) {
        throw unauthorized('authentication required: the token does not cover this resource', {
          challenge,
          access: unnamed,
        });
      }
      throw forbidden('requested access to the resource is denied', { challenge, access: missing });
    }
    const granted = verified.access;
    const mayPull = (name: string) =>
      missingAccess(granted, [{ type: 'repository', name, actions: ['pull'] }]).length === 0;
    return verified.subject === undefined ? { mayPull } : { user: verified.subject, mayPull };
  }

  identify(req: IncomingMessage): string | undefined {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) return undefined;
    return this.options.verifier.cached(token)?.subject;
  }
}

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}
