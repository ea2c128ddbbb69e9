import { readFile } from 'node:fs/promises';
import type { ConnectionLimits } from '../common/connection-limits.js';
import { type LogLevel, parseLogLevel } from '../common/log.js';
import type { EndpointConfig } from './notifications/endpoint.js';
import type { ProxyConfig } from './proxy/upstream.js';
import { parseYamlApart, parseYamlHere, type YamlParser, type YamlResult } from './yaml.js';

/** One YAML text through a parser: its value, or the parser's error thrown. */
function parseYaml(text: string, parser: YamlParser = parseYamlHere): unknown {
  return yamlValue(parser([text])[0]);
}

function yamlValue(r: YamlResult | undefined): unknown {
  if (!r) throw new Error('no result from the YAML parser');
  if ('error' in r) throw new Error(r.error);
  return r.value;
}

/** The REGISTRY_* variables of an environment, in the order they are applied. */
function registryVariables(env: NodeJS.ProcessEnv): Array<[string, string]> {
  return Object.entries(env)
    .filter((e): e is [string, string] => e[0].startsWith('REGISTRY_') && e[1] !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * The registry configuration: the reference registry's config.yml schema (the subset berth
 * implements), plus a `berth:` section for berth's own extensions. YAML or JSON.
 */
export interface HtpasswdAuthConfig {
  realm: string;
  path: string;
}

export interface TokenAuthConfig {
  realm: string;
  service: string;
  issuer: string;
  /** PEM bundle of the certificates whose keys sign tokens. */
  rootcertbundle?: string;
  /** A JWKS file of the keys that sign tokens. */
  jwks?: string;
  autoredirect?: boolean;
}

/** berth extension: the built-in token server (served at `path`, usually /auth/token). */
export interface TokenServerConfig {
  enabled: boolean;
  path: string;
  issuer?: string;
  service?: string;
  /** PEM private key that signs tokens; generated in memory when absent. */
  key?: string;
  /** PEM certificate of that key (what `auth.token.rootcertbundle` trusts). */
  certificate?: string;
  /** Token lifetime in seconds. */
  expiration: number;
  /** htpasswd file of the users the token server authenticates (defaults to auth.htpasswd.path). */
  htpasswd?: string;
  /** Access rules (the colleague's format; passed through as written). */
  acl?: unknown;
}

/** berth extension: request rate limiting. */
export interface RateLimitConfig {
  enabled: boolean;
  /** Sustained requests per second per client. */
  requestspersecond: number;
  burst: number;
  /** What a bucket is keyed on. */
  by: 'ip' | 'user';
}

// ---- berth.limits: request body sizes and upload requests per client (src/registry/limits) ----

/** berth extension: what one request may send, and how many uploads one client may run at once. */
export interface RequestLimitsConfig {
  /** Bytes of a manifest PUT (413 SIZE_INVALID beyond; OCI: registries should accept 4 MiB). */
  manifestsize: number;
  /** Bytes of one blob, over all its chunks (413 SIZE_INVALID beyond); 0: no limit. */
  blobsize: number;
  /** Bytes of the token endpoint's POST form (413). */
  formsize: number;
  /** Upload requests with a body in flight per client address (429 TOOMANYREQUESTS beyond); 0: no limit. */
  uploadsperclient: number;
}

export const DEFAULT_REQUEST_LIMITS: RequestLimitsConfig = {
  manifestsize: 4 * 1024 * 1024,
  blobsize: 0,
  formsize: 64 * 1024,
  uploadsperclient: 32,
};

function requestLimits(berth: Obj): RequestLimitsConfig {
  const limits = obj(berth.limits, 'berth.limits');
  const out = { ...DEFAULT_REQUEST_LIMITS };
  for (const key of Object.keys(out) as Array<keyof RequestLimitsConfig>) {
    const value = num(limits[key], `berth.limits.${key}`, out[key]);
    if (!Number.isSafeInteger(value)) throw new ConfigError(`berth.limits.${key} must be a whole number`);
    out[key] = value;
  }
  if (out.manifestsize === 0 || out.formsize === 0)
    throw new ConfigError('berth.limits.manifestsize and formsize must be at least 1');
  return out;
}

// ---- end of berth.limits ----

export interface RegistryConfig {
  version: string;
  log: { level: LogLevel; accesslog: { disabled: boolean } };
  storage: {
    filesystem: { rootdirectory: string };
    delete: { enabled: boolean };
    maintenance: {
      uploadpurging: { enabled: boolean; ageMs: number; intervalMs: number; dryrun: boolean };
      readonly: { enabled: boolean };
    };
  };
  http: {
    addr: string;
    /** Location headers relative to the request (true) or absolute from Host (false, the default). */
    relativeurls: boolean;
    tls?: { certificate: string; key: string };
    /** Unknown here: `http.secret`, `http.headers`, `http.debug` are accepted and ignored. */
  };
  auth: { htpasswd?: HtpasswdAuthConfig; token?: TokenAuthConfig; [other: string]: unknown };
  /** `proxy`: a pull-through cache of `remoteurl` (read-only to clients). */
  proxy?: ProxyConfig;
  /** `notifications.endpoints` (disabled ones left out), `notifications.events.includereferences`. */
  notifications: { endpoints: EndpointConfig[]; includeReferences: boolean };
  berth: {
    /** DELETE /v2/<name>/manifests/<tag> removes only the tag (otherwise 405 UNSUPPORTED). */
    deletetags: boolean;
    /** maxentries: tag list and catalog page limit; referrers: descriptors per referrers page. */
    pagination: { maxentries: number; referrers: number };
    /** A mount without `from` searches the repositories the caller may pull. */
    crossmount: { automatic: boolean };
    /** Garbage collection inside the serving registry (`berth.gc`), when configured. */
    gc?: OnlineGcConfig;
    cache: { manifests: { entries: number; bytes: number } };
    tokenserver?: TokenServerConfig;
    ratelimit?: RateLimitConfig;
    /** Connection caps (`berth.connections`, see connectionLimitsFrom). */
    connections: ConnectionLimits;
    limits: RequestLimitsConfig;
  };
  /** The raw document, for extensions that read more than this type names. */
  raw: Record<string, unknown>;
}

export const DEFAULT_ADDR = '127.0.0.1:5000';
export const DEFAULT_ROOT = '/var/lib/berth/registry';

export class ConfigError extends Error {}

type Obj = Record<string, unknown>;

function obj(v: unknown, where: string): Obj {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(`${where} must be a mapping`);
  return v as Obj;
}

function str(v: unknown, where: string, fallback: string): string;
function str(v: unknown, where: string, fallback?: string): string | undefined;
function str(v: unknown, where: string, fallback?: string): string | undefined {
  if (v === undefined || v === null) return fallback;
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  throw new ConfigError(`${where} must be a string`);
}

function bool(v: unknown, where: string, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (typeof v === 'boolean') return v;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw new ConfigError(`${where} must be true or false`);
}

function num(v: unknown, where: string, fallback: number): number {
  if (v === undefined || v === null) return fallback;
  const n = typeof v === 'string' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0)
    throw new ConfigError(`${where} must be a number ≥ 0`);
  return n;
}

