import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import type { Readable } from 'node:stream';
import { type ParsedDigest, sha256Digest, tryParseDigest } from '../../common/digest.js';
import { Lru } from '../lru.js';
import { signSchema1 } from '../manifests/schema1.js';
import type { ManifestInfo } from '../manifests/types.js';
import { describeStored } from '../manifests/validate.js';
import { type FileInfo, isPathNotFound, type StorageDriver } from './driver.js';
import { paths, REPOSITORIES } from './paths.js';

export interface StoreOptions {
  /** Manifests kept in memory by digest (content-addressed, so never stale). */
  manifestCacheEntries?: number;
  manifestCacheBytes?: number;
}

async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isPathNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * The registry's view of storage: blobs by digest, per-repository links, manifests, tags and
 * referrers, all through a StorageDriver in the reference registry's layout.
 */
export class RegistryStore {
  private readonly manifestCache: Lru<string, ManifestInfo>;
  /** Link files by path, revalidated with one stat (a rewritten link is a new inode). */
  private readonly linkCache = new Lru<string, { version: string; target: ParsedDigest | undefined }>(50_000);

  constructor(
    readonly driver: StorageDriver,
    options: StoreOptions = {},
  ) {
    this.manifestCache = new Lru(
      options.manifestCacheEntries ?? 10_000,
      options.manifestCacheBytes ?? 64 * 1024 * 1024,
    );
  }

  // ---- links ----

  /** Read a link file; undefined when absent or not a valid digest. */
  async readLink(path: string): Promise<ParsedDigest | undefined> {
    const st = await orUndefined(this.driver.stat(path));
    if (!st || st.isDir) {
      this.linkCache.delete(path);
      return undefined;
    }
    const cached = st.version === undefined ? undefined : this.linkCache.get(path);
    if (cached && cached.version === st.version) return cached.target;
    const content = await orUndefined(this.driver.getContent(path));
    if (!content) return undefined;
    const target = tryParseDigest(content.toString('utf8').trim());
    // Cache only what the stat describes (a concurrent rewrite changes the version).
    if (st.version !== undefined && content.length === st.size)
      this.linkCache.set(path, { version: st.version, target });
    return target;
  }

  private async writeLink(path: string, d: ParsedDigest): Promise<void> {
    await this.driver.putContent(path, d.digest);
  }

  private async hasLink(path: string, d: ParsedDigest): Promise<boolean> {
    const target = await this.readLink(path);
    return target?.digest === d.digest;
  }

  // ---- blobs ----

  async blobStat(d: ParsedDigest): Promise<FileInfo | undefined> {
    return orUndefined(this.driver.stat(paths.blobData(d)));
  }

  async blobReader(d: ParsedDigest, start?: number, end?: number): Promise<Readable | undefined> {
    return orUndefined(this.driver.reader(paths.blobData(d), start, end));
  }

  /** Store small content (manifests) as a blob, unless it is already there. */
  async putBlobContent(d: ParsedDigest, content: Buffer): Promise<void> {
    const st = await this.blobStat(d);
    if (st && st.size === content.length) return;
    await this.driver.putContent(paths.blobData(d), content);
  }

  /** Is the blob linked in the repository (as a layer, or as a manifest revision)? */
  async repoHasBlob(name: string, d: ParsedDigest): Promise<boolean> {
    if (await this.hasLink(paths.layerLink(name, d), d)) return true;
    return this.hasLink(paths.revisionLink(name, d), d);
  }

  /** The blob's file info when it is linked in the repository and its data exists. */
  async repoBlobStat(name: string, d: ParsedDigest): Promise<FileInfo | undefined> {
    const [linked, st] = await Promise.all([this.repoHasBlob(name, d), this.blobStat(d)]);
    return linked ? st : undefined;
  }

  async linkLayer(name: string, d: ParsedDigest): Promise<void> {
    if (await this.hasLink(paths.layerLink(name, d), d)) return;
    await this.writeLink(paths.layerLink(name, d), d);
  }

  /** Remove a blob from a repository (the data stays until garbage collection). */
  async unlinkLayer(name: string, d: ParsedDigest): Promise<boolean> {
    if (!(await this.hasLink(paths.layerLink(name, d), d))) return false;
    await this.driver.delete(paths.layerDir(name, d));
    return true;
  }

