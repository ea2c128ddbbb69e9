import { createHash, type Hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError, invalidParameter, unauthorized, unavailable } from '../../common/errors.js';
import { Authorizer, repositoryScope, TokenCache } from './auth.js';
import { DEFAULT_CERTS_DIRS } from './certs.js';
import { parseChallenges } from './challenge.js';
import { type Endpoint, EndpointResolver } from './endpoint.js';
import { parseManifest } from './manifest.js';
import { MANIFEST_ACCEPT } from './media-types.js';
import { rawGet } from './raw-get.js';
import { errorFromResponse } from './registry-error.js';
import { type HttpRequest, IDLE_TIMEOUT_MS, NetworkError, readBody, Transport } from './transport.js';
import type { AuthConfig, FetchedManifest } from './types.js';

export interface RegistryClientOptions {
  /** `--insecure-registry` entries (host:port, host or CIDR); loopback is always insecure. */
  insecureRegistries: string[];
  /** `--registry-mirror` URLs, for docker.io names. */
  mirrors: string[];
  /** certs.d directories, looked in for `<host:port>/` (default DEFAULT_CERTS_DIRS). */
  certsDirs?: string[];
  userAgent?: string;
  /** Attempts to resume a blob after its connection dropped (default 5). */
  blobRetries?: number;
}

/** A repository on one endpoint, as `open` returns it. */
export interface RepositoryTarget {
  endpoint: Endpoint;
  /** The repository's path on that endpoint (`library/busybox`, `team/app`). */
  name: string;
}

/** A known endpoint's state: the challenges its /v2/ answered with. */
interface Pinged {
  challenges: ReturnType<typeof parseChallenges>;
  at: number;
}

const PING_TTL_MS = 5 * 60 * 1000;

/**
 * The engine's Registry V2 client: which endpoints a domain has (mirrors, https/http), the
 * version check, authorisation, and sessions on one repository (RepositorySession). Shared by
 * every pull and push of the engine (keep-alive connections, tokens and pings are cached).
 */
export class RegistryClient {
  readonly transport: Transport;
  /** Replaced by `reconfigure` (a reload): read it at each use, never keep it. */
  resolver: EndpointResolver;
  private readonly certsDirs: string[];
  private readonly tokens = new TokenCache();
  private readonly pings = new Map<string, Pinged>();
  readonly blobRetries: number;

  constructor(opts: RegistryClientOptions) {
    this.transport = new Transport(opts.userAgent ?? 'berth');
    this.certsDirs = opts.certsDirs ?? DEFAULT_CERTS_DIRS;
    this.resolver = new EndpointResolver({
      insecureRegistries: opts.insecureRegistries,
      mirrors: opts.mirrors,
      certsDirs: this.certsDirs,
    });
    this.blobRetries = opts.blobRetries ?? 5;
  }

  /**
   * A reload (SIGHUP) changed the insecure registries or the mirrors: later pulls and pushes use
   * the new ones (those under way finish with what they started with); the version checks are
   * made again, since an endpoint's scheme may have changed.
   */
  reconfigure(opts: Pick<RegistryClientOptions, 'insecureRegistries' | 'mirrors'>): void {
    this.resolver = new EndpointResolver({
      insecureRegistries: opts.insecureRegistries,
      mirrors: opts.mirrors,
      certsDirs: this.certsDirs,
    });
    this.pings.clear();
  }

  /** The endpoints of `domain` in order (mirrors for docker.io). `familiar` names it in errors. */
  endpoints(domain: string, familiar: string): Promise<Endpoint[]> {
    return this.resolver.endpoints(domain, familiar);
  }

  /**
   * The version check: GET `/v2/` of the endpoint (cached a few minutes). Answers the challenges
   * of a 401; a NetworkError when nothing answered; a registry error for other statuses.
   */
  async ping(ep: Endpoint, signal?: AbortSignal, fresh = false): Promise<Pinged> {
    const known = this.pings.get(ep.base);
    if (known && !fresh && Date.now() - known.at < PING_TTL_MS) return known;
    const res = await this.transport.send(ep, { method: 'GET', url: `${ep.base}/v2/`, signal });
    const status = res.statusCode ?? 0;
    if (status === 200 || status === 401) {
      res.resume();
      const pinged = { challenges: parseChallenges(res.headers['www-authenticate']), at: Date.now() };
      this.pings.set(ep.base, pinged);
      return pinged;
    }
    const err = await errorFromResponse(res);
    throw unavailable(`${ep.base}/v2/ answered ${status}: ${err.message}`);
  }