/** A Go duration ("168h", "1h30m", "10s", "500ms") or a number of seconds, in milliseconds. */
export function parseDuration(v: unknown, where: string, fallbackMs: number): number {
  if (v === undefined || v === null) return fallbackMs;
  if (typeof v === 'number') return v * 1000;
  if (typeof v !== 'string') throw new ConfigError(`${where} must be a duration like 168h`);
  const units: Record<string, number> = {
    h: 3_600_000,
    m: 60_000,
    s: 1000,
    ms: 1,
    us: 0.001,
    µs: 0.001,
    ns: 1e-6,
  };
  const re = /(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/g;
  let total = 0;
  let consumed = 0;
  for (const m of v.matchAll(re)) {
    total += Number(m[1]) * (units[m[2] ?? 's'] ?? 0);
    consumed += m[0].length;
  }
  if (consumed !== v.length || consumed === 0)
    throw new ConfigError(`${where}: invalid duration ${JSON.stringify(v)}`);
  return total;
}

// ---- berth.gc: garbage collection inside the serving registry (src/registry/gc) ----

export interface OnlineGcConfig {
  /** A run every `interval` (0: only on demand). */
  intervalMs: number;
  /** Blobs and manifests younger than this are kept (docs/registry-gc.md, Cutoff). */
  gracePeriodMs: number;
  deleteUntagged: boolean;
  /** `POST /berth/gc` runs one now (admin credentials when auth is on). */
  endpoint: boolean;
  /**
   * With auth on, the users who may call the endpoint (`berth.gc.admins`), besides holding
   * access `registry:gc:*`; empty: any user who holds it (with htpasswd: any valid user).
   */
  admins: string[];
}

function onlineGc(raw: unknown): OnlineGcConfig | undefined {
  if (raw === undefined || raw === null) return undefined;
  const g = obj(raw, 'berth.gc');
  return {
    intervalMs: parseDuration(g.interval, 'berth.gc.interval', 0),
    gracePeriodMs: parseDuration(g.graceperiod, 'berth.gc.graceperiod', 3_600_000),
    deleteUntagged: bool(g.deleteuntagged, 'berth.gc.deleteuntagged', false),
    endpoint: bool(g.endpoint, 'berth.gc.endpoint', true),
    admins: strings(g.admins, 'berth.gc.admins'),
  };
}

// ---- notifications.endpoints (src/registry/notifications) ----

function strings(v: unknown, where: string): string[] {
  if (v === undefined || v === null) return [];
  const list = Array.isArray(v) ? v : [v];
  return list.map((x, i) => {
    const s = str(x, `${where}[${i}]`);
    if (s === undefined) throw new ConfigError(`${where}[${i}] must be a string`);
    return s;
  });
}

/**
 * The reference registry's `notifications.endpoints`: name, url, headers (a value or a list
 * per header), timeout (1s), threshold (10), backoff (1s), ignoredmediatypes,
 * ignore.{mediatypes,actions}, disabled. Defaults as distribution's.
 */
function notificationEndpoints(raw: unknown): EndpointConfig[] {
  const notifications = obj(raw, 'notifications');
  const list = notifications.endpoints;
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw new ConfigError('notifications.endpoints must be a list');
  const out: EndpointConfig[] = [];
  for (const [i, item] of list.entries()) {
    const where = `notifications.endpoints[${i}]`;
    const e = obj(item, where);
    if (bool(e.disabled, `${where}.disabled`, false)) continue;
    const name = str(e.name, `${where}.name`);
    const url = str(e.url, `${where}.url`);
    if (!name) throw new ConfigError(`${where}.name is required`);
    if (!url || !/^https?:\/\//.test(url)) throw new ConfigError(`${where}.url must be an http(s) URL`);
    const headers: Record<string, string[]> = {};
    for (const [k, v] of Object.entries(obj(e.headers, `${where}.headers`)))
      headers[k] = strings(v, `${where}.headers.${k}`);
    const ignore = obj(e.ignore, `${where}.ignore`);
    const positive = (ms: number, fallback: number) => (ms > 0 ? ms : fallback);
    out.push({
      name,
      url,
      headers,
      timeoutMs: positive(parseDuration(e.timeout, `${where}.timeout`, 1000), 1000),
      threshold: positive(num(e.threshold, `${where}.threshold`, 10), 10),
      backoffMs: positive(parseDuration(e.backoff, `${where}.backoff`, 1000), 1000),
      ignoredMediaTypes: [
        ...strings(e.ignoredmediatypes, `${where}.ignoredmediatypes`),
        ...strings(ignore.mediatypes, `${where}.ignore.mediatypes`),
      ],
      ignoredActions: strings(ignore.actions, `${where}.ignore.actions`),
    });
  }
  return out;
}

// ---- berth.connections: the connection caps (src/http/connection-limits.ts) ----

/**
 * The registry's connection caps by default: 64 KiB of headers (a bearer token is a few KiB),
 * 512 connections per client address (a registry behind a proxy sees one address: raise it or
 * set 0), a minute for headers and for a stalled body.
 */
export const defaultRegistryConnections: ConnectionLimits = {
  maxHeaderBytes: 64 * 1024,
  maxConnectionsPerClient: 512,
  maxLocalConnections: 512,
  headersTimeoutMs: 60_000,
  bodyIdleTimeoutMs: 60_000,
  keepAliveTimeoutMs: 65_000,
};

/**
 * `berth.connections`: `maxheaderbytes` (431 past it), `maxconnectionsperclient` (429 past it;
 * 0: none), `headerstimeout` (408), `bodyidletimeout` (a body that receives nothing for that
 * long: 408, closed), `keepalivetimeout`; durations as Go's ("30s", "500ms") or seconds.
 */
function connectionLimitsFrom(raw: unknown): ConnectionLimits {
  const c = obj(raw, 'berth.connections');
  const d = defaultRegistryConnections;
  const perClient = num(
    c.maxconnectionsperclient,
    'berth.connections.maxconnectionsperclient',
    d.maxConnectionsPerClient,
  );
  const maxHeaderBytes = num(c.maxheaderbytes, 'berth.connections.maxheaderbytes', d.maxHeaderBytes);
  if (maxHeaderBytes < 1024) throw new ConfigError('berth.connections.maxheaderbytes must be at least 1024');
  return {
    maxHeaderBytes,
    maxConnectionsPerClient: perClient,
    maxLocalConnections: perClient,
    headersTimeoutMs: parseDuration(c.headerstimeout, 'berth.connections.headerstimeout', d.headersTimeoutMs),
    bodyIdleTimeoutMs: parseDuration(
      c.bodyidletimeout,
      'berth.connections.bodyidletimeout',
      d.bodyIdleTimeoutMs,
    ),
    keepAliveTimeoutMs: parseDuration(
      c.keepalivetimeout,
      'berth.connections.keepalivetimeout',
      d.keepAliveTimeoutMs,
    ),
  };
}

/** Build the typed configuration from a parsed document (defaults for everything missing). */
export function configFromObject(doc: unknown): RegistryConfig {
  const raw = obj(doc, 'configuration');
  const log = obj(raw.log, 'log');
  const storage = obj(raw.storage, 'storage');
  const fsys = obj(storage.filesystem, 'storage.filesystem');
  const maintenance = obj(storage.maintenance, 'storage.maintenance');
  const purging = obj(maintenance.uploadpurging, 'storage.maintenance.uploadpurging');
  const readonly = obj(maintenance.readonly, 'storage.maintenance.readonly');
  const http = obj(raw.http, 'http');
  const tls = obj(http.tls, 'http.tls');
  const auth = obj(raw.auth, 'auth');
  const berth = obj(raw.berth, 'berth');
  const accesslogHttp = obj(http.accesslog, 'http.accesslog');
  const accesslogLog = obj(log.accesslog, 'log.accesslog');

  for (const key of Object.keys(storage)) {
    if (!['filesystem', 'delete', 'maintenance', 'cache', 'redirect', 'tag'].includes(key)) {
      throw new ConfigError(`storage driver ${JSON.stringify(key)} is not supported (only filesystem)`);
    }
  }

  const config: RegistryConfig = {
    version: str(raw.version, 'version', '0.1'),
    log: {
      level: parseLogLevel(str(log.level, 'log.level', 'info')),
      accesslog: {
        disabled: bool(
          accesslogLog.disabled,
          'log.accesslog.disabled',
          bool(accesslogHttp.disabled, 'http.accesslog.disabled', false),
        ),
      },
    },
    storage: {
      filesystem: {
        rootdirectory: str(fsys.rootdirectory, 'storage.filesystem.rootdirectory', DEFAULT_ROOT),
      },
      delete: {
        enabled: bool(obj(storage.delete, 'storage.delete').enabled, 'storage.delete.enabled', false),
      },
      maintenance: {
        uploadpurging: {
          enabled: bool(purging.enabled, 'uploadpurging.enabled', true),
          ageMs: parseDuration(purging.age, 'uploadpurging.age', 168 * 3_600_000),
          intervalMs: parseDuration(purging.interval, 'uploadpurging.interval', 24 * 3_600_000),
          dryrun: bool(purging.dryrun, 'uploadpurging.dryrun', false),
        },
        readonly: { enabled: bool(readonly.enabled, 'storage.maintenance.readonly.enabled', false) },
      },
    },
    http: {
      addr: str(http.addr, 'http.addr', DEFAULT_ADDR),
      relativeurls: bool(http.relativeurls, 'http.relativeurls', false),
    },
    auth: {},
    notifications: {
      endpoints: notificationEndpoints(raw.notifications),
      includeReferences: bool(
        obj(obj(raw.notifications, 'notifications').events, 'notifications.events').includereferences,
        'notifications.events.includereferences',
        false,
      ),
    },
    berth: {
      deletetags: bool(berth.deletetags, 'berth.deletetags', false),
      pagination: {
        maxentries: num(
          obj(berth.pagination, 'berth.pagination').maxentries,
          'berth.pagination.maxentries',
          1000,
        ),
        referrers: num(
          obj(berth.pagination, 'berth.pagination').referrers,
          'berth.pagination.referrers',
          1000,
        ),
      },
      crossmount: {
        automatic: bool(
          obj(berth.crossmount, 'berth.crossmount').automatic,
          'berth.crossmount.automatic',
          true,
        ),
      },
      cache: {
        manifests: {
          entries: num(
            obj(obj(berth.cache, 'berth.cache').manifests, 'berth.cache.manifests').entries,
            'entries',
            10_000,
          ),
          bytes: num(
            obj(obj(berth.cache, 'berth.cache').manifests, 'berth.cache.manifests').bytes,
            'bytes',
            64 << 20,
          ),
        },
      },
      gc: onlineGc(berth.gc),
      connections: connectionLimitsFrom(berth.connections),
      limits: requestLimits(berth),
    },
    raw,
  };
  if (raw.proxy !== undefined && raw.proxy !== null) {
    const p = obj(raw.proxy, 'proxy');
    const remoteurl = str(p.remoteurl, 'proxy.remoteurl');
    if (!remoteurl || !/^https?:\/\/[^/]/.test(remoteurl))
      throw new ConfigError('proxy.remoteurl must be an http(s) URL');
    config.proxy = {
      remoteurl,
      username: str(p.username, 'proxy.username'),
      password: str(p.password, 'proxy.password'),
      ttlMs: parseDuration(p.ttl, 'proxy.ttl', 168 * 3_600_000),
    };
  }
  if (tls.certificate !== undefined || tls.key !== undefined) {
    const certificate = str(tls.certificate, 'http.tls.certificate');
    const key = str(tls.key, 'http.tls.key');
    if (!certificate || !key) throw new ConfigError('http.tls needs both certificate and key');
    config.http.tls = { certificate, key };
  }
  for (const [k, v] of Object.entries(auth)) config.auth[k] = v;
  if (auth.htpasswd !== undefined) {
    const h = obj(auth.htpasswd, 'auth.htpasswd');
    const path = str(h.path, 'auth.htpasswd.path');
    if (!path) throw new ConfigError('auth.htpasswd.path is required');
    config.auth.htpasswd = { realm: str(h.realm, 'auth.htpasswd.realm', 'berth-registry'), path };
  }
  if (auth.token !== undefined) {
    const t = obj(auth.token, 'auth.token');
    const token: TokenAuthConfig = {
      realm: str(t.realm, 'auth.token.realm', ''),
      service: str(t.service, 'auth.token.service', ''),
      issuer: str(t.issuer, 'auth.token.issuer', ''),
    };
    const bundle = str(t.rootcertbundle, 'auth.token.rootcertbundle');
    const jwks = str(t.jwks, 'auth.token.jwks');
    if (bundle) token.rootcertbundle = bundle;
    if (jwks) token.jwks = jwks;
    if (t.autoredirect !== undefined)
      token.autoredirect = bool(t.autoredirect, 'auth.token.autoredirect', false);
    config.auth.token = token;
  }
  if (berth.tokenserver !== undefined) {
    const t = obj(berth.tokenserver, 'berth.tokenserver');
    const ts: TokenServerConfig = {
      enabled: bool(t.enabled, 'berth.tokenserver.enabled', true),
      path: str(t.path, 'berth.tokenserver.path', '/auth/token'),
      expiration: num(t.expiration, 'berth.tokenserver.expiration', 300),
    };
    for (const k of ['issuer', 'service', 'key', 'certificate', 'htpasswd'] as const) {
      const v = str(t[k], `berth.tokenserver.${k}`);
      if (v !== undefined) ts[k] = v;
    }
    if (t.acl !== undefined) ts.acl = t.acl;
    config.berth.tokenserver = ts;
  }
  if (berth.ratelimit !== undefined) {
    const r = obj(berth.ratelimit, 'berth.ratelimit');
    const by = str(r.by, 'berth.ratelimit.by', 'ip');
    if (by !== 'ip' && by !== 'user') throw new ConfigError('berth.ratelimit.by must be ip or user');
    config.berth.ratelimit = {
      enabled: bool(r.enabled, 'berth.ratelimit.enabled', true),
      requestspersecond: num(r.requestspersecond, 'berth.ratelimit.requestspersecond', 100),
      burst: num(r.burst, 'berth.ratelimit.burst', 200),
      by,
    };
  }
  return config;
}

/** Parse a configuration document (YAML, which includes JSON). */
export function parseConfig(text: string, source = 'configuration'): RegistryConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`${source}: ${(err as Error).message}`);
  }
  try {
    return configFromObject(doc ?? {});
  } catch (err) {
    throw new ConfigError(`${source}: ${(err as Error).message}`);
  }
}

