import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ContainerConfig, ImageConfigFile } from '../../common/docker-types.js';
import { BerthError, conflict, errorMessage, invalidParameter, notFound } from '../../common/errors.js';
import { writeJsonAtomic } from '../../common/fs/atomic.js';
import { shortId } from '../../common/ids.js';
import type { Logger } from '../../common/log.js';
import { Mutex } from '../../common/mutex.js';
import {
  familiarMatch,
  familiarName,
  familiarString,
  fullName,
  isIdPrefix,
  parseAnyReference,
  parseNormalizedNamed,
  type Reference,
  referenceString,
  tagNameOnly,
  withTag,
} from '../../common/reference.js';
import { rfc3339Nano } from '../../common/time.js';
import type { EventsService } from '../events/events.service.js';
import { HostStorageOps, type StorageOps } from '../storage/adapters/host.ops.js';
import { ContentStore } from '../storage/content.store.js';
import { JsonRecordStore } from '../storage/metadata.store.js';
import { chainIds, OverlaySnapshotter } from '../storage/overlay.snapshotter.js';
import type { SnapshotPaths, Snapshotter, SnapshotterExtras } from '../storage/snapshotter.types.js';
import { applyChanges } from './changes.js';
import { hostArchitecture, orderedContainerConfig, serializeImageConfig, unixSeconds } from './config.js';
import { parseGoDuration } from './dockerfile/go-text.js';
import type {
  ImageDeleteItem,
  ImageDetails,
  ImageHistoryItem,
  ImageListItem,
  ImageListOptions,
  ImageRecord,
  ImageResolver,
  ImageUsers,
  ImportOptions,
} from './images.types.js';
import { openUrl } from './url-source.js';

/** The image service: everything the image routes and the other engine services ask of images. */
export interface ImageService extends ImageResolver {
  /** Writable snapshots for containers (prepare on an image's chainId, mount, remove...). */
  readonly snapshotter: Snapshotter & SnapshotterExtras;
  /** `POST /images/create?fromSrc=...`: returns the new image ID. */
  importImage(opts: ImportOptions): Promise<string>;
  /**
   * Unpack a layer tarball (any compression) on top of the chain `parent` (null: base layer). The
   * layer is pinned against garbage collection until `release()`: call it once the image that
   * uses it is created (commit, load, pull).
   */
  addLayer(
    parent: string | null,
    input: AsyncIterable<Buffer>,
  ): Promise<{ chainId: string; diffId: string; size: number; release(): void }>;
  /** Register an image from its config (layers must exist already). Used by import; commit and load later. */
  createImage(config: ImageConfigFile, opts?: { parent?: string }): Promise<string>;
  /**
   * docker commit's image half (moby's CommitImage): the writable snapshot `key` becomes a layer
   * on the parent image's chain (none when the layer is empty), then an image whose config is
   * `config` (the caller merges changes and the container's config), with history and parent;
   * tagged when `repo` is given. The caller pauses the container and logs its `commit` event.
   */
  commit(opts: CommitOptions): Promise<string>;
  listImages(opts?: ImageListOptions): Promise<ImageListItem[]>;
  /** The unpacked size of every layer some image uses, each once (GET /system/df). */
  layersSize(): Promise<number>;
  inspect(name: string): Promise<ImageDetails>;
  history(name: string): Promise<ImageHistoryItem[]>;
  /** Tag `name` as `repo[:tag]` (tag defaults to latest). */
  tag(name: string, repo: string, tag?: string): Promise<void>;
  remove(name: string, opts?: { force?: boolean; prune?: boolean }): Promise<ImageDeleteItem[]>;
  /** POST /images/prune: filters dangling (default true), label, label!, until. */
  prune(
    filters?: Map<string, string[]>,
  ): Promise<{ ImagesDeleted: ImageDeleteItem[] | null; SpaceReclaimed: number }>;
  /** Remove layers that neither an image nor a writable snapshot uses; returns their chain IDs. */
  collectGarbage(): Promise<string[]>;
}

export interface CommitOptions {
  /** The writable snapshot (container ID). */
  key: string;
  /** The image the container runs (ID), or undefined for a container from scratch. */
  parentImageId?: string;
  containerId: string;
  /** The container's config, recorded as ContainerConfig; its Cmd becomes the history's created_by. */
  containerConfig: ContainerConfig;
  /** The new image's config. */
  config: ContainerConfig;
  author?: string;
  comment?: string;
  repo?: string;
  tag?: string;
}

/** Digest of an empty tar archive (1024 zero bytes): a layer that changes nothing. */
export const EMPTY_LAYER_DIFF_ID = 'sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef';

interface ImageMeta {
  id: string;
  parent: string;
  lastTagTime?: string;
  added: string;
}

interface LoadedImage {
  meta: ImageMeta;
  config: ImageConfigFile;
  chain: string[];
  size: number;
}

interface RepositoriesFile {
  Repositories: Record<string, Record<string, string>>;
}

const DEFAULT_PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export { DEFAULT_PATH_ENV };

function hex(id: string): string {
  return id.startsWith('sha256:') ? id.slice(7) : id;
}

function hasDigest(ref: Reference): boolean {
  return ref.digest !== undefined;
}

