import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { type ParsedDigest, tryParseDigest } from '../../common/digest.js';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { ManifestInfo } from '../manifests/types.js';
import { parseManifest } from '../manifests/validate.js';
import { FilesystemDriver } from '../storage/filesystem.driver.js';
import type { RegistryStore } from '../storage/store.js';
import { BlobFetch } from './blob-fetch.js';
import { ProxyExpiry } from './expiry.js';
import { ACCEPT_MANIFESTS, type ProxyConfig, Upstream, UpstreamUnavailable } from './upstream.js';

/** What the proxy answers for a blob: served from the store, on its way from the upstream, or unknown. */
export type ProxiedBlob = { kind: 'local' } | { kind: 'fetching'; fetch: BlobFetch } | undefined;

/**
 * The pull-through cache (`proxy`): manifests and blobs not in the store are fetched from the
 * upstream, verified against their digest and stored (blobs streamed to the clients while they
 * are written, one upstream fetch however many clients ask); tags are asked of the upstream again
 * once `ttl` has passed since they were; an unreachable upstream leaves what is cached served.
 */
export class PullThroughProxy {
  readonly upstream: Upstream;
  /** The ttl's removal of what was cached (started by the server). */
  readonly expiry: ProxyExpiry;
  private readonly tagChecked = new Map<string, number>();
  private readonly tagChecks = new Map<string, Promise<ParsedDigest | undefined>>();
  private readonly manifestFetches = new Map<string, Promise<ManifestInfo | undefined>>();
  private readonly blobFetches = new Map<string, BlobFetch>();
  private readonly blobStarts = new Map<string, Promise<BlobFetch | undefined>>();
  /** Requests the upstream answered with a blob body (tests and logs). */
  blobDownloads = 0;

  constructor(
    readonly config: ProxyConfig,
    private readonly store: RegistryStore,
    private readonly log: Logger,
  ) {
    this.upstream = new Upstream(config);
    this.expiry = new ProxyExpiry(store, config.ttlMs, () => this.upstream.reachable(), log);
    if (!(store.driver instanceof FilesystemDriver)) throw new Error('the proxy needs the filesystem driver');
  }

  private get driver(): FilesystemDriver {
    return this.store.driver as FilesystemDriver;
  }

  /** The manifest a tag names: the stored one while fresh, else the upstream's (stored), else the stored one. */
  async resolveTag(name: string, tag: string): Promise<ParsedDigest | undefined> {
    const key = `${name}:${tag}`;
    const local = await this.store.tagTarget(name, tag);
    const checked = this.tagChecked.get(key);
    if (local && checked !== undefined && Date.now() - checked < this.config.ttlMs) return local;
    let check = this.tagChecks.get(key);
    if (!check) {
      check = this.checkTag(name, tag, local).finally(() => this.tagChecks.delete(key));
      this.tagChecks.set(key, check);
    }
    return check;
  }

  private async checkTag(
    name: string,
    tag: string,
    local: ParsedDigest | undefined,
  ): Promise<ParsedDigest | undefined> {
    try {
      const res = await this.upstream.request('HEAD', name, `manifests/${tag}`, ACCEPT_MANIFESTS);
      if (res.status === 404) {
        this.tagChecked.delete(`${name}:${tag}`);
        return local;
      }
      if (!res.ok) throw new UpstreamUnavailable(`upstream answered ${res.status} for ${name}:${tag}`);
      const remote = tryParseDigest(res.headers.get('docker-content-digest') ?? '');
      if (!remote) throw new UpstreamUnavailable(`upstream gave no digest for ${name}:${tag}`);
      if (remote.digest !== local?.digest) {
        const info = await this.manifest(name, remote);
        if (!info) return local;
        await this.store.tag(name, tag, remote);
      }
      this.rememberTag(`${name}:${tag}`);
      return remote;
    } catch (err) {
      if (!(err instanceof UpstreamUnavailable)) throw err;
      this.log.warn('upstream unavailable: serving the cached tag', { name, tag, error: err.message });
      return local;
    }
  }

  private rememberTag(key: string): void {
    if (this.tagChecked.size >= 100_000) this.tagChecked.clear();
    this.tagChecked.set(key, Date.now());
  }

  /** A manifest by digest: stored, else fetched from the upstream, verified and stored. */
  async manifest(name: string, d: ParsedDigest): Promise<ManifestInfo | undefined> {
    const stored = await this.store.getManifest(name, d);
    if (stored) return stored;
    const key = `${name}@${d.digest}`;
    let fetching = this.manifestFetches.get(key);
    if (!fetching) {
      fetching = this.fetchManifest(name, d).finally(() => this.manifestFetches.delete(key));
      this.manifestFetches.set(key, fetching);
    }
    return fetching;
  }

