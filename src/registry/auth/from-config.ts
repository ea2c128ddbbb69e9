import { createPrivateKey, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Logger, rootLogger } from '../../common/log.js';
import type { RegistryConfig } from '../config.js';
import { RateLimiter } from '../limits/rate-limiter.js';
import { Acl, validateAcl } from './acl.js';
import { type Authorizer, openAccess } from './authorizer.js';
import { BasicAuthorizer } from './basic.authorizer.js';
import { Htpasswd } from './htpasswd.js';
import { generateSigningKeyPair, libtrustKeyId, loadCertBundle, loadJwks, loadPrivateKey } from './keys.js';
import { TokenAuthorizer, TokenVerifier } from './token.authorizer.js';
import { TokenServer } from './token-server.js';

export interface ExtraRoute {
  method: string[];
  /** An exact path (no parameters). */
  path: string;
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

export interface RegistryAccessControl {
  authorizer: Authorizer;
  rateLimiter?: RateLimiter;
  /** The built-in token server's endpoint, when enabled. */
  extraRoutes: ExtraRoute[];
  tokenServer?: TokenServer;
}

export const DEFAULT_SERVICE = 'berth-registry';
export const DEFAULT_ISSUER = 'berth-token-server';

/**
 * Build the registry's authorizer, rate limiter and token endpoint from its configuration:
 * - `auth.htpasswd` alone: Basic auth (every valid user may do everything);
 * - `auth.token`: Bearer tokens from `realm`, checked against `rootcertbundle` and/or `jwks`;
 * - `berth.tokenserver` (enabled): the built-in token server at its `path`, signing with `key`
 *   (generated in memory when absent), authenticating users from its `htpasswd` (default
 *   `auth.htpasswd.path`) and granting by its `acl` rules and `groups`; the registry trusts its
 *   key and, without `auth.token`, uses token auth with the token server as realm (a realm
 *   starting with '/' is completed from each request's Host);
 * - neither: open access.
 * `berth.ratelimit` (enabled) adds the per-client rate limiter (`by: user` keys authenticated
 * clients by user name).
 */
export function accessControlFromConfig(
  config: RegistryConfig,
  log: Logger = rootLogger.child('auth'),
): RegistryAccessControl {
  for (const kind of Object.keys(config.auth)) {
    if (kind !== 'htpasswd' && kind !== 'token') {
      throw new Error(`auth.${kind} is not supported (use auth.htpasswd, auth.token or berth.tokenserver)`);
    }
  }
  const result: RegistryAccessControl = { authorizer: openAccess, extraRoutes: [] };
  const htpasswdConf = config.auth.htpasswd;
  const tokenConf = config.auth.token;
  const serverConf = config.berth.tokenserver?.enabled ? config.berth.tokenserver : undefined;

  let htpasswd: Htpasswd | undefined;
  const usersFile = serverConf?.htpasswd ?? htpasswdConf?.path;
  if (usersFile) htpasswd = new Htpasswd(usersFile, { log: log.child('htpasswd') });

  const trusted = new Map<string, KeyObject>();
  if (serverConf) {
    const service = serverConf.service ?? tokenConf?.service ?? DEFAULT_SERVICE;
    const issuer = serverConf.issuer ?? tokenConf?.issuer ?? DEFAULT_ISSUER;
    let privateKey: KeyObject;
    if (serverConf.key) privateKey = loadPrivateKey(serverConf.key);
    else {
      privateKey = createPrivateKey(generateSigningKeyPair('ES256').privateKeyPem);
      log.info('token server: no signing key configured; using a key generated for this run');
    }
    const publicKey = createPublicKey(privateKey);
    if (serverConf.certificate) {
      const cert = new X509Certificate(readText(serverConf.certificate));
      if (libtrustKeyId(cert.publicKey) !== libtrustKeyId(publicKey)) {
        throw new Error(
          `berth.tokenserver.certificate ${serverConf.certificate} is not the certificate of its key`,
        );
      }
    }
    trusted.set(libtrustKeyId(publicKey), publicKey);
    const rawServer = ((config.raw.berth as Record<string, unknown> | undefined)?.tokenserver ??
      {}) as Record<string, unknown>;
    const acl = new Acl(
      validateAcl(serverConf.acl, 'berth.tokenserver.acl'),
      validateGroups(rawServer.groups),
    );
    const server = new TokenServer({
      issuer,
      service,
      privateKey,
      expiresIn: serverConf.expiration || 300,
      htpasswd,
      basicRealm: htpasswdConf?.realm ?? service,
      acl,
      maxFormBytes: config.berth.limits.formsize,
      log: log.child('token-server'),
    });
    result.tokenServer = server;
    result.extraRoutes.push({
      method: ['GET', 'POST'],
      path: serverConf.path,
      handler: (req, res) => server.handle(req, res),
    });
    if (!tokenConf) {
      result.authorizer = new TokenAuthorizer({
        realm: serverConf.path,
        service,
        verifier: new TokenVerifier({ issuer, service, keys: trusted }),
      });
    }
  }

  if (tokenConf) {
    if (!tokenConf.realm || !tokenConf.service || !tokenConf.issuer) {
      throw new Error('auth.token needs realm, service and issuer');
    }
    if (!tokenConf.rootcertbundle && !tokenConf.jwks && trusted.size === 0) {
      throw new Error('auth.token needs rootcertbundle or jwks (or berth.tokenserver)');
    }
    if (tokenConf.jwks) for (const [kid, key] of loadJwks(tokenConf.jwks)) trusted.set(kid, key);
    const verifier = new TokenVerifier({
      issuer: tokenConf.issuer,
      service: tokenConf.service,
      rootCerts: tokenConf.rootcertbundle ? loadCertBundle(tokenConf.rootcertbundle) : [],
      keys: trusted,
    });
    result.authorizer = new TokenAuthorizer({ realm: tokenConf.realm, service: tokenConf.service, verifier });
  } else if (!serverConf && htpasswdConf && htpasswd) {
    result.authorizer = new BasicAuthorizer(htpasswdConf.realm, htpasswd);
  }

  const rl = config.berth.ratelimit;
  if (rl?.enabled) {
    const authorizer = result.authorizer;
    result.rateLimiter = new RateLimiter({
      rate: rl.requestspersecond,
      burst: Math.max(1, rl.burst),
      identify: rl.by === 'user' && authorizer.identify ? (req) => authorizer.identify?.(req) : undefined,
    });
  }
  return result;
}

function validateGroups(raw: unknown): Record<string, string[]> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new Error('berth.tokenserver.groups: expected a mapping of group → users');
  const out: Record<string, string[]> = {};
  for (const [group, users] of Object.entries(raw as Record<string, unknown>)) {
    if (!Array.isArray(users) || !users.every((u) => typeof u === 'string')) {
      throw new Error(`berth.tokenserver.groups.${group}: expected a list of user names`);
    }
    out[group] = users as string[];
  }
  return out;
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
}