class ImageDeleteConflict extends BerthError {
  constructor(
    readonly id: string,
    readonly hard: boolean,
    readonly used: boolean,
    what: string,
  ) {
    super(
      'Conflict',
      `conflict: unable to delete ${shortId(id)} (${hard ? 'cannot be forced' : 'must be forced'}) - ${what}`,
    );
  }
}

const CONFLICT_CHILD = 1;
const CONFLICT_RUNNING = 2;
const CONFLICT_ACTIVE_REF = 4;
const CONFLICT_STOPPED = 8;
const CONFLICT_HARD = CONFLICT_CHILD | CONFLICT_RUNNING;
const CONFLICT_SOFT = CONFLICT_ACTIVE_REF | CONFLICT_STOPPED;

class LocalImageService implements ImageService {
  readonly content: ContentStore;
  readonly overlay: OverlaySnapshotter;
  readonly snapshotter: Snapshotter & SnapshotterExtras;
  private readonly metas: JsonRecordStore<ImageMeta>;
  private readonly repositoriesPath: string;
  private readonly images = new Map<string, LoadedImage>();
  /** referenceString -> image id */
  private readonly refs = new Map<string, string>();
  private readonly parsedRefs = new Map<string, Reference>();
  /** image id -> its reference strings */
  private readonly refsById = new Map<string, Set<string>>();
  private readonly mutex = new Mutex();
  private readonly pins = new Map<string, number>();
  private users: ImageUsers = { containersUsing: () => [] };

  constructor(
    private readonly opts: {
      dataRoot: string;
      events: EventsService;
      log: Logger;
      ops: StorageOps;
      engineVersion: string;
    },
  ) {
    this.content = new ContentStore(join(opts.dataRoot, 'content'));
    this.overlay = new OverlaySnapshotter({
      root: join(opts.dataRoot, 'overlay'),
      metaRoot: join(opts.dataRoot, 'image', 'snapshots'),
      ops: opts.ops,
      log: opts.log.child('snapshots'),
    });
    this.metas = new JsonRecordStore(join(opts.dataRoot, 'image', 'images'), (key, err) =>
      opts.log.warn('unreadable image record', { key, error: String(err) }),
    );
    this.repositoriesPath = join(opts.dataRoot, 'image', 'repositories.json');
    const overlay = this.overlay;
    // Containers' snapshots; removing one may free layers of images deleted meanwhile.
    this.snapshotter = {
      prepare: (key, parent) => overlay.prepare(key, parent),
      mount: (key, target, o) => overlay.mount(key, target, o),
      unmount: (target) => overlay.unmount(target),
      remove: async (key) => {
        const parent = (await overlay.listActive()).find((a) => a.key === key)?.parent ?? null;
        await overlay.remove(key);
        // Layers an image still uses stay anyway; collect only when the container held the last use.
        if (parent === null || [...this.images.values()].some((i) => i.chain.includes(parent))) return;
        await this.collectGarbage().catch((err) =>
          opts.log.warn('layer garbage collection failed', { error: errorMessage(err) }),
        );
      },
      usage: (key) => overlay.usage(key),
      upperDir: (key) => overlay.upperDir(key),
      paths: (key) => overlay.paths(key),
      exists: (key) => overlay.exists(key),
      listActive: () => overlay.listActive(),
      diff: (key) => overlay.diff(key),
    };
  }

  // ---- start-up ----

  async init(): Promise<void> {
    await this.content.init();
    await this.overlay.init();
    await this.metas.init();
    for (const [key, meta] of await this.metas.all()) {
      try {
        const config = JSON.parse((await this.content.get(meta.id)).toString('utf8')) as ImageConfigFile;
        const chain = chainIds(config.rootfs?.diff_ids ?? []);
        let size = 0;
        for (const c of chain) {
          const layer = await this.overlay.getLayer(c);
          if (!layer) throw new Error(`layer ${c} is missing`);
          size += layer.size;
        }
        this.images.set(meta.id, { meta, config, chain, size });
      } catch (err) {
        this.opts.log.warn('dropping broken image', { id: meta.id, error: errorMessage(err) });
        await this.metas.delete(key);
      }
    }
    let repos: RepositoriesFile = { Repositories: {} };
    try {
      repos = JSON.parse(await readFile(this.repositoriesPath, 'utf8')) as RepositoriesFile;
    } catch {
      // none yet
    }
    let dropped = false;
    for (const byRef of Object.values(repos.Repositories ?? {})) {
      for (const [refText, id] of Object.entries(byRef)) {
        try {
          const ref = parseNormalizedNamed(refText);
          if (this.images.has(id)) this.setRef(referenceString(ref), id);
          else dropped = true;
        } catch {
          dropped = true;
        }
      }
    }
    if (dropped) await this.saveRefs();
    const removed = await this.collectGarbage();
    if (removed.length) this.opts.log.info('removed unused layers', { count: removed.length });
    await this.collectBlobs();
  }

  /** Blobs no image or layer refers to (configs of imports a crash interrupted). */
  private async collectBlobs(): Promise<void> {
    const keep = new Set<string>(this.images.keys());
    for (const l of await this.overlay.listLayers()) if (l.blob) keep.add(l.blob.digest);
    for (const d of await this.content.list()) if (!keep.has(d)) await this.content.delete(d);
  }

