import { type ParsedDigest, tryParseDigest } from '../../common/digest.js';
import { errorMessage } from '../../common/errors.js';
import { type FileInfo, isPathNotFound, type StorageDriver } from '../storage/driver.js';
import { FilesystemDriver } from '../storage/filesystem.driver.js';
import { type LeftoverReport, sweepLeftovers } from '../storage/leftovers.js';
import { BLOBS, paths, REPOSITORIES } from '../storage/paths.js';
import { RegistryStore } from '../storage/store.js';
import type { BlobGuard } from './guard.js';
import { deleteUnlessHeld, HOLDS_DIR, restoreTombstone, SharedHolds } from './holds.js';
import { acquireGcLock } from './lock.js';

/**
 * Mark-and-sweep garbage collection of a registry's storage, safe to run while the registry
 * serves pushes and pulls. See docs/registry-gc.md for the design; in short:
 *
 * 1. `start` is taken, and `cutoff = start - gracePeriod`, lowered further to the start time of
 *    every upload still in progress. Nothing whose data was written after `cutoff` is deleted:
 *    blobs of uploads in flight or completed during the run, manifests pushed during the run.
 * 2. With `deleteUntagged`, manifest revisions not reachable from a tag (through index children
 *    and referrers) and older than `cutoff` are deleted, with their referrers entries.
 * 3. Mark: every blob referenced by every remaining revision of every repository (the manifest
 *    itself, config, layers, index children, schema-1 signatures).
 * 4. Mark again the revisions that appeared since step 3 (pushed while marking).
 * 5. Sweep: blobs neither marked nor young; each is re-checked just before deletion (its age
 *    again, and whether some repository linked it after `cutoff`).
 * 6. Remove `_layers` links (older than `cutoff`) whose blob is gone.
 * 7. Sweep the temporary files of killed writes older than `cutoff` and the tags they left
 *    without a manifest (storage/leftovers.ts).
 */
export interface GcOptions {
  dryRun?: boolean;
  deleteUntagged?: boolean;
  /** Blobs and manifests younger than this (ms) are never deleted. Default one hour. */
  gracePeriodMs?: number;
  /** An upload whose data changed within this window (ms) counts as in flight. Default one hour. */
  uploadActivityMs?: number;
  /** Progress lines (marking, eligible for deletion, ...). */
  log?: (line: string) => void;
  /** Parallel manifest reads. */
  concurrency?: number;
  now?: () => number;
  /** The serving registry's guard (an in-process run): blobs its requests hold are kept. */
  guard?: BlobGuard;
}

export interface GcReport {
  dryRun: boolean;
  startedAt: Date;
  /** When the run ended, before the storage's lock was released. */
  finishedAt: Date;
  cutoff: Date;
  repositories: number;
  manifests: number;
  markedBlobs: number;
  /** Manifest revisions deleted (or, dry run, that would be) by --delete-untagged. */
  deletedManifests: Array<{ repository: string; digest: string }>;
  /** Blobs deleted (or, dry run, eligible). */
  deletedBlobs: string[];
  bytesFreed: number;
  /** Unreferenced blobs kept because they are younger than the cutoff or were linked recently. */
  keptYoung: string[];
  deletedLayerLinks: Array<{ repository: string; digest: string }>;
  /** Temporary files of killed writes older than the cutoff, and the tags they left dead. */
  leftovers: LeftoverReport;
  warnings: string[];
}

interface RepoInfo {
  name: string;
  /** digest → link mtime */
  layers: Map<string, number>;
}

const HOUR = 3600_000;

/**
 * One collection under the storage's lock (gc/lock.ts: a Conflict error when another process
 * collects the same storage).
 */
export async function collectGarbage(driver: StorageDriver, options: GcOptions = {}): Promise<GcReport> {
  const lock = await acquireGcLock(driver);
  options.guard?.beginRun();
  try {
    const gc = new GarbageCollector(driver, options);
    const report = await gc.run();
    report.finishedAt = new Date();
    return report;
  } finally {
    options.guard?.endRun();
    await lock.release();
  }
}