/**
 * Read a configuration file (YAML or JSON) with the environment's REGISTRY_* overrides. The YAML
 * is parsed in a short-lived child process (`parseYamlApart`), so a registry serving from a
 * config.yml does not carry the `yaml` package (about 3 MiB of RSS); `parseConfig` parses here.
 */
export async function loadConfig(
  path: string,
  env?: NodeJS.ProcessEnv,
  parser: YamlParser = parseYamlApart,
): Promise<RegistryConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read configuration ${path}: ${(err as Error).message}`);
  }
  const variables = env ? registryVariables(env) : [];
  let results: YamlResult[];
  try {
    results = parser([text, ...variables.map(([, v]) => v)]);
  } catch (err) {
    throw new ConfigError(`${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = yamlValue(results[0]) ?? {};
  } catch (err) {
    throw new ConfigError(`${path}: ${(err as Error).message}`);
  }
  try {
    if (!env) return configFromObject(doc);
    return configFromObject(applyEnv(obj(doc, 'configuration'), env, cached(variables, results.slice(1))));
  } catch (err) {
    throw new ConfigError(`${path}: ${(err as Error).message}`);
  }
}

/** A parser that answers from results already parsed (the variables' values, in order). */
function cached(variables: Array<[string, string]>, results: YamlResult[]): YamlParser {
  const byText = new Map<string, YamlResult>();
  variables.forEach(([, v], i) => {
    const r = results[i];
    if (r) byText.set(v, r);
  });
  return (texts) => texts.map((t) => byText.get(t) ?? { error: 'not parsed' });
}