  // ---- records ----

  private setRef(text: string, id: string): void {
    const old = this.refs.get(text);
    if (old !== undefined) this.refsById.get(old)?.delete(text);
    this.refs.set(text, id);
    let set = this.refsById.get(id);
    if (!set) {
      set = new Set();
      this.refsById.set(id, set);
    }
    set.add(text);
  }

  private deleteRef(text: string): void {
    const id = this.refs.get(text);
    if (id === undefined) return;
    this.refs.delete(text);
    const set = this.refsById.get(id);
    set?.delete(text);
    if (set?.size === 0) this.refsById.delete(id);
  }

  /** Parsed form of a stored reference string (memoised: list and inspect ask often). */
  private parsedRef(text: string): Reference {
    let ref = this.parsedRefs.get(text);
    if (!ref) {
      ref = parseNormalizedNamed(text);
      this.parsedRefs.set(text, ref);
    }
    return ref;
  }

  private refsOf(id: string): Reference[] {
    const out: Reference[] = [];
    for (const text of this.refsById.get(id) ?? []) out.push(this.parsedRef(text));
    // moby's lexicalRefs: by the full reference string (docker.io/library/... sorts among the rest).
    return out.sort((a, b) => {
      const x = referenceString(a);
      const y = referenceString(b);
      return x < y ? -1 : x > y ? 1 : 0;
    });
  }

  private record(id: string): ImageRecord {
    const img = this.images.get(id);
    if (!img) throw notFound(`No such image: ${id}`);
    const refs = this.refsOf(id);
    return {
      id,
      config: img.config,
      repoTags: refs.filter((r) => r.tag !== undefined && !hasDigest(r)).map(familiarString),
      repoDigests: refs.filter(hasDigest).map(familiarString),
      chainId: img.chain.length ? (img.chain[img.chain.length - 1] as string) : null,
      size: img.size,
      created: img.config.created ?? '',
      parent: img.meta.parent,
    };
  }

  private async saveRefs(): Promise<void> {
    const repos: RepositoriesFile = { Repositories: {} };
    for (const [text, id] of this.refs) {
      const ref = parseNormalizedNamed(text);
      const name = familiarName(ref);
      repos.Repositories[name] ??= {};
      (repos.Repositories[name] as Record<string, string>)[familiarString(ref)] = id;
    }
    await writeJsonAtomic(this.repositoriesPath, repos);
  }

  private labelsOf(id: string): Record<string, string> {
    return { ...(this.images.get(id)?.config.config?.Labels ?? {}) };
  }

  private event(action: string, id: string, name: string): void {
    this.opts.events.publish('image', action, id, { ...this.labelsOf(id), name });
  }

  // ---- ImageResolver ----

  /** The image ID `s` names, or undefined; throws InvalidParameter for a malformed reference. */
  private lookup(s: string): { id?: string; notFoundName: string } {
    const any = parseAnyReference(s);
    if (any.kind === 'id') return { id: this.images.has(any.id) ? any.id : undefined, notFoundName: any.id };
    const ref = any.ref;
    const key =
      ref.digest !== undefined
        ? referenceString({ ...ref, tag: undefined })
        : referenceString(tagNameOnly(ref));
    const byRef = this.refs.get(key);
    if (byRef && this.images.has(byRef)) return { id: byRef, notFoundName: familiarString(tagNameOnly(ref)) };
    if (isIdPrefix(s)) {
      const prefix = hex(s);
      const matches = [...this.images.keys()].filter((id) => hex(id).startsWith(prefix));
      if (matches.length === 1) return { id: matches[0], notFoundName: s };
    }
    return { notFoundName: familiarString(tagNameOnly(ref)) };
  }

  async resolve(refOrId: string): Promise<ImageRecord> {
    const { id, notFoundName } = this.lookup(refOrId);
    if (!id) throw notFound(`No such image: ${notFoundName}`);
    return this.record(id);
  }

  async get(id: string): Promise<ImageRecord | undefined> {
    return this.images.has(id) ? this.record(id) : undefined;
  }

  async list(): Promise<ImageRecord[]> {
    return [...this.images.keys()].map((id) => this.record(id));
  }

  setUsers(users: ImageUsers): void {
    this.users = users;
  }

  // ---- import ----