class GarbageCollector {
  private readonly store: RegistryStore;
  private readonly log: (line: string) => void;
  private readonly dryRun: boolean;
  private readonly concurrency: number;
  private readonly marked = new Set<string>();
  /** Revisions marked, by `repo@digest`. */
  private readonly seenRevisions = new Set<string>();
  private readonly deletedRevisions = new Set<string>();
  private cutoff = 0;
  private lastRescan = 0;
  private latestRepos: RepoInfo[] = [];
  private readonly rescanMs = 1000;
  private readonly report: GcReport;
  /** The holds of every registry process on the storage (filesystem storage only). */
  private readonly holds: SharedHolds | undefined;
  private readonly fs: FilesystemDriver | undefined;

  constructor(
    private readonly driver: StorageDriver,
    private readonly options: GcOptions,
  ) {
    // No manifest cache: every read goes to storage, so a run never sees stale content.
    this.store = new RegistryStore(driver, { manifestCacheEntries: 1, manifestCacheBytes: 1 });
    this.log = options.log ?? (() => {});
    this.dryRun = options.dryRun ?? false;
    this.concurrency = Math.max(1, options.concurrency ?? 16);
    this.fs = driver instanceof FilesystemDriver ? driver : undefined;
    this.holds = this.fs ? new SharedHolds(this.fs.fullPath(HOLDS_DIR)) : undefined;
    const now = (options.now ?? Date.now)();
    this.report = {
      dryRun: this.dryRun,
      startedAt: new Date(now),
      finishedAt: new Date(now),
      cutoff: new Date(now),
      repositories: 0,
      manifests: 0,
      markedBlobs: 0,
      deletedManifests: [],
      deletedBlobs: [],
      bytesFreed: 0,
      keptYoung: [],
      deletedLayerLinks: [],
      leftovers: { temporary: [], deadTags: [] },
      warnings: [],
    };
  }

  private warn(message: string): void {
    this.report.warnings.push(message);
    this.log(`warning: ${message}`);
  }

  async run(): Promise<GcReport> {
    const start = this.report.startedAt.getTime();
    this.cutoff = start - (this.options.gracePeriodMs ?? HOUR);
    let repos = await this.repositories();
    await this.lowerCutoffForUploads(repos, start);
    this.report.cutoff = new Date(this.cutoff);
    this.report.repositories = repos.length;

    if (this.options.deleteUntagged) {
      for (const repo of repos) await this.deleteUntagged(repo.name);
    }

    for (const repo of repos) await this.markRepository(repo.name);

    // Revisions pushed while we were marking: mark them too before sweeping anything.
    repos = await this.repositories();
    for (const repo of repos) await this.markRepository(repo.name);
    this.lastRescan = Date.now();
    this.latestRepos = repos;
    this.report.markedBlobs = this.marked.size;

    const gone = await this.sweepBlobs(repos);
    await this.sweepLayerLinks(repos, gone);
    this.report.leftovers = await sweepLeftovers(this.driver, this.store, this.cutoff, this.dryRun);
    for (const path of this.report.leftovers.temporary)
      this.log(
        `temporary file of a killed write ${this.dryRun ? 'eligible for deletion' : 'deleted'}: ${path}`,
      );
    for (const t of this.report.leftovers.deadTags)
      this.log(
        `${t.repository}: tag without a manifest ${this.dryRun ? 'eligible for deletion' : 'deleted'}: ${t.tag}`,
      );
    return this.report;
  }

  // ---- discovery ----

