import { join } from 'node:path';
import type { ImageConfigFile } from '../../common/docker-types.js';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { KeyedMutex, Mutex } from '../../common/mutex.js';
import { rfc3339Nano } from '../../common/time.js';
import type { StorageOps } from '../storage/adapters/host.ops.js';
import { ContentStore } from '../storage/content.store.js';
import { JsonRecordStore } from '../storage/metadata.store.js';
import { chainIds, OverlaySnapshotter } from '../storage/overlay.snapshotter.js';

/** An image's record (`image/images/<id-hex>.json`): what its config does not say. */
export interface ImageMeta {
  id: string;
  parent: string;
  lastTagTime?: string;
  added: string;
}

/** An image as the store holds it: its record, parsed config, layer chain and unpacked size. */
export interface LoadedImage {
  meta: ImageMeta;
  config: ImageConfigFile;
  /** Chain IDs of its layers, bottom first. */
  chain: string[];
  size: number;
}

/** The hex part of a `sha256:` ID (record file names, prefix matching). */
export function hex(id: string): string {
  return id.startsWith('sha256:') ? id.slice(7) : id;
}

/**
 * The images the engine has, and what they are kept in: the content store (configs and layer
 * blobs), the overlay snapshotter (unpacked layers), the image records. Also the lock every
 * change of images, references and layers runs under, and the pins that keep a layer being
 * imported from garbage collection until its image exists.
 */
export class ImageStore {
  readonly content: ContentStore;
  readonly overlay: OverlaySnapshotter;
  private readonly metas: JsonRecordStore<ImageMeta>;
  private readonly images = new Map<string, LoadedImage>();
  private readonly mutex = new Mutex();
  private readonly pins = new Map<string, number>();
  private readonly log: Logger;
  /** The latest write of each image's record under way: its writes run in order. */
  private readonly writes = new KeyedMutex();

  constructor(opts: { dataRoot: string; ops: StorageOps; log: Logger }) {
    this.log = opts.log;
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
  }

  /** Open the stores and load every image whose config and layers are there (drop the others). */
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
        this.log.warn('dropping broken image', { id: meta.id, error: errorMessage(err) });
        await this.metas.delete(key);
      }
    }
  }

  // ---- lookups ----

  has(id: string): boolean {
    return this.images.has(id);
  }

  get(id: string): LoadedImage | undefined {
    return this.images.get(id);
  }

  /** Image IDs, oldest first (the order they were loaded or added). */
  ids(): string[] {
    return [...this.images.keys()];
  }

  /** Every image, in the order of ids(). */
  all(): LoadedImage[] {
    return [...this.images.values()];
  }

  /** The IDs whose hex starts with `prefix` (no `sha256:`). */
  matchPrefix(prefix: string): string[] {
    return this.ids().filter((id) => hex(id).startsWith(prefix));
  }

  /** IDs of the images that are some image's parent. */
  parentIds(): Set<string> {
    const out = new Set<string>();
    for (const img of this.images.values()) if (img.meta.parent) out.add(img.meta.parent);
    return out;
  }

  hasChildren(id: string): boolean {
    for (const img of this.images.values()) if (img.meta.parent === id) return true;
    return false;
  }

  /** Chain IDs of every layer some image is built on. */
  layersInUse(): Set<string> {
    const out = new Set<string>();
    for (const img of this.images.values()) for (const c of img.chain) out.add(c);
    return out;
  }

  usesLayer(chainId: string): boolean {
    return this.all().some((i) => i.chain.includes(chainId));
  }

  labelsOf(id: string): Record<string, string> {
    return { ...(this.images.get(id)?.config.config?.Labels ?? {}) };
  }

  // ---- changes (under the lock) ----

  /** Run `fn` under the images' lock (not reentrant). */
  locked<T>(fn: () => Promise<T>): Promise<T> {
    return this.mutex.run(fn);
  }

  /** Record a new image; its config blob and layers must exist already. */
  async add(image: LoadedImage): Promise<void> {
    await this.inOrder(hex(image.meta.id), () => this.metas.put(hex(image.meta.id), image.meta));
    this.images.set(image.meta.id, image);
  }

  /**
   * Record that `id` was just tagged (inspect's Metadata.LastTagTime): at once in memory; the
   * record's file is written (fsynced, as dockerd's) after the writes of it before. `wait` false:
   * the caller does not wait for the file (a tag that changed nothing else on disk: losing the
   * time to a crash loses no image nor tag).
   */
  async markTagged(id: string, wait = true): Promise<void> {
    const img = this.images.get(id);
    if (!img) return;
    img.meta = { ...img.meta, lastTagTime: rfc3339Nano() };
    const written = this.inOrder(hex(id), async () => {
      // the record as it is by then; none when the image went meanwhile
      const now = this.images.get(id);
      if (now) await this.metas.put(hex(id), now.meta);
    });
    if (wait) return written;
    written.catch((err) => this.log.warn('image record not written', { id, error: String(err) }));
  }

  /** Delete an image's record and config blob (its layers go with garbage collection). */
  async delete(id: string): Promise<void> {
    await this.inOrder(hex(id), () => this.metas.delete(hex(id)));
    this.images.delete(id);
    await this.content.delete(id);
  }

  /** An image record's file writes one after another (a late write never undoes a later one). */
  private inOrder(key: string, work: () => Promise<void>): Promise<void> {
    return this.writes.run(key, work);
  }

  // ---- pins against garbage collection ----

  pin(chainId: string): void {
    this.pins.set(chainId, (this.pins.get(chainId) ?? 0) + 1);
  }

  unpin(chainId: string): void {
    const n = (this.pins.get(chainId) ?? 1) - 1;
    if (n <= 0) this.pins.delete(chainId);
    else this.pins.set(chainId, n);
  }

  isPinned(chainId: string): boolean {
    return this.pins.has(chainId);
  }

  pinnedLayers(): string[] {
    return [...this.pins.keys()];
  }
}