  async importImage(o: ImportOptions): Promise<string> {
    let newRef: Reference | undefined;
    if (o.repo) {
      newRef = parseNormalizedNamed(o.repo);
      if (hasDigest(newRef)) throw invalidParameter('cannot import digest reference');
      if (o.tag) newRef = withTag(newRef, o.tag);
    }
    const platform = parsePlatform(o.platform);
    const config = applyChanges({}, o.changes ?? []);
    let body: AsyncIterable<Buffer>;
    let total = o.bodySize;
    let src = o.src;
    if (src === '-') {
      if (!o.body) throw invalidParameter('no request body to import');
      body = o.body;
    } else {
      if (!src.includes('://')) src = `http://${src}`;
      const opened = await openUrl(src);
      o.onProgress?.({ kind: 'status', status: `Downloading from ${opened.url}` });
      total = opened.length;
      body = opened.body;
    }
    const message = o.message || `Imported from ${src}`;

    let lastSent = 0;
    let lastTime = 0;
    const onProgress = (n: number) => {
      const now = Date.now();
      if (n - lastSent >= 512 * 1024 && now - lastTime >= 100) {
        lastSent = n;
        lastTime = now;
        o.onProgress?.({ kind: 'progress', status: 'Importing', current: n, total });
      }
    };
    const { layer } = await this.overlay.applyLayer(null, toBuffers(body), {
      blob: this.content.writer(),
      onProgress,
      onCommit: (chainId) => this.pins.set(chainId, (this.pins.get(chainId) ?? 0) + 1),
    });
    try {
      if (lastSent > 0)
        o.onProgress?.({
          kind: 'progress',
          status: 'Importing',
          current: layer.blob?.size ?? lastSent,
          total,
        });
      const created = rfc3339Nano();
      const imageConfig: ImageConfigFile = {
        architecture: platform.architecture,
        comment: message,
        config: orderedContainerConfig(config) as ContainerConfig,
        container_config: orderedContainerConfig(undefined) as ContainerConfig,
        created,
        docker_version: this.opts.engineVersion,
        history: [{ created, comment: message }],
        os: platform.os,
        rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      };
      if (platform.variant) imageConfig.variant = platform.variant;
      const id = await this.createImage(imageConfig);
      if (newRef) await this.mutex.run(() => this.addRef(id, newRef as Reference));
      this.event('import', id, id);
      return id;
    } finally {
      this.unpin(layer.chainId);
    }
  }

  private unpin(chainId: string): void {
    const n = (this.pins.get(chainId) ?? 1) - 1;
    if (n <= 0) this.pins.delete(chainId);
    else this.pins.set(chainId, n);
  }

  async addLayer(
    parent: string | null,
    input: AsyncIterable<Buffer>,
  ): Promise<{ chainId: string; diffId: string; size: number; release(): void }> {
    const { layer } = await this.overlay.applyLayer(parent, toBuffers(input), {
      blob: this.content.writer(),
      onCommit: (chainId) => this.pins.set(chainId, (this.pins.get(chainId) ?? 0) + 1),
    });
    let released = false;
    return {
      chainId: layer.chainId,
      diffId: layer.diffId,
      size: layer.size,
      release: () => {
        if (released) return;
        released = true;
        this.unpin(layer.chainId);
      },
    };
  }

  async commit(o: CommitOptions): Promise<string> {
    let newRef: Reference | undefined;
    if (o.repo) {
      newRef = parseNormalizedNamed(o.repo);
      if (hasDigest(newRef)) throw invalidParameter('refusing to create a tag with a digest reference');
      if (o.tag) newRef = withTag(newRef, o.tag);
    } else if (o.tag) {
      throw invalidParameter('tag is specified without repository');
    }
    const parent = o.parentImageId ? this.images.get(o.parentImageId) : undefined;
    if (o.parentImageId && !parent) throw notFound(`No such image: ${o.parentImageId}`);
    const parentChain = parent?.chain.length ? (parent.chain[parent.chain.length - 1] as string) : null;
    const layer = await this.addLayer(parentChain, toBuffers(this.overlay.diff(o.key)));
    try {
      const empty = layer.diffId === EMPTY_LAYER_DIFF_ID;
      const created = rfc3339Nano();
      const history = { created, created_by: (o.containerConfig.Cmd ?? []).join(' ') } as {
        created: string;
        created_by: string;
        author?: string;
        comment?: string;
        empty_layer?: boolean;
      };
      if (o.author) history.author = o.author;
      if (o.comment) history.comment = o.comment;
      if (empty) history.empty_layer = true;
      const base = parent?.config;
      const config: ImageConfigFile = {
        architecture: base?.architecture ?? hostArchitecture(),
        config: orderedContainerConfig(o.config) as ContainerConfig,
        container: o.containerId,
        container_config: orderedContainerConfig(o.containerConfig) as ContainerConfig,
        created,
        docker_version: this.opts.engineVersion,
        history: [...(base?.history ?? []), history],
        os: base?.os ?? 'linux',
        rootfs: {
          type: 'layers',
          diff_ids: [...(base?.rootfs?.diff_ids ?? []), ...(empty ? [] : [layer.diffId])],
        },
      };
      if (o.author) config.author = o.author;
      if (o.comment) config.comment = o.comment;
      if (base?.variant) config.variant = base.variant;
      if (base?.['os.version']) config['os.version'] = base['os.version'];
      const id = await this.createImage(config, { parent: o.parentImageId ?? '' });
      if (newRef) await this.mutex.run(() => this.addRef(id, newRef as Reference));
      return id;
    } finally {
      layer.release();
      if (layer.diffId === EMPTY_LAYER_DIFF_ID) await this.collectGarbage().catch(() => undefined);
    }
  }

  async createImage(config: ImageConfigFile, opts: { parent?: string } = {}): Promise<string> {
    const bytes = serializeImageConfig(config);
    const chain = chainIds(config.rootfs?.diff_ids ?? []);
    return this.mutex.run(async () => {
      let size = 0;
      for (const c of chain) {
        const layer = await this.overlay.getLayer(c);
        if (!layer) throw notFound(`layer ${c} does not exist`);
        size += layer.size;
      }
      const id = await this.content.put(bytes);
      if (this.images.has(id)) return id;
      const meta: ImageMeta = { id, parent: opts.parent ?? '', added: new Date().toISOString() };
      await this.metas.put(hex(id), meta);
      this.images.set(id, { meta, config: JSON.parse(bytes) as ImageConfigFile, chain, size });
      return id;
    });
  }