  private async fetchManifest(name: string, d: ParsedDigest): Promise<ManifestInfo | undefined> {
    let res: Response;
    try {
      res = await this.upstream.request('GET', name, `manifests/${d.digest}`, ACCEPT_MANIFESTS);
    } catch (err) {
      if (err instanceof UpstreamUnavailable) return undefined;
      throw err;
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      return undefined;
    }
    const body = Buffer.from(await res.arrayBuffer());
    const info = parseManifest(res.headers.get('content-type') ?? undefined, body);
    if (info.schema1) {
      this.log.warn('schema 1 manifests are not cached by the proxy', { name, digest: d.digest });
      return undefined;
    }
    if (info.digest !== d.digest) {
      this.log.warn('upstream manifest does not match its digest', {
        name,
        digest: d.digest,
        actual: info.digest,
      });
      return undefined;
    }
    await this.store.putManifest(name, info, body);
    return (await this.store.getManifest(name, d)) ?? info;
  }

  /** A blob of the repository: stored (linked now if another repository had it), fetching, or unknown. */
  async blob(name: string, d: ParsedDigest): Promise<ProxiedBlob> {
    if (await this.store.repoBlobStat(name, d)) return { kind: 'local' };
    const running = await this.runningFetch(name, d);
    if (running) return running;
    if (await this.store.blobStat(d)) {
      // Content-addressed: data another repository pulled is the same blob, linked here once
      // the upstream confirms this repository has it.
      const size = await this.remoteBlobSize(name, d);
      if (size === undefined) return undefined;
      await this.store.linkLayer(name, d);
      return { kind: 'local' };
    }
    // One upstream request per digest, however many clients ask at once: looked for again after
    // the stat (a fetch that was starting at the first look may have started meanwhile; one that
    // finished has its data in place, which the stat saw).
    const started = this.blobFetches.get(d.digest);
    let starting = started ? Promise.resolve(started) : this.blobStarts.get(d.digest);
    if (!starting) {
      starting = this.startBlob(name, d).finally(() => this.blobStarts.delete(d.digest));
      this.blobStarts.set(d.digest, starting);
    }
    const fetch = await starting;
    if (!fetch) return undefined;
    this.linkWhenStored(fetch, name, d);
    return { kind: 'fetching', fetch };
  }

  /** The fetch of this blob going on (or starting), if any, linked into `name` once stored. */
  private async runningFetch(name: string, d: ParsedDigest): Promise<ProxiedBlob> {
    const fetch = this.blobFetches.get(d.digest) ?? (await this.blobStarts.get(d.digest));
    if (!fetch) return undefined;
    this.linkWhenStored(fetch, name, d);
    return { kind: 'fetching', fetch };
  }

  private async startBlob(name: string, d: ParsedDigest): Promise<BlobFetch | undefined> {
    let res: Response;
    try {
      res = await this.upstream.request('GET', name, `blobs/${d.digest}`);
    } catch (err) {
      if (err instanceof UpstreamUnavailable) return undefined;
      throw err;
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel().catch(() => undefined);
      return undefined;
    }
    this.blobDownloads++;
    const lengthHeader = res.headers.get('content-length');
    const size = lengthHeader !== null && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
    const body = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>);
    const fetch = new BlobFetch(d, size, this.driver, body, () => this.store.linkLayer(name, d));
    this.blobFetches.set(d.digest, fetch);
    void fetch.finished.then((ok) => {
      this.blobFetches.delete(d.digest);
      if (!ok)
        this.log.warn('fetching a blob from the upstream failed', {
          name,
          digest: d.digest,
          error: errorMessage(fetch.error),
        });
    });
    return fetch;
  }

  /** Link a blob another repository's request is fetching into this repository too, once stored. */
  private linkWhenStored(fetch: BlobFetch, name: string, d: ParsedDigest): void {
    void fetch.finished
      .then(async (ok) => {
        if (ok) await this.store.linkLayer(name, d);
      })
      .catch((err: unknown) =>
        this.log.warn('linking a fetched blob failed', { name, error: errorMessage(err) }),
      );
  }

  /**
   * The upstream's tag list of a repository (`query` passed on: n, last), as its JSON text and
   * `Link` header, or undefined when the upstream cannot answer (the cached tags are listed then).
   */
  async tags(name: string, query: URLSearchParams): Promise<{ body: string; link?: string } | undefined> {
    const q = query.toString();
    try {
      const res = await this.upstream.request('GET', name, `tags/list${q ? `?${q}` : ''}`);
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => undefined);
        return undefined;
      }
      const body = await res.text();
      const doc = JSON.parse(body) as { tags?: unknown };
      if (doc.tags !== null && doc.tags !== undefined && !Array.isArray(doc.tags)) return undefined;
      return { body, link: res.headers.get('link') ?? undefined };
    } catch (err) {
      if (err instanceof UpstreamUnavailable || err instanceof SyntaxError) return undefined;
      throw err;
    }
  }

  /** The size of a blob the store lacks, as the upstream tells it (HEAD), or undefined. */
  async remoteBlobSize(name: string, d: ParsedDigest): Promise<number | undefined> {
    try {
      const res = await this.upstream.request('HEAD', name, `blobs/${d.digest}`);
      await res.body?.cancel().catch(() => undefined);
      const len = res.headers.get('content-length');
      return res.ok && len !== null && /^\d+$/.test(len) ? Number(len) : undefined;
    } catch (err) {
      if (err instanceof UpstreamUnavailable) return undefined;
      throw err;
    }
  }
}
