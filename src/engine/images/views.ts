import { invalidParameter, notFound } from '../../common/errors.js';
import type { SnapshotPaths } from '../storage/snapshotter.types.js';
import { unixSeconds } from './config.js';
import type { ImageStore, LoadedImage } from './image.store.js';
import type { ImageDetails, ImageHistoryItem, ImageRecord, PlatformOption } from './images.types.js';
import { checkImagePlatform } from './platform.js';
import { digestStrings, type ReferenceStore, tagStrings } from './references.js';

/** What the views read of the store. */
export type ViewedStore = Pick<ImageStore, 'overlay' | 'has' | 'get' | 'ids'>;

/** One image as callers see it: records (ImageResolver), inspect and history. */
export class ImageViews {
  constructor(
    private readonly store: ViewedStore,
    private readonly refs: Pick<ReferenceStore, 'refsOf' | 'lookup'>,
  ) {}

  /** The record of the image `id`; NotFound when there is none. */
  record(id: string): ImageRecord {
    const img = this.store.get(id);
    if (!img) throw notFound(`No such image: ${id}`);
    const refs = this.refs.refsOf(id);
    return {
      id,
      config: img.config,
      repoTags: tagStrings(refs),
      repoDigests: digestStrings(refs),
      chainId: img.chain.length ? (img.chain[img.chain.length - 1] as string) : null,
      size: img.size,
      created: img.config.created ?? '',
      parent: img.meta.parent,
    };
  }

  async resolve(refOrId: string): Promise<ImageRecord> {
    const { id, notFoundName } = this.refs.lookup(refOrId);
    if (!id) throw notFound(`No such image: ${notFoundName}`);
    return this.record(id);
  }

  async get(id: string): Promise<ImageRecord | undefined> {
    return this.store.has(id) ? this.record(id) : undefined;
  }

  async list(): Promise<ImageRecord[]> {
    return this.store.ids().map((id) => this.record(id));
  }

  /** The image `name` means; with a platform, NotFound unless the image is for it (moby's GetImage). */
  async resolveFor(name: string, opts: PlatformOption = {}): Promise<ImageRecord> {
    const rec = await this.resolve(name);
    checkImagePlatform(name, rec.config, opts.platform);
    return rec;
  }

  async inspect(name: string, opts: PlatformOption = {}): Promise<ImageDetails> {
    const rec = await this.resolveFor(name, opts);
    const img = this.store.get(rec.id) as LoadedImage;
    let graphDriver: SnapshotPaths | null = null;
    if (rec.chainId) graphDriver = await this.store.overlay.layerPaths(rec.chainId);
    return { record: rec, lastTagTime: img.meta.lastTagTime ?? null, graphDriver };
  }

  /** The image's history, newest first; the IDs and tags of its parents where they are still here. */
  async history(name: string, opts: PlatformOption = {}): Promise<ImageHistoryItem[]> {
    const rec = await this.resolveFor(name, opts);
    const img = this.store.get(rec.id) as LoadedImage;
    const items: ImageHistoryItem[] = [];
    let layerIndex = 0;
    for (const h of img.config.history ?? []) {
      let size = 0;
      if (!h.empty_layer) {
        const chainId = img.chain[layerIndex];
        if (chainId === undefined) throw invalidParameter('too many non-empty layers in History section');
        size = (await this.store.overlay.getLayer(chainId))?.size ?? 0;
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
      const tags = tagStrings(this.refs.refsOf(id));
      item.tags = tags.length ? tags : null;
      const parent = this.store.get(id)?.meta.parent;
      if (!parent || !this.store.has(parent)) break;
      id = parent;
    }
    return items;
  }
}