  // ---- tags ----

  /**
   * Point `given` (`latest` when it has neither tag nor digest) at `id`, replacing what it named;
   * record LastTagTime; publish `tag` named as given, as dockerd does. Call under the mutex.
   */
  private async addRef(id: string, given: Reference): Promise<void> {
    if (familiarName(given) === 'sha256') {
      throw invalidParameter('refusing to create an ambiguous tag using digest algorithm as name');
    }
    const ref = tagNameOnly(given);
    this.setRef(referenceString(ref), id);
    await this.saveRefs();
    const img = this.images.get(id);
    if (img) {
      img.meta = { ...img.meta, lastTagTime: rfc3339Nano() };
      await this.metas.put(hex(id), img.meta);
    }
    this.event('tag', id, familiarString(given));
  }

  async tag(name: string, repo: string, tag?: string): Promise<void> {
    let ref = parseNormalizedNamed(repo);
    if (hasDigest(ref)) throw invalidParameter('refusing to create a tag with a digest reference');
    if (tag) ref = withTag(ref, tag);
    await this.mutex.run(async () => {
      const { id, notFoundName } = this.lookup(name);
      if (!id) throw notFound(`No such image: ${notFoundName}`);
      await this.addRef(id, ref);
    });
  }

  // ---- list / inspect / history ----

  async listImages(opts: ImageListOptions = {}): Promise<ImageListItem[]> {
    const filters = opts.filters ?? new Map<string, string[]>();
    for (const key of filters.keys()) {
      if (!['dangling', 'label', 'before', 'since', 'reference', 'until'].includes(key)) {
        throw invalidParameter(`invalid filter '${key}'`);
      }
    }
    const dangling = filters.get('dangling');
    const danglingOnly = danglingFilter(dangling, false);
    const timeOf = (name: string): number => {
      const r = this.lookup(name);
      if (!r.id) throw notFound(`No such image: ${r.notFoundName}`);
      return Date.parse(this.images.get(r.id)?.config.created ?? '') || 0;
    };
    const before = (filters.get('before') ?? []).map(timeOf);
    const since = (filters.get('since') ?? []).map(timeOf);
    const until = (filters.get('until') ?? []).map((v) => parseTimestamp(v));
    const labels = filters.get('label') ?? [];
    const patterns = filters.get('reference') ?? [];
    const children = new Set<string>();
    for (const img of this.images.values()) if (img.meta.parent) children.add(img.meta.parent);

    const out: ImageListItem[] = [];
    for (const id of this.images.keys()) {
      const rec = this.record(id);
      const created = Date.parse(rec.created) || 0;
      if (before.length && !before.every((t) => created < t)) continue;
      if (since.length && !since.every((t) => created > t)) continue;
      if (until.length && !until.every((t) => created < t)) continue;
      if (labels.length) {
        const have = rec.config.config?.Labels ?? {};
        const ok = labels.every((l) => {
          const eq = l.indexOf('=');
          if (eq < 0) return Object.hasOwn(have, l);
          return have[l.slice(0, eq)] === l.slice(eq + 1);
        });
        if (!ok) continue;
      }
      let refs = this.refsOf(id);
      if (patterns.length) refs = refs.filter((r) => patterns.some((p) => familiarMatch(p, r)));
      let repoTags = refs.filter((r) => r.tag !== undefined && !hasDigest(r)).map(familiarString);
      let repoDigests = refs.filter(hasDigest).map(familiarString);
      if (repoTags.length === 0 && repoDigests.length === 0) {
        if (!opts.all && children.has(id)) continue;
        if (dangling?.length && !danglingOnly) continue;
        if (patterns.length) continue;
        if (this.refsOf(id).length > 0) continue; // tagged, but no reference matched
        repoTags = ['<none>:<none>'];
        repoDigests = ['<none>@<none>'];
      } else if (danglingOnly && repoTags.length > 0) continue;
      out.push({ record: rec, repoTags, repoDigests });
    }
    out.sort((a, b) => (Date.parse(b.record.created) || 0) - (Date.parse(a.record.created) || 0));
    if (opts.sharedSize) await this.addSharedSizes(out);
    if (opts.containers)
      for (const item of out) item.containers = this.users.containersUsing(item.record.id).length;
    return out;
  }

  /** dockerd's LayersSize: the unpacked size of every layer some image is built on, each once. */
  async layersSize(): Promise<number> {
    const used = new Set<string>();
    for (const img of this.images.values()) for (const chainId of img.chain) used.add(chainId);
    let total = 0;
    for (const l of await this.overlay.listLayers()) if (used.has(l.chainId)) total += l.size;
    return total;
  }