  // ---- manifests ----

  private cacheKey(name: string, digest: string, info?: ManifestInfo): string {
    return info?.schema1 ? `${name}@${digest}` : digest;
  }

  /** A manifest revision of the repository, or undefined. */
  async getManifest(name: string, d: ParsedDigest): Promise<ManifestInfo | undefined> {
    const linked = await this.hasLink(paths.revisionLink(name, d), d);
    if (!linked) return undefined;
    const cached = this.manifestCache.get(d.digest) ?? this.manifestCache.get(`${name}@${d.digest}`);
    if (cached) return cached;
    const content = await orUndefined(this.driver.getContent(paths.blobData(d)));
    if (!content) return undefined;
    let info = describeStored(content, d.digest);
    if (info.schema1) {
      // The signed bytes berth kept; otherwise (a payload stored by the reference registry, which
      // keeps no signatures) sign with the registry's own key, as the reference does on read.
      const signed = (await this.signedSchema1(name, d)) ?? trySign(content);
      if (signed) info = describeStored(signed, d.digest);
    }
    this.manifestCache.set(this.cacheKey(name, d.digest, info), info, info.content.length + 512);
    return info;
  }

  private async signedSchema1(name: string, d: ParsedDigest): Promise<Buffer | undefined> {
    const links = await orUndefined(this.driver.list(paths.signaturesDir(name, d)));
    for (const algDir of links ?? []) {
      for (const sigDir of (await orUndefined(this.driver.list(algDir))) ?? []) {
        const sig = await this.readLink(`${sigDir}/link`);
        if (!sig) continue;
        const content = await orUndefined(this.driver.getContent(paths.blobData(sig)));
        if (content) return content;
      }
    }
    return undefined;
  }

  /** Store a validated manifest as a revision of the repository (and its referrers entry). */
  async putManifest(name: string, info: ManifestInfo, canonical: Buffer): Promise<void> {
    const d = tryParseDigest(info.digest);
    if (!d) throw new Error(`invalid manifest digest ${info.digest}`);
    await this.putBlobContent(d, canonical);
    if (info.schema1 && !canonical.equals(info.content)) {
      const sd = tryParseDigest(sha256Digest(info.content));
      if (sd) {
        await this.putBlobContent(sd, info.content);
        await this.writeLink(paths.signatureLink(name, d, sd), sd);
      }
    }
    if (info.subject) {
      const subject = tryParseDigest(info.subject.digest);
      if (subject) await this.writeLink(paths.referrerLink(name, subject, d), d);
    }
    if (!(await this.hasLink(paths.revisionLink(name, d), d)))
      await this.writeLink(paths.revisionLink(name, d), d);
    this.manifestCache.delete(`${name}@${d.digest}`);
  }

  /** Delete a manifest revision, the tags pointing at it, and its referrers entry. */
  async deleteManifest(name: string, d: ParsedDigest): Promise<boolean> {
    const info = await this.getManifest(name, d);
    if (!info) return false;
    await this.driver.delete(paths.revisionDir(name, d));
    for (const tag of await this.tagsPointingTo(name, d)) await this.untag(name, tag);
    if (info.subject) {
      const subject = tryParseDigest(info.subject.digest);
      if (subject)
        await orUndefined(this.driver.delete(paths.referrerLink(name, subject, d).replace(/\/link$/, '')));
    }
    this.manifestCache.delete(`${name}@${d.digest}`);
    return true;
  }

  // ---- tags ----

  async resolveTag(name: string, tag: string): Promise<ParsedDigest | undefined> {
    return this.readLink(paths.tagCurrentLink(name, tag));
  }

  /**
   * The manifest a tag names, when the tag resolves: its current link, the revision link and the
   * manifest's data are all there (a write killed half-way leaves a tag that does not).
   */
  async tagTarget(name: string, tag: string): Promise<ParsedDigest | undefined> {
    const d = await this.resolveTag(name, tag);
    if (!d) return undefined;
    const [linked, data] = await Promise.all([
      this.hasLink(paths.revisionLink(name, d), d),
      this.blobStat(d),
    ]);
    return linked && data ? d : undefined;
  }

  async tag(name: string, tag: string, d: ParsedDigest): Promise<void> {
    await this.writeLink(paths.tagIndexLink(name, tag, d), d);
    await this.writeLink(paths.tagCurrentLink(name, tag), d);
  }

