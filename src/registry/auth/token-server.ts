import { createPublicKey, type KeyObject, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BerthError, errorMessage, invalidParameter, unauthorized } from '../../common/errors.js';
import { type Logger, rootLogger } from '../../common/log.js';
import { discardUnreadBody, readBody } from '../../http/body.js';
import type { Acl } from './acl.js';
import type { Access } from './authorizer.js';
import { type Htpasswd, parseBasicAuth } from './htpasswd.js';
import { algorithmForKey, decodeJws, type JwsAlgorithm, JwtError, signJwt, verifySignature } from './jwt.js';
import { libtrustKeyId } from './keys.js';
import { parseScopes, quoteParam, scopeParam } from './scope.js';

export interface TokenServerOptions {
  /** `iss` of the tokens; the registry's auth.token.issuer. */
  issuer: string;
  /** The service name (`aud`); the registry's auth.token.service. */
  service: string;
  /** Signing key (P-256 → ES256, RSA → RS256, Ed25519 → EdDSA). */
  privateKey: KeyObject;
  /** Lifetime of access tokens (seconds). */
  expiresIn?: number;
  /** Lifetime of refresh tokens (seconds). */
  refreshExpiresIn?: number;
  /** Users; without it only anonymous tokens are given. */
  htpasswd?: Htpasswd;
  /** Realm of the Basic challenge the token endpoint answers wrong credentials with. */
  basicRealm?: string;
  acl: Acl;
  /** Bytes of a POST form (413 beyond); default 64 KiB (berth.limits.formsize). */
  maxFormBytes?: number;
  log?: Logger;
  now?: () => number;
}

export interface IssuedToken {
  token: string;
  access_token: string;
  expires_in: number;
  issued_at: string;
  scope?: string;
  refresh_token?: string;
}

const REFRESH_AUDIENCE_PREFIX = 'refresh-token:';

/**
 * The built-in token server (a berth extension): Docker's token protocol.
 * - `GET <realm>?service=..&scope=..&scope=..[&account=..][&offline_token=true]` with Basic
 *   credentials (or none: anonymous) answers `{token, access_token, expires_in, issued_at}`.
 * - `POST <realm>` with a form (`grant_type=password&username&password` or
 *   `grant_type=refresh_token&refresh_token`, `service`, `scope` space-separated,
 *   `access_type=offline` for a refresh token) answers the OAuth2 form of the same.
 * The granted access is what the ACL allows out of what was asked; every requested resource
 * appears in the `access` claim, with no actions when nothing is allowed.
 */
export class TokenServer {
  readonly alg: JwsAlgorithm;
  readonly kid: string;
  readonly publicKey: KeyObject;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly basicChallenge: string;

  constructor(readonly options: TokenServerOptions) {
    this.alg = algorithmForKey(options.privateKey);
    this.publicKey = createPublicKey(options.privateKey);
    this.kid = libtrustKeyId(this.publicKey);
    this.log = options.log ?? rootLogger.child('token-server');
    this.now = options.now ?? Date.now;
    this.basicChallenge = `Basic realm=${quoteParam(options.basicRealm ?? 'berth token server')}`;
  }