  /** dockerd's SharedSize: the sizes of an image's layers that more than one image has. */
  private async addSharedSizes(items: ImageListItem[]): Promise<void> {
    const users = new Map<string, number>();
    for (const img of this.images.values())
      for (const chainId of new Set(img.chain)) users.set(chainId, (users.get(chainId) ?? 0) + 1);
    const sizes = new Map<string, number>();
    for (const l of await this.overlay.listLayers()) sizes.set(l.chainId, l.size);
    for (const item of items) {
      const chain = this.images.get(item.record.id)?.chain ?? [];
      item.sharedSize = [...new Set(chain)]
        .filter((c) => (users.get(c) ?? 0) > 1)
        .reduce((sum, c) => sum + (sizes.get(c) ?? 0), 0);
    }
  }

  async inspect(name: string): Promise<ImageDetails> {
    const rec = await this.resolve(name);
    const img = this.images.get(rec.id) as LoadedImage;
    let graphDriver: SnapshotPaths | null = null;
    if (rec.chainId) graphDriver = await this.overlay.layerPaths(rec.chainId);
    return { record: rec, lastTagTime: img.meta.lastTagTime ?? null, graphDriver };
  }

  async history(name: string): Promise<ImageHistoryItem[]> {
    const rec = await this.resolve(name);
    const img = this.images.get(rec.id) as LoadedImage;
    const items: ImageHistoryItem[] = [];
    let layerIndex = 0;
    for (const h of img.config.history ?? []) {
      let size = 0;
      if (!h.empty_layer) {
        const chainId = img.chain[layerIndex];
        if (chainId === undefined) throw invalidParameter('too many non-empty layers in History section');
        size = (await this.overlay.getLayer(chainId))?.size ?? 0;
        layerIndex++;
      }
      items.unshift({
        id: '<missing>',
        created: unixSeconds(h.created),
        createdBy: h.created_by ?? '',
        tags: null,
        size,
        comment: h.comment ?? '',
      });
    }
    let id = rec.id;
    for (const item of items) {
      item.id = id;
      const tags = this.refsOf(id)
        .filter((r) => r.tag !== undefined && !hasDigest(r))
        .map(familiarString);
      item.tags = tags.length ? tags : null;
      const parent = this.images.get(id)?.meta.parent;
      if (!parent || !this.images.has(parent)) break;
      id = parent;
    }
    return items;
  }

  // ---- delete ----

  async remove(name: string, opts: { force?: boolean; prune?: boolean } = {}): Promise<ImageDeleteItem[]> {
    const force = opts.force ?? false;
    const prune = opts.prune ?? true;
    return this.mutex.run(async () => {
      const { id, notFoundName } = this.lookup(name);
      if (!id) throw notFound(`No such image: ${notFoundName}`);
      const records: ImageDeleteItem[] = [];
      let repoRefs = this.refsOf(id);
      let removedRepositoryRef = false;
      if (!isImageIdPrefix(id, name)) {
        if (!force && isSingleReference(repoRefs)) {
          const user = this.users.containersUsing(id)[0];
          if (user) {
            throw conflict(
              `conflict: unable to remove repository reference "${name}" (must force) - container ${shortId(user.id)} is using its referenced image ${shortId(id)}`,
            );
          }
        }
        const parsed = parseAnyReference(name);
        const ref = parsed.kind === 'named' ? parsed.ref : undefined;
        const target = ref
          ? ref.digest !== undefined
            ? { ...ref, tag: undefined }
            : tagNameOnly(ref)
          : undefined;
        if (target && this.refs.get(referenceString(target)) === id) {
          this.deleteRef(referenceString(target));
          await this.saveRefs();
          records.push({ Untagged: familiarString(target) });
          this.event('untag', id, id);
          repoRefs = this.refsOf(id);
          if (!hasDigest(target)) {
            const sameRepoTag = repoRefs.some((r) => !hasDigest(r) && fullName(r) === fullName(target));
            if (!sameRepoTag) {
              for (const r of repoRefs) {
                if (hasDigest(r) && fullName(r) === fullName(target)) {
                  this.deleteRef(referenceString(r));
                  records.push({ Untagged: familiarString(r) });
                }
              }
              await this.saveRefs();
              repoRefs = this.refsOf(id);
            }
          }
          if (repoRefs.length > 0) return records;
          removedRepositoryRef = true;
        }
      } else if (isSingleReference(repoRefs)) {
        let mask = CONFLICT_HARD;
        if (!force) mask |= CONFLICT_SOFT & ~CONFLICT_ACTIVE_REF;
        const c = this.deleteConflict(id, mask);
        if (c) throw c;
        for (const r of repoRefs) {
          this.deleteRef(referenceString(r));
          records.push({ Untagged: familiarString(r) });
          this.event('untag', id, id);
        }
        await this.saveRefs();
      }
      await this.deleteHelper(id, records, force, prune, removedRepositoryRef);
      return records;
    });
  }

  private deleteConflict(id: string, mask: number): ImageDeleteConflict | undefined {
    if (mask & CONFLICT_CHILD) {
      for (const img of this.images.values()) {
        if (img.meta.parent === id)
          return new ImageDeleteConflict(id, true, false, 'image has dependent child images');
      }
    }
    const users = this.users.containersUsing(id);
    if (mask & CONFLICT_RUNNING) {
      const running = users.find((u) => u.running);
      if (running) {
        return new ImageDeleteConflict(
          id,
          true,
          true,
          `image is being used by running container ${shortId(running.id)}`,
        );
      }
    }
    if (mask & CONFLICT_ACTIVE_REF && this.refsOf(id).length > 0) {
      return new ImageDeleteConflict(id, false, false, 'image is referenced in multiple repositories');
    }
    if (mask & CONFLICT_STOPPED) {
      const stopped = users.find((u) => !u.running);
      if (stopped) {
        return new ImageDeleteConflict(
          id,
          false,
          true,
          `image is being used by stopped container ${shortId(stopped.id)}`,
        );
      }
    }
    return undefined;
  }

