import { type ParsedDigest, tryParseDigest } from '../../common/digest.js';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { isPathNotFound } from '../storage/driver.js';
import { paths, REPOSITORIES } from '../storage/paths.js';
import type { RegistryStore } from '../storage/store.js';

/** What one sweep removed from the cache. */
export interface ExpiryReport {
  /** The upstream could not be reached: nothing was removed (the cache goes on serving). */
  deferred: boolean;
  tags: number;
  manifests: number;
  layers: number;
}

/**
 * The cache's `ttl` as distribution's proxy applies it: what the proxy stored (a tag, a manifest,
 * a repository's link to a blob) is removed from the cache `ttl` after it was stored (the link
 * file's mtime), so the next pull fetches it from the upstream again; the data of blobs no
 * repository links any more goes with garbage collection (`berth.gc`), as the reference leaves
 * it to its collector. One difference: while the upstream cannot be reached, nothing expires,
 * so a mirror whose upstream is down goes on serving what it holds.
 */
export class ProxyExpiry {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<ExpiryReport> | undefined;

  constructor(
    private readonly store: RegistryStore,
    private readonly ttlMs: number,
    /** Whether the upstream answers at all (any HTTP status). */
    private readonly upstreamReachable: () => Promise<boolean>,
    private readonly log: Logger,
    /** How often to sweep: a quarter of the ttl, between 1 s and 1 h. */
    readonly intervalMs = Math.min(3_600_000, Math.max(1_000, Math.floor(ttlMs / 4))),
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.sweep().catch((err: unknown) =>
        this.log.warn('expiring the proxy cache failed', { error: errorMessage(err) }),
      );
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** One sweep now (one at a time). */
  sweep(now = Date.now()): Promise<ExpiryReport> {
    this.running ??= this.sweepOnce(now).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async sweepOnce(now: number): Promise<ExpiryReport> {
    const report: ExpiryReport = { deferred: false, tags: 0, manifests: 0, layers: 0 };
    const before = now - this.ttlMs;
    const repos = await this.repositories();
    if (repos.length === 0) return report;
    if (!(await this.upstreamReachable())) return { ...report, deferred: true };
    for (const name of repos) {
      for (const tag of (await this.store.listTags(name)) ?? []) {
        if (await this.expired(paths.tagCurrentLink(name, tag), before)) {
          if (await this.store.untag(name, tag)) report.tags++;
        }
      }
      for (const d of await this.digestsUnder(paths.revisionsDir(name))) {
        if (await this.expired(paths.revisionLink(name, d), before)) {
          if (await this.store.deleteManifest(name, d)) report.manifests++;
        }
      }
      for (const d of await this.digestsUnder(paths.layersDir(name))) {
        if (await this.expired(paths.layerLink(name, d), before)) {
          if (await this.store.unlinkLayer(name, d)) report.layers++;
        }
      }
    }
    if (report.tags + report.manifests + report.layers > 0)
      this.log.info('proxy cache expired', { ...report });
    return report;
  }

  /** Whether a link file was written before `before` (a missing one is not expired: gone). */
  private async expired(path: string, before: number): Promise<boolean> {
    try {
      return (await this.store.driver.stat(path)).modTime.getTime() < before;
    } catch (err) {
      if (isPathNotFound(err)) return false;
      throw err;
    }
  }

  /** The digests of `<dir>/<alg>/<hex>` entries. */
  private async digestsUnder(dir: string): Promise<ParsedDigest[]> {
    const out: ParsedDigest[] = [];
    for (const algDir of await this.listOrEmpty(dir)) {
      const alg = algDir.slice(algDir.lastIndexOf('/') + 1);
      for (const hexDir of await this.listOrEmpty(algDir)) {
        const d = tryParseDigest(`${alg}:${hexDir.slice(hexDir.lastIndexOf('/') + 1)}`);
        if (d) out.push(d);
      }
    }
    return out;
  }

  private async listOrEmpty(path: string): Promise<string[]> {
    try {
      return await this.store.driver.list(path);
    } catch (err) {
      if (isPathNotFound(err)) return [];
      throw err;
    }
  }

  /** Every repository with manifests or layer links. */
  private async repositories(): Promise<string[]> {
    const repos = new Set<string>();
    const prefix = `${REPOSITORIES}/`;
    try {
      await this.store.driver.walk(REPOSITORIES, (info) => {
        if (!info.isDir) return;
        const base = info.path.slice(info.path.lastIndexOf('/') + 1);
        if (!base.startsWith('_')) return;
        if (base === '_manifests' || base === '_layers')
          repos.add(info.path.slice(prefix.length, info.path.length - base.length - 1));
        return 'skip';
      });
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    return [...repos].sort();
  }
}