  /**
   * Open `name` (the repository path) on the first endpoint of `endpoints` whose /v2/ answers
   * (a connection or TLS failure moves on to the next one), with these credentials and the
   * actions requests will need (`pull`, `pull,push`). When no endpoint answers, the last
   * one's NetworkError is thrown.
   */
  async open(
    endpoints: Endpoint[],
    name: string,
    creds: AuthConfig,
    actions: string[],
    signal?: AbortSignal,
  ): Promise<RepositorySession> {
    let lastErr: unknown;
    for (const ep of endpoints) {
      try {
        const pinged = await this.ping(ep, signal);
        const auth = new Authorizer(this.transport, ep, creds, pinged.challenges, this.tokens);
        return new RepositorySession(this, { endpoint: ep, name }, auth, actions);
      } catch (err) {
        if (signal?.aborted) throw err;
        lastErr = err;
        if (!(err instanceof NetworkError) && !ep.mirror) throw err;
      }
    }
    // the last endpoint's failure, as dockerd reports it (a NetworkError: nothing answered)
    throw lastErr ?? unavailable('no endpoint to reach the registry');
  }

  close(): void {
    this.transport.close();
  }
}

/** Options of a blob read. */
export interface BlobReadOptions {
  signal?: AbortSignal;
  /** Bytes received so far (of the whole blob), after each chunk. */
  onBytes?: (received: number) => void;
  /** Called when a dropped connection is resumed with Range (attempt number, offset). */
  onResume?: (attempt: number, offset: number) => void;
}

/** Where `blobTo` puts a blob's bytes (a layer's unpacker). */
export interface BlobSink {
  /**
   * Take a chunk; its bytes are only valid during the call (copy them). False: call `room`
   * before the next chunk.
   */
  write(chunk: Uint8Array): boolean;
  /**
   * Resolves once the sink takes more. Rejects when the sink gave up: the blob is then read to
   * its end for its digest only, and that rejection is what `blobTo` throws (unless the digest
   * is wrong, which it reports first).
   */
  room(): Promise<void>;
}

/** Where a blob read starts: past bytes already had (and hashed into `hash`). */
interface BlobResume {
  received: number;
  hash: Hash;
}

/** Requests on one repository of one endpoint, authorised, answers checked. */
export class RepositorySession {
  constructor(
    readonly client: RegistryClient,
    readonly target: RepositoryTarget,
    readonly auth: Authorizer,
    readonly actions: string[],
  ) {}

  get endpoint(): Endpoint {
    return this.target.endpoint;
  }

  get name(): string {
    return this.target.name;
  }

  /** `<base>/v2/<name><suffix>` */
  url(suffix: string): string {
    return `${this.endpoint.base}/v2/${this.name}${suffix}`;
  }

  /**
   * An authorised request (scope: this repository with the session's actions, plus `extraScopes`);
   * on a 401 the challenge it carries is taken and the request sent once more.
   */
  async request(req: HttpRequest & { extraScopes?: string[] }): Promise<IncomingMessage> {
    const scopes = [repositoryScope(this.name, this.actions), ...(req.extraScopes ?? [])];
    // failures are named after the request, as Go's url.Error prints them: `Get "<url>": ...`
    const where = `${req.method.charAt(0)}${req.method.slice(1).toLowerCase()} "${req.url}"`;
    for (let attempt = 0; ; attempt++) {
      const headers = { ...(req.headers ?? {}) };
      let authz: string | undefined;
      try {
        authz = await this.auth.header(scopes, req.signal);
      } catch (err) {
        if (err instanceof BerthError) throw new BerthError(err.kind, `${where}: ${err.message}`, err.detail);
        throw err;
      }
      if (authz) headers.Authorization = authz;
      const res = await this.client.transport.send(this.endpoint, { ...req, headers });
      if (res.statusCode === 401 && attempt === 0) {
        const challenges = parseChallenges(res.headers['www-authenticate']);
        if (challenges.length && (!this.auth.hasChallenge || !authz)) {
          res.resume();
          this.auth.update(challenges);
          continue;
        }
      }
      if (res.statusCode === 401 && this.auth.basicWithoutCredentials) {
        res.resume();
        throw unauthorized(`${where}: no basic auth credentials`);
      }
      return res;
    }
  }