  private async deleteHelper(
    id: string,
    records: ImageDeleteItem[],
    force: boolean,
    prune: boolean,
    quiet: boolean,
  ): Promise<void> {
    let mask = CONFLICT_HARD;
    if (!force) mask |= CONFLICT_SOFT;
    const c = this.deleteConflict(id, mask);
    if (c) {
      const danglingImage = this.refsOf(id).length === 0;
      if (quiet && (!danglingImage || c.used)) return;
      throw c;
    }
    const img = this.images.get(id) as LoadedImage;
    const parent = img.meta.parent;
    const refs = this.refsOf(id);
    for (const r of refs) {
      this.deleteRef(referenceString(r));
      records.push({ Untagged: familiarString(r) });
      this.event('untag', id, id);
    }
    if (refs.length) await this.saveRefs();
    const labels = this.labelsOf(id);
    await this.metas.delete(hex(id));
    this.images.delete(id);
    await this.content.delete(id);
    this.opts.events.publish('image', 'delete', id, { ...labels, name: id });
    records.push({ Deleted: id });
    const removed = new Set(await this.collectGarbageLocked());
    for (const chainId of [...img.chain].reverse())
      if (removed.has(chainId)) records.push({ Deleted: chainId });
    if (prune && parent && this.images.has(parent))
      await this.deleteHelper(parent, records, false, true, true);
  }

  async prune(
    filters: Map<string, string[]> = new Map(),
  ): Promise<{ ImagesDeleted: ImageDeleteItem[] | null; SpaceReclaimed: number }> {
    for (const key of filters.keys()) {
      if (!['dangling', 'label', 'label!', 'until'].includes(key))
        throw invalidParameter(`invalid filter '${key}'`);
    }
    const danglingOnly = danglingFilter(filters.get('dangling'), true);
    const until = (filters.get('until') ?? []).map((v) => parseTimestamp(v));
    const labels = filters.get('label') ?? [];
    const notLabels = filters.get('label!') ?? [];
    const labelMatch = (have: Record<string, string>, l: string): boolean => {
      const eq = l.indexOf('=');
      return eq < 0 ? Object.hasOwn(have, l) : have[l.slice(0, eq)] === l.slice(eq + 1);
    };
    const children = new Set<string>();
    for (const img of this.images.values()) if (img.meta.parent) children.add(img.meta.parent);
    const layerSizes = new Map<string, number>();
    for (const l of await this.overlay.listLayers()) layerSizes.set(l.chainId, l.size);
    const deleted: ImageDeleteItem[] = [];
    for (const [id, img] of [...this.images]) {
      if (danglingOnly && children.has(id)) continue;
      const refs = this.refsOf(id);
      if (refs.length === 0 && children.has(id)) continue;
      const created = Date.parse(img.config.created ?? '') || 0;
      if (until.length && !until.every((t) => created < t)) continue;
      const have = img.config.config?.Labels ?? {};
      if (!labels.every((l) => labelMatch(have, l))) continue;
      if (notLabels.some((l) => labelMatch(have, l))) continue;
      const names: string[] = [];
      if (refs.length > 0) {
        if (danglingOnly && refs.some((r) => r.tag !== undefined && !hasDigest(r))) continue;
        names.push(...refs.map(referenceString));
      } else names.push(hex(id));
      for (const name of names) {
        try {
          deleted.push(...(await this.remove(name, { force: false, prune: true })));
        } catch (err) {
          if (!(err instanceof BerthError) || (err.kind !== 'Conflict' && err.kind !== 'NotFound')) throw err;
        }
      }
    }
    let reclaimed = 0;
    for (const d of deleted) if ('Deleted' in d) reclaimed += layerSizes.get(d.Deleted) ?? 0;
    this.opts.events.publish('image', 'prune', '', { reclaimed: String(reclaimed) });
    return { ImagesDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed };
  }

  async collectGarbage(): Promise<string[]> {
    return this.mutex.run(() => this.collectGarbageLocked());
  }