/**
 * The reference registry's environment overrides: `REGISTRY_<SECTION>_<KEY>...=value` sets
 * `section.key...` (lowercased), e.g. REGISTRY_STORAGE_DELETE_ENABLED=true,
 * REGISTRY_HTTP_ADDR=:5000. Values are read as YAML scalars (a value YAML refuses stays the
 * string). Returns a new document.
 */
export function applyEnv(
  doc: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
  parser: YamlParser = parseYamlHere,
): Record<string, unknown> {
  const out = structuredClone(doc);
  const variables = registryVariables(env);
  const values = variables.length > 0 ? parser(variables.map(([, v]) => v)) : [];
  variables.forEach(([name, value], i) => {
    const keys = name.slice('REGISTRY_'.length).toLowerCase().split('_').filter(Boolean);
    if (keys.length === 0) return;
    let node: Record<string, unknown> = out;
    for (const key of keys.slice(0, -1)) {
      const next = node[key];
      if (!next || typeof next !== 'object' || Array.isArray(next)) node[key] = {};
      node = node[key] as Record<string, unknown>;
    }
    const r = values[i];
    const parsed = r && 'value' in r ? r.value : value;
    node[keys[keys.length - 1] as string] = parsed ?? value;
  });
  return out;
}

/** The defaults with the environment's REGISTRY_* overrides. */
export function configFromEnv(env: NodeJS.ProcessEnv, parser: YamlParser = parseYamlApart): RegistryConfig {
  return configFromObject(applyEnv({}, env, parser));
}

export function defaultConfig(): RegistryConfig {
  return configFromObject({});
}

/** Split an `http.addr` ("host:port", ":port", "[::1]:port") into host and port. */
export function parseAddr(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  if (i < 0) throw new ConfigError(`invalid address ${JSON.stringify(addr)}: use host:port`);
  const host = addr.slice(0, i).replace(/^\[|\]$/g, '') || '0.0.0.0';
  const portText = addr.slice(i + 1);
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535)
    throw new ConfigError(`invalid port in address ${JSON.stringify(addr)}`);
  return { host, port };
}