  /** Every repository (with manifests, layer links or uploads), with its layer links. */
  private async repositories(): Promise<RepoInfo[]> {
    const repos = new Map<string, RepoInfo>();
    const prefix = `${REPOSITORIES}/`;
    try {
      await this.driver.walk(REPOSITORIES, async (info) => {
        if (!info.isDir) return;
        const base = info.path.slice(info.path.lastIndexOf('/') + 1);
        if (!base.startsWith('_')) return;
        const name = info.path.slice(prefix.length, info.path.length - base.length - 1);
        if (base === '_manifests' || base === '_layers' || base === '_uploads') {
          let repo = repos.get(name);
          if (!repo) {
            repo = { name, layers: new Map() };
            repos.set(name, repo);
          }
          if (base === '_layers') await this.readLayerLinks(repo);
        }
        return 'skip';
      });
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    return [...repos.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  private async readLayerLinks(repo: RepoInfo): Promise<void> {
    for (const algDir of await this.listOrEmpty(paths.layersDir(repo.name))) {
      const alg = algDir.slice(algDir.lastIndexOf('/') + 1);
      for (const dir of await this.listOrEmpty(algDir)) {
        const d = tryParseDigest(`${alg}:${dir.slice(dir.lastIndexOf('/') + 1)}`);
        if (!d) continue;
        const st = await this.statOrUndefined(paths.layerLink(repo.name, d));
        if (st) repo.layers.set(d.digest, st.modTime.getTime());
      }
    }
  }

  /** Uploads in flight hold the cutoff back to their start: their blobs may appear at any time. */
  private async lowerCutoffForUploads(repos: RepoInfo[], start: number): Promise<void> {
    const activity = this.options.uploadActivityMs ?? HOUR;
    for (const repo of repos) {
      for (const dir of await this.listOrEmpty(paths.uploadsDir(repo.name))) {
        const id = dir.slice(dir.lastIndexOf('/') + 1);
        const data = await this.statOrUndefined(paths.uploadData(repo.name, id));
        // No data file: the upload is being completed (its data is moving into blobs/).
        if (data && start - data.modTime.getTime() > activity) continue;
        let started = data ? data.modTime.getTime() : start - activity;
        try {
          const text = (await this.driver.getContent(paths.uploadStartedAt(repo.name, id)))
            .toString('utf8')
            .trim();
          const t = new Date(text).getTime();
          if (Number.isFinite(t)) started = Math.min(started, t);
        } catch (err) {
          if (!isPathNotFound(err)) throw err;
        }
        if (started < this.cutoff) {
          this.log(
            `${repo.name}: upload ${id} in progress since ${new Date(started).toISOString()}; keeping blobs from then on`,
          );
          this.cutoff = started;
        }
      }
    }
  }

  // ---- untagged manifests ----

  private async deleteUntagged(name: string): Promise<void> {
    const revisions = await this.revisions(name);
    if (revisions.size === 0) return;
    const infos = new Map<string, { manifests: string[]; subject?: string } | undefined>();
    await this.forEachLimited([...revisions.keys()], async (digest) => {
      const info = await this.describe(name, digest);
      infos.set(digest, info ? { manifests: info.manifests, subject: info.subject?.digest } : undefined);
    });
    const referrersOf = new Map<string, string[]>();
    for (const [digest, info] of infos) {
      if (!info?.subject) continue;
      const list = referrersOf.get(info.subject) ?? [];
      list.push(digest);
      referrersOf.set(info.subject, list);
    }
    const reachable = new Set<string>();
    const queue: string[] = [];
    const visit = (digest: string) => {
      if (reachable.has(digest)) return;
      reachable.add(digest);
      queue.push(digest);
    };
    for (const tag of (await this.store.listTags(name)) ?? []) {
      const target = await this.store.resolveTag(name, tag);
      if (target) visit(target.digest);
    }
    // Manifests too young to judge are kept, and so is what they reach.
    for (const [digest, mtime] of revisions) if (mtime >= this.cutoff) visit(digest);
    while (queue.length > 0) {
      const digest = queue.pop()!;
      const info = infos.get(digest);
      for (const child of info?.manifests ?? []) visit(child);
      for (const referrer of referrersOf.get(digest) ?? []) visit(referrer);
    }
    for (const digest of revisions.keys()) {
      if (reachable.has(digest)) continue;
      const d = tryParseDigest(digest);
      if (!d) continue;
      this.log(`${name}: manifest eligible for deletion: ${digest}`);
      this.report.deletedManifests.push({ repository: name, digest });
      this.deletedRevisions.add(`${name}@${digest}`);
      if (this.dryRun) continue;
      // Re-check just before deleting: re-tagged or re-pushed since we looked? Then keep it.
      const st = await this.statOrUndefined(paths.revisionLink(name, d));
      if (
        !st ||
        st.modTime.getTime() >= this.cutoff ||
        (await this.store.tagsPointingTo(name, d)).length > 0
      ) {
        this.report.deletedManifests.pop();
        this.deletedRevisions.delete(`${name}@${digest}`);
        continue;
      }
      // The revision and its referrers entry go; tags are left alone (one created since the
      // check above must not vanish with it), and the blobs are swept below.
      await this.deleteIfPresent(paths.revisionDir(name, d));
      const subject = infos.get(digest)?.subject;
      const sd = subject ? tryParseDigest(subject) : undefined;
      if (sd) await this.deleteIfPresent(paths.referrerLink(name, sd, d).replace(/\/link$/, ''));
      await this.deleteIfPresent(paths.referrersDir(name, d));
    }
  }

  // ---- mark ----

  /** Revision digests of a repository with their link's mtime. */
  private async revisions(name: string): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const algDir of await this.listOrEmpty(paths.revisionsDir(name))) {
      const alg = algDir.slice(algDir.lastIndexOf('/') + 1);
      for (const dir of await this.listOrEmpty(algDir)) {
        const d = tryParseDigest(`${alg}:${dir.slice(dir.lastIndexOf('/') + 1)}`);
        if (!d) continue;
        const st = await this.statOrUndefined(paths.revisionLink(name, d));
        if (st) out.set(d.digest, st.modTime.getTime());
      }
    }
    return out;
  }

  private async describe(name: string, digest: string) {
    const d = tryParseDigest(digest);
    if (!d) return undefined;
    try {
      return await this.store.getManifest(name, d);
    } catch (err) {
      this.warn(`${name}: manifest ${digest} cannot be read (${errorMessage(err)}); keeping its blob only`);
      return undefined;
    }
  }

  private mark(digest: string): boolean {
    if (this.marked.has(digest)) return false;
    this.marked.add(digest);
    return true;
  }

  private async markRepository(name: string): Promise<void> {
    const revisions = await this.revisions(name);
    const todo = [...revisions.keys()].filter((digest) => {
      const key = `${name}@${digest}`;
      if (this.seenRevisions.has(key) || this.deletedRevisions.has(key)) return false;
      this.seenRevisions.add(key);
      return true;
    });
    this.report.manifests += todo.length;
    await this.forEachLimited(todo, (digest) => this.markManifest(name, digest, 0));
  }

  private async markManifest(name: string, digest: string, depth: number): Promise<void> {
    if (depth > 8) return; // indexes of indexes of ...: deep enough
    this.log(`${name}: marking manifest ${digest}`);
    this.mark(digest);
    const d = tryParseDigest(digest);
    if (!d) return;
    const info = await this.describe(name, digest);
    if (!info) return;
    for (const blob of info.blobs) {
      if (this.mark(blob)) this.log(`${name}: marking blob ${blob}`);
    }
    for (const sig of await this.signatureDigests(name, d)) this.mark(sig);
    for (const child of info.manifests) {
      const key = `${name}@${child}`;
      if (this.seenRevisions.has(key)) {
        this.mark(child);
        continue;
      }
      this.seenRevisions.add(key);
      await this.markManifest(name, child, depth + 1);
    }
  }

  /** The blobs holding the signed bytes of a schema-1 manifest (a berth extension of the layout). */
  private async signatureDigests(name: string, d: ParsedDigest): Promise<string[]> {
    const out: string[] = [];
    for (const algDir of await this.listOrEmpty(paths.signaturesDir(name, d))) {
      for (const dir of await this.listOrEmpty(algDir)) {
        const link = await this.store.readLink(`${dir}/link`);
        if (link) out.push(link.digest);
      }
    }
    return out;
  }

  // ---- sweep ----

  private async sweepBlobs(repos: RepoInfo[]): Promise<Set<string>> {
    const gone = new Set<string>();
    const candidates: Array<{ d: ParsedDigest; info: FileInfo }> = [];
    for (const algDir of await this.listOrEmpty(BLOBS)) {
      const alg = algDir.slice(algDir.lastIndexOf('/') + 1);
      for (const prefixDir of await this.listOrEmpty(algDir)) {
        for (const dir of await this.listOrEmpty(prefixDir)) {
          const d = tryParseDigest(`${alg}:${dir.slice(dir.lastIndexOf('/') + 1)}`);
          if (!d) continue;
          if (this.marked.has(d.digest)) continue;
          const info = await this.statOrUndefined(paths.blobData(d));
          if (!info) {
            // A directory without data: nothing to free, unless a collector killed while it
            // decided had moved the data aside (put back; considered next time).
            if (this.fs && !this.dryRun && (await restoreTombstone(this.fs.fullPath(dir))))
              this.report.warnings.push(
                `restored ${d.digest}, moved aside by a collection that did not finish`,
              );
            continue;
          }
          candidates.push({ d, info });
        }
      }
    }
    for (const { d, info } of candidates) {
      if (info.modTime.getTime() >= this.cutoff || this.linkedRecently(repos, d.digest)) {
        this.report.keptYoung.push(d.digest);
        continue;
      }
      if (this.dryRun) {
        this.log(`blob eligible for deletion: ${d.digest}`);
        this.report.deletedBlobs.push(d.digest);
        this.report.bytesFreed += info.size;
        gone.add(d.digest);
        continue;
      }
      // Re-check right before deleting: referenced by a revision pushed since the last mark,
      // rewritten (re-uploaded) or linked by some repository after the cutoff?
      if (this.marked.has(d.digest) || (await this.recentlyTouched(d))) {
        this.report.keptYoung.push(d.digest);
        continue;
      }
      const guard = this.options.guard;
      const { holds, fs } = this;
      // A request of any registry process on the storage relies on it (a manifest PUT, a
      // mount, an upload's completion: gc/holds.ts), or of this one (the guard): kept.
      const remove =
        holds && fs
          ? () => deleteUnlessHeld(holds, d.digest, fs.fullPath(paths.blobDir(d)))
          : async () => {
              await this.deleteIfPresent(paths.blobDir(d));
              return true;
            };
      const deleted = guard ? await guard.tryDelete(d.digest, remove) : await remove();
      if (!deleted) {
        this.report.keptYoung.push(d.digest);
        continue;
      }
      this.log(`deleted blob ${d.digest}`);
      this.report.deletedBlobs.push(d.digest);
      this.report.bytesFreed += info.size;
      gone.add(d.digest);
    }
    return gone;
  }

  private linkedRecently(repos: RepoInfo[], digest: string): boolean {
    return repos.some((r) => (r.layers.get(digest) ?? 0) >= this.cutoff);
  }

  private async recentlyTouched(d: ParsedDigest): Promise<boolean> {
    const st = await this.statOrUndefined(paths.blobData(d));
    if (st && st.modTime.getTime() >= this.cutoff) return true;
    // New links (a completed upload, a mount) and manifests pushed since the last look: rescan
    // the repositories (at most every `rescanMs`, so that many candidates stay cheap).
    if (Date.now() - this.lastRescan >= this.rescanMs) {
      this.lastRescan = Date.now();
      this.latestRepos = await this.repositories();
      for (const repo of this.latestRepos) await this.markRepository(repo.name);
    }
    return this.marked.has(d.digest) || this.linkedRecently(this.latestRepos, d.digest);
  }

  private async sweepLayerLinks(repos: RepoInfo[], gone: Set<string>): Promise<void> {
    for (const repo of repos) {
      for (const [digest, mtime] of repo.layers) {
        if (mtime >= this.cutoff) continue;
        const d = tryParseDigest(digest);
        if (!d) continue;
        const missing =
          gone.has(digest) || (!this.dryRun && !(await this.statOrUndefined(paths.blobData(d))));
        if (!missing) continue;
        this.log(`${repo.name}: layer link eligible for deletion: ${digest}`);
        this.report.deletedLayerLinks.push({ repository: repo.name, digest });
        if (this.dryRun) continue;
        // Re-linked since discovery (a new upload of the same content)? Keep it.
        const st = await this.statOrUndefined(paths.layerLink(repo.name, d));
        if (!st || st.modTime.getTime() >= this.cutoff) {
          this.report.deletedLayerLinks.pop();
          continue;
        }
        await this.deleteIfPresent(paths.layerDir(repo.name, d));
      }
    }
  }

  // ---- helpers ----

  private async listOrEmpty(path: string): Promise<string[]> {
    try {
      return (await this.driver.list(path)).sort();
    } catch (err) {
      if (isPathNotFound(err)) return [];
      throw err;
    }
  }

  private async statOrUndefined(path: string): Promise<FileInfo | undefined> {
    try {
      return await this.driver.stat(path);
    } catch (err) {
      if (isPathNotFound(err)) return undefined;
      throw err;
    }
  }

  private async deleteIfPresent(path: string): Promise<void> {
    try {
      await this.driver.delete(path);
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
  }

  private async forEachLimited<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await fn(item);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, items.length) }, worker));
  }
}