  private async collectGarbageLocked(): Promise<string[]> {
    const keep = new Set<string>(this.pins.keys());
    for (const img of this.images.values()) for (const c of img.chain) keep.add(c);
    for (const a of await this.overlay.listActive()) {
      if (a.parent === null) continue;
      try {
        for (const l of await this.overlay.chain(a.parent)) keep.add(l.chainId);
      } catch {
        keep.add(a.parent);
      }
    }
    const layers = await this.overlay.listLayers();
    const depth = new Map<string, number>();
    const byId = new Map(layers.map((l) => [l.chainId, l]));
    const depthOf = (c: string): number => {
      const known = depth.get(c);
      if (known !== undefined) return known;
      let d = 0;
      let cur = byId.get(c)?.parent ?? null;
      while (cur !== null && d < 1000) {
        d++;
        cur = byId.get(cur)?.parent ?? null;
      }
      depth.set(c, d);
      return d;
    };
    // A kept layer keeps its parents.
    for (const c of [...keep]) {
      let cur = byId.get(c)?.parent ?? null;
      while (cur !== null && !keep.has(cur)) {
        keep.add(cur);
        cur = byId.get(cur)?.parent ?? null;
      }
    }
    const doomed = layers
      .filter((l) => !keep.has(l.chainId))
      .sort((a, b) => depthOf(b.chainId) - depthOf(a.chainId));
    const removed: string[] = [];
    const blobsInUse = new Set(
      layers.filter((l) => keep.has(l.chainId) && l.blob).map((l) => l.blob?.digest),
    );
    for (const l of doomed) {
      try {
        if (!(await this.overlay.removeLayer(l.chainId, () => this.pins.has(l.chainId)))) continue;
        removed.push(l.chainId);
        if (l.blob && !blobsInUse.has(l.blob.digest)) await this.content.delete(l.blob.digest);
      } catch (err) {
        this.opts.log.warn('cannot remove layer', { chainId: l.chainId, error: errorMessage(err) });
      }
    }
    return removed;
  }
}

/** isImageIDPrefix of moby: does the user's string name the image by (a prefix of) its ID? */
function isImageIdPrefix(id: string, s: string): boolean {
  if (id.startsWith(s)) return true;
  return hex(id).startsWith(s);
}

/** moby's isSingleReference: one tag (plus digests of that same repository), or one digest. */
function isSingleReference(refs: Reference[]): boolean {
  if (refs.length <= 1) return refs.length === 1;
  let single: Reference | undefined;
  const canonicalNames = new Set<string>();
  for (const r of refs) {
    if (hasDigest(r)) canonicalNames.add(fullName(r));
    else if (!single) single = r;
    else return false;
  }
  const s = single ?? (refs[0] as Reference);
  return canonicalNames.size === 1 && canonicalNames.has(fullName(s));
}

/**
 * A filter timestamp as dockerd reads it (timetypes.GetTimestamp): Unix seconds (fraction
 * allowed), an RFC 3339 date or date-time, or a Go duration before now. Milliseconds.
 */
export function parseTimestamp(value: string, now = Date.now()): number {
  if (/^\d+(\.\d+)?$/.test(value)) return Math.floor(Number(value) * 1000);
  if (/^\d+(\.\d+)?(ns|us|µs|ms|s|m|h)/.test(value)) {
    try {
      return now - parseGoDuration(value) / 1e6;
    } catch {
      // not a duration after all
    }
  }
  const ms = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00Z` : value);
  if (Number.isFinite(ms)) return ms;
  throw invalidParameter(`failed to parse value as time or duration: "${value}"`);
}

/** `os[/arch[/variant]]`, defaulting to the host. */
export function parsePlatform(spec: string | undefined): {
  os: string;
  architecture: string;
  variant?: string;
} {
  const host = { os: 'linux', architecture: hostArchitecture() };
  if (!spec) return host;
  const parts = spec.toLowerCase().split('/');
  if (parts.length > 3 || parts.some((p) => !/^[a-z0-9_.-]+$/.test(p))) {
    throw invalidParameter(`"${spec}": unknown operating system or architecture: invalid argument`);
  }
  const [os, arch, variant] = parts as [string, string?, string?];
  if (os !== 'linux') throw invalidParameter('operating system is not supported');
  const archMap: Record<string, string> = { x86_64: 'amd64', x86: '386', aarch64: 'arm64', armhf: 'arm' };
  const out: { os: string; architecture: string; variant?: string } = {
    os,
    architecture: arch ? (archMap[arch] ?? arch) : host.architecture,
  };
  if (variant) out.variant = variant;
  return out;
}

async function* toBuffers(source: AsyncIterable<Buffer | Uint8Array | string>): AsyncGenerator<Buffer> {
  for await (const c of source)
    yield typeof c === 'string' ? Buffer.from(c) : Buffer.isBuffer(c) ? c : Buffer.from(c);
}

export async function createImageService(opts: {
  dataRoot: string;
  events: EventsService;
  log: Logger;
  /** Host adapters (tests may fake them). */
  ops?: StorageOps;
  /** Written as docker_version into new image configs. */
  engineVersion?: string;
}): Promise<ImageService> {
  const service = new LocalImageService({
    dataRoot: opts.dataRoot,
    events: opts.events,
    log: opts.log,
    ops: opts.ops ?? new HostStorageOps(),
    engineVersion: opts.engineVersion ?? '0.1.0',
  });
  await service.init();
  return service;
}

/**
 * The `dangling` filter as dockerd reads it: true when one of its values is true (or 1), else
 * false when one is false (or 0), `fallback` when it has none; anything else is a 400.
 */
function danglingFilter(values: string[] | undefined, fallback: boolean): boolean {
  if (!values?.length) return fallback;
  if (values.some((v) => v === 'true' || v === '1')) return true;
  if (values.some((v) => v === 'false' || v === '0')) return false;
  throw invalidParameter(`invalid filter 'dangling=[${values.join(' ')}]'`);
}