  /** Handle a token request; writes the answer (JSON errors as the registry writes them). */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const answer = await this.answer(req);
      const text = JSON.stringify(answer);
      res.statusCode = 200;
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Cache-Control', 'no-store');
      res.setHeader('Content-Length', Buffer.byteLength(text));
      res.end(text);
    } catch (err) {
      if (req.destroyed && !req.complete) return; // the client went away while sending
      const e = err instanceof BerthError ? err : new BerthError('System', errorMessage(err));
      const status =
        e.kind === 'Unauthorized'
          ? 401
          : e.kind === 'InvalidParameter'
            ? 400
            : e.kind === 'TooLarge'
              ? 413
              : 500;
      if (status === 500) this.log.error('token request failed', { error: e.message });
      const codes: Record<number, string> = {
        400: 'INVALID_REQUEST',
        401: 'UNAUTHORIZED',
        413: 'SIZE_INVALID',
      };
      const code = codes[status] ?? 'UNKNOWN';
      const text = JSON.stringify({ errors: [{ code, message: e.message }] });
      // A form we did not read whole is discarded (bounded) so the connection can go on.
      discardUnreadBody(req, res);
      res.statusCode = status;
      if (status === 401) res.setHeader('WWW-Authenticate', this.basicChallenge);
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Content-Length', Buffer.byteLength(text));
      res.end(text);
    }
  }

  private readForm(req: IncomingMessage): Promise<Buffer> {
    const limit = this.options.maxFormBytes ?? 64 * 1024;
    return readBody(
      req,
      limit,
      () => new BerthError('TooLarge', `request body exceeds the limit of ${limit} bytes`),
    );
  }

  /** The token answer for a request, or a BerthError (InvalidParameter, Unauthorized). */
  async answer(req: IncomingMessage): Promise<IssuedToken> {
    const url = new URL(req.url ?? '/', 'http://token.invalid');
    if (req.method === 'GET' || req.method === 'HEAD') return this.answerGet(req, url.searchParams);
    if (req.method === 'POST') return this.answerPost(req);
    throw invalidParameter(`method ${req.method} is not supported by the token endpoint`);
  }

  private async answerGet(req: IncomingMessage, query: URLSearchParams): Promise<IssuedToken> {
    this.checkService(query.get('service'));
    const scopes = parseScopes(query.getAll('scope'));
    const creds = parseBasicAuth(req.headers.authorization);
    if (req.headers.authorization && !creds) throw unauthorized('malformed Authorization header');
    let account: string | undefined;
    if (creds) {
      account = await this.login(creds.user, creds.password);
      const asked = query.get('account');
      if (asked && asked !== account) throw invalidParameter('account does not match the authenticated user');
    }
    const offline = query.get('offline_token') === 'true';
    return this.issue(account, scopes, offline);
  }

  private async answerPost(req: IncomingMessage): Promise<IssuedToken> {
    const type = String(req.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim()
      .toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      throw invalidParameter('token POST requests must be application/x-www-form-urlencoded');
    }
    const form = new URLSearchParams((await this.readForm(req)).toString('utf8'));
    this.checkService(form.get('service'));
    const scopes = parseScopes(form.getAll('scope'));
    const grantType = form.get('grant_type');
    let account: string;
    if (grantType === 'password') {
      const user = form.get('username');
      const password = form.get('password');
      if (!user || password === null)
        throw invalidParameter('grant_type=password needs username and password');
      account = await this.login(user, password);
    } else if (grantType === 'refresh_token') {
      const refresh = form.get('refresh_token');
      if (!refresh) throw invalidParameter('grant_type=refresh_token needs refresh_token');
      account = this.checkRefreshToken(refresh);
    } else {
      throw invalidParameter(`unsupported grant_type ${JSON.stringify(grantType)}`);
    }
    const answer = this.issue(account, scopes, form.get('access_type') === 'offline');
    if (grantType === 'refresh_token') answer.refresh_token = form.get('refresh_token') ?? undefined;
    return answer;
  }

  private checkService(service: string | null): void {
    if (service !== null && service !== this.options.service) {
      throw invalidParameter(`unknown service ${JSON.stringify(service)}`);
    }
  }

  private async login(user: string, password: string): Promise<string> {
    const htpasswd = this.options.htpasswd;
    if (!htpasswd || !(await htpasswd.verify(user, password))) {
      this.log.info('token request with wrong credentials', { account: user });
      throw unauthorized('invalid username or password');
    }
    return user;
  }

  /** Sign an access token for a subject (undefined: anonymous) with the ACL's share of `scopes`. */
  issue(account: string | undefined, scopes: Access[], offline = false): IssuedToken {
    const access = this.options.acl.grant(account === undefined ? {} : { account }, scopes);
    const nowMs = this.now();
    const now = Math.floor(nowMs / 1000);
    const expiresIn = this.options.expiresIn ?? 300;
    const token = signJwt(
      {
        iss: this.options.issuer,
        sub: account ?? '',
        aud: this.options.service,
        exp: now + expiresIn,
        nbf: now - 1,
        iat: now,
        jti: randomUUID(),
        access,
      },
      this.options.privateKey,
      { alg: this.alg, kid: this.kid },
    );
    const answer: IssuedToken = {
      token,
      access_token: token,
      expires_in: expiresIn,
      issued_at: new Date(now * 1000).toISOString(),
    };
    const granted = scopeParam(access.filter((a) => a.actions.length > 0));
    if (granted !== '') answer.scope = granted;
    if (offline && account !== undefined) answer.refresh_token = this.refreshToken(account, now);
    this.log.debug('token issued', { account: account ?? '(anonymous)', access: scopeParam(access) });
    return answer;
  }

  private refreshToken(account: string, now: number): string {
    return signJwt(
      {
        iss: this.options.issuer,
        sub: account,
        aud: REFRESH_AUDIENCE_PREFIX + this.options.service,
        exp: now + (this.options.refreshExpiresIn ?? 7 * 86_400),
        iat: now,
        jti: randomUUID(),
      },
      this.options.privateKey,
      { alg: this.alg, kid: this.kid },
    );
  }

  /** The account of a refresh token this server issued (and whose user still exists). */
  private checkRefreshToken(token: string): string {
    try {
      const jws = decodeJws(token);
      if (jws.header.alg !== this.alg || !verifySignature(jws, this.publicKey))
        throw new JwtError('bad signature');
      const c = jws.claims;
      if (c.iss !== this.options.issuer || c.aud !== REFRESH_AUDIENCE_PREFIX + this.options.service) {
        throw new JwtError('not a refresh token of this service');
      }
      if (typeof c.exp !== 'number' || c.exp < this.now() / 1000) throw new JwtError('expired');
      if (typeof c.sub !== 'string' || c.sub === '') throw new JwtError('no subject');
      if (!this.options.htpasswd?.userNames().includes(c.sub))
        throw new JwtError('the user no longer exists');
      return c.sub;
    } catch (err) {
      if (err instanceof JwtError) throw unauthorized(`invalid refresh token: ${err.message}`);
      throw err;
    }
  }
}