  async untag(name: string, tag: string): Promise<boolean> {
    return (await orUndefined(this.driver.delete(paths.tagDir(name, tag)).then(() => true))) ?? false;
  }

  /**
   * Tag directories of a repository, sorted, whether they resolve or not (see `tagTarget`);
   * undefined when the repository has no tags directory.
   */
  async listTags(name: string): Promise<string[] | undefined> {
    const entries = await orUndefined(this.driver.list(paths.tagsDir(name)));
    if (!entries) return undefined;
    const tags = entries.map((p) => p.slice(p.lastIndexOf('/') + 1));
    return tags.sort(compareStrings);
  }

  async tagsPointingTo(name: string, d: ParsedDigest): Promise<string[]> {
    const tags = (await this.listTags(name)) ?? [];
    const out: string[] = [];
    await Promise.all(
      tags.map(async (tag) => {
        const target = await this.resolveTag(name, tag);
        if (target?.digest === d.digest) out.push(tag);
      }),
    );
    return out.sort(compareStrings);
  }

  // ---- referrers ----

  /** Manifests of the repository whose subject is the digest. */
  async referrers(name: string, subject: ParsedDigest): Promise<ManifestInfo[]> {
    const dir = paths.referrersDir(name, subject);
    const algDirs = (await orUndefined(this.driver.list(dir))) ?? [];
    const out: ManifestInfo[] = [];
    for (const algDir of algDirs) {
      const entries = (await orUndefined(this.driver.list(algDir))) ?? [];
      const infos = await Promise.all(
        entries.map(async (entry) => {
          const d = await this.readLink(`${entry}/link`);
          return d ? this.getManifest(name, d) : undefined;
        }),
      );
      for (const info of infos) if (info && info.subject?.digest === subject.digest) out.push(info);
    }
    return out.sort((a, b) => compareStrings(a.digest, b.digest));
  }

  // ---- repositories ----

  /**
   * A repository other than `except` that holds the blob (linked as a layer or a manifest) and
   * that `accept` allows, in lexical order; undefined when none does. What a mount without
   * `from` searches (automatic content discovery).
   */
  async repositoryWithBlob(
    d: ParsedDigest,
    accept: (name: string) => boolean,
    except?: string,
  ): Promise<string | undefined> {
    if (!(await this.blobStat(d))) return undefined;
    const candidates: string[] = [];
    const prefix = `${REPOSITORIES}/`;
    try {
      await this.driver.walk(REPOSITORIES, (info) => {
        if (!info.isDir) return;
        const base = info.path.slice(info.path.lastIndexOf('/') + 1);
        if (base === '_layers' || base === '_manifests') {
          const name = info.path.slice(prefix.length, info.path.length - base.length - 1);
          if (name !== except && candidates[candidates.length - 1] !== name && accept(name))
            candidates.push(name);
          return 'skip';
        }
        if (base.startsWith('_')) return 'skip';
      });
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    for (const name of candidates.sort(compareStrings)) {
      if (await this.repoHasBlob(name, d)) return name;
    }
    return undefined;
  }

  async repoExists(name: string): Promise<boolean> {
    return (await orUndefined(this.driver.stat(paths.repo(name)))) !== undefined;
  }

  /** Every repository with a _manifests directory, sorted lexically by full name. */
  async repositories(): Promise<string[]> {
    const repos: string[] = [];
    const prefix = `${REPOSITORIES}/`;
    try {
      await this.driver.walk(REPOSITORIES, (info) => {
        if (!info.isDir) return;
        const base = info.path.slice(info.path.lastIndexOf('/') + 1);
        if (base === '_manifests') {
          repos.push(info.path.slice(prefix.length, info.path.length - '/_manifests'.length));
          return 'skip';
        }
        if (base.startsWith('_')) return 'skip';
      });
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    return repos.sort(compareStrings);
  }
}

let registryKey: KeyObject | undefined;

/** Sign a schema-1 payload with a key generated once per process; undefined if it cannot be. */
function trySign(payload: Buffer): Buffer | undefined {
  try {
    registryKey ??= generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    return signSchema1(payload, registryKey);
  } catch {
    return undefined;
  }
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