  /** GET a manifest by tag or digest, negotiated (every type berth reads), verified by digest. */
  async manifest(reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    const res = await this.request({
      method: 'GET',
      url: this.url(`/manifests/${reference}`),
      headers: { Accept: MANIFEST_ACCEPT.join(', ') },
      signal,
    });
    if (res.statusCode !== 200) throw await errorFromResponse(res);
    const bytes = await readBody(res, 4 * 1024 * 1024);
    const expected = reference.includes(':') ? reference : undefined;
    return parseManifest(bytes, res.headers['content-type'], expected);
  }

  /** The repository's tags (`GET /v2/<name>/tags/list`, every page). */
  async tags(signal?: AbortSignal): Promise<string[]> {
    const out: string[] = [];
    let next: string | undefined = this.url('/tags/list');
    for (let page = 0; next && page < 1000; page++) {
      const res = await this.request({ method: 'GET', url: next, signal });
      if (res.statusCode !== 200) throw await errorFromResponse(res);
      const body = JSON.parse((await readBody(res)).toString('utf8')) as { tags?: unknown };
      if (Array.isArray(body.tags)) out.push(...body.tags.filter((t): t is string => typeof t === 'string'));
      const link = /<([^>]+)>;\s*rel="?next"?/.exec(String(res.headers.link ?? ''));
      next = link ? new URL(link[1] as string, this.endpoint.base).href : undefined;
    }
    return out;
  }

  /** A small blob (a config) read whole and verified. */
  async blobBytes(digest: string, signal?: AbortSignal, limit = 64 * 1024 * 1024): Promise<Buffer> {
    const res = await this.request({ method: 'GET', url: this.url(`/blobs/${digest}`), signal });
    if (res.statusCode !== 200) throw await errorFromResponse(res);
    const bytes = await readBody(res, limit);
    const got = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    if (digest.startsWith('sha256:') && got !== digest)
      throw invalidParameter(`blob verification failed for digest ${digest}`);
    return bytes;
  }

  /**
   * Stream a blob: redirects followed, the digest checked as bytes pass (a mismatch throws at
   * the end, before the iteration completes), a dropped connection resumed with `Range: bytes=<received>-` up to the client's retry bound. The
   * iterator throws `filesystem layer verification failed for digest ...` on a mismatch, so a
   * consumer that commits only when the iteration completes never keeps bad bytes.
   */
  async *blob(
    digest: string,
    size: number | undefined,
    o: BlobReadOptions = {},
    from?: BlobResume,
  ): AsyncGenerator<Buffer> {
    if (!/^sha256:[a-f0-9]{64}$/.test(digest)) throw invalidParameter(`unsupported digest ${digest}`);
    const hash = from?.hash ?? createHash('sha256');
    let received = from?.received ?? 0;
    let attempt = 0;
    for (;;) {
      const headers: Record<string, string> = {};
      if (received > 0) headers.Range = `bytes=${received}-`;
      let res: IncomingMessage;
      try {
        res = await this.request({
          method: 'GET',
          url: this.url(`/blobs/${digest}`),
          headers,
          signal: o.signal,
        });
      } catch (err) {
        if (o.signal?.aborted || !(err instanceof NetworkError) || attempt >= this.client.blobRetries)
          throw err;
        attempt++;
        o.onResume?.(attempt, received);
        await sleep(Math.min(2000, 100 * 2 ** attempt), undefined, { signal: o.signal });
        continue;
      }
      const status = res.statusCode ?? 0;
      if (status !== 200 && status !== 206) throw await errorFromResponse(res);
      // a server ignoring Range answers the whole blob: skip what was had already
      let skip = received > 0 && status === 200 ? received : 0;
      let dropped: unknown;
      try {
        for await (const c of res) {
          let chunk = c as Buffer;
          if (skip > 0) {
            if (chunk.length <= skip) {
              skip -= chunk.length;
              continue;
            }
            chunk = chunk.subarray(skip);
            skip = 0;
          }
          hash.update(chunk);
          received += chunk.length;
          o.onBytes?.(received);
          yield chunk;
        }
      } catch (err) {
        if (o.signal?.aborted) throw err;
        dropped = err;
      } finally {
        if (!res.complete) res.destroy();
      }
      const short = size !== undefined && size >= 0 && received < size;
      if (dropped !== undefined || short) {
        if (attempt >= this.client.blobRetries) {
          throw unavailable(
            `downloading ${digest}: connection dropped after ${received} bytes${dropped ? `: ${(dropped as Error).message}` : ''}`,
          );
        }
        attempt++;
        o.onResume?.(attempt, received);
        await sleep(Math.min(2000, 100 * 2 ** attempt), undefined, { signal: o.signal });
        continue;
      }
      break;
    }
    const got = `sha256:${hash.digest('hex')}`;
    if (got !== digest || (size !== undefined && size >= 0 && received !== size)) {
      throw new BerthError('InvalidParameter', `filesystem layer verification failed for digest ${digest}`);
    }
  }

  /**
   * A blob pushed into `sink` instead of iterated, as `blob` checks it (digest, size, Range
   * resume). From a plain-HTTP endpoint the body is read off the socket into one reused buffer
   * (raw-get.ts: no allocation and no stream per chunk, what a large layer costs the event loop
   * most); an answer that reader does not take (a redirect, a 401, chunked, https) goes
   * through `blob`, from where the raw read got to.
   */
  async blobTo(
    digest: string,
    size: number | undefined,
    sink: BlobSink,
    o: BlobReadOptions = {},
  ): Promise<void> {
    if (!/^sha256:[a-f0-9]{64}$/.test(digest)) throw invalidParameter(`unsupported digest ${digest}`);
    const hash = createHash('sha256');
    let received = 0;
    let sinkError: unknown;
    let gaveUp = false;
    const take = (chunk: Uint8Array): boolean => {
      hash.update(chunk);
      received += chunk.length;
      o.onBytes?.(received);
      return gaveUp || sink.write(chunk);
    };
    const room = async (): Promise<void> => {
      if (gaveUp) return;
      try {
        await sink.room();
      } catch (err) {
        gaveUp = true;
        sinkError = err;
      }
    };
    const url = new URL(this.url(`/blobs/${digest}`));
    const raw = url.protocol === 'http:';
    let attempt = 0;
    while (raw) {
      const headers: Record<string, string> = { 'User-Agent': this.client.transport.userAgent };
      if (received > 0) headers.Range = `bytes=${received}-`;
      let outcome: Awaited<ReturnType<typeof rawGet>>;
      try {
        const authz = await this.auth.header([repositoryScope(this.name, this.actions)], o.signal);
        if (authz) headers.Authorization = authz;
        outcome = await rawGet({
          url,
          headers,
          status: received > 0 ? 206 : 200,
          onChunk: take,
          room,
          signal: o.signal,
          idleTimeoutMs: IDLE_TIMEOUT_MS,
        });
      } catch (err) {
        if (o.signal?.aborted) throw err;
        outcome = { kind: 'unsuitable' };
      }
      if (outcome.kind === 'unsuitable') break;
      if (outcome.kind === 'complete') {
        const got = `sha256:${hash.digest('hex')}`;
        if (got !== digest || (size !== undefined && size >= 0 && received !== size))
          throw new BerthError(
            'InvalidParameter',
            `filesystem layer verification failed for digest ${digest}`,
          );
        if (sinkError !== undefined) throw sinkError;
        return;
      }
      if (attempt >= this.client.blobRetries)
        throw unavailable(
          `downloading ${digest}: connection dropped after ${received} bytes: ${outcome.error.message}`,
        );
      attempt++;
      o.onResume?.(attempt, received);
      await sleep(Math.min(2000, 100 * 2 ** attempt), undefined, { signal: o.signal });
    }
    // the ordinary client, from where the raw read got to; it checks the digest at the end
    for await (const chunk of this.blob(digest, size, o, { received, hash })) {
      if (!gaveUp && !sink.write(chunk)) await room();
    }
    if (sinkError !== undefined) throw sinkError;
  }
}
