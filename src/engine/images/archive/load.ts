import { invalidParameter } from '../../../common/errors.js';
import { familiarString, referenceString } from '../../../common/reference.js';
import { chainIdOf } from '../../storage/overlay.snapshotter.js';
import type { ImageCreator } from '../create.js';
import type { LayerCollector } from '../gc.js';
import type { ImageEvents } from '../image.events.js';
import type { ImageStore } from '../image.store.js';
import { addLayer } from '../layers.js';
import { imagePlatform, type OciPlatform, platformMatches } from '../platform.js';
import type { ReferenceStore } from '../references.js';
import { type LoadItem, loadItems } from './formats.js';
import type { ArchiveSpool } from './reader.js';

/** A message of docker load's answer, as the route turns it into JSON stream messages. */
export type LoadMessage =
  | { kind: 'progress'; id: string; current: number; total: number }
  | { kind: 'stream'; text: string };

export interface LoadOptions {
  body: AsyncIterable<Buffer>;
  /** No `Loading layer` progress (the `Loaded image` lines still come). */
  quiet?: boolean;
  /** Load only the images for this platform (the others are skipped, as dockerd). */
  platform?: OciPlatform;
  onMessage: (m: LoadMessage) => void;
}

/** moby's stringid.TruncateID: the hex, 12 characters. */
function shortId(id: string): string {
  return id.replace(/^[^:]*:/, '').slice(0, 12);
}

/**
 * dockerd's progress.Reader over a layer file: a message every 1% (at most 512 KiB apart), at
 * most one each 100 ms, and the last one always.
 */
function layerProgress(id: string, total: number, send: (m: LoadMessage) => void): (n: number) => void {
  const every = Math.min(512 * 1024, Math.floor(total / 100));
  let lastAt = 0;
  let lastTime = 0;
  return (current) => {
    if (current - lastAt <= every && current !== total) return;
    lastAt = current;
    const now = Date.now();
    if (current !== total && now - lastTime < 100) return;
    lastTime = now;
    send({ kind: 'progress', id: shortId(id), current, total });
  };
}

/** Whether `parent` can be `image`'s parent (moby's checkValidParent): its layers and history begin it. */
function validParent(image: LoadItem['config'], parent: LoadItem['config']): boolean {
  const a = image.rootfs.diff_ids;
  const b = parent.rootfs?.diff_ids ?? [];
  if (b.length > a.length || b.some((d, i) => d !== a[i])) return false;
  return (parent.history?.length ?? 0) < (image.history?.length ?? 0) || !image.history?.length;
}

/**
 * docker load (`POST /images/load`): the archive is received whole into the spool and read
 * (reader.ts, formats.ts) before anything is stored; then every layer not present yet is applied
 * (pinned) and checked against its diff ID, and only when all of them are there are the images
 * created and tagged. A failure at any point leaves no image, no tag and no layer of its own
 * behind (the layers it added are collected). Events: `load` per image, as dockerd (no `tag`).
 */
export class ImageLoader {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'content' | 'overlay' | 'pin' | 'unpin' | 'has' | 'get' | 'locked'>;
      creator: Pick<ImageCreator, 'createImageFromBytes'>;
      refs: Pick<ReferenceStore, 'idOf' | 'set' | 'save'>;
      events: ImageEvents;
      gc: Pick<LayerCollector, 'collect'>;
      spool: ArchiveSpool;
    },
  ) {}

  /** Returns the IDs of the images loaded, in the archive's order. */
  async load(o: LoadOptions): Promise<string[]> {
    const { store, spool } = this.deps;
    const archive = await spool.receive(o.body, store.overlay.ops);
    const releases: Array<() => void> = [];
    let failed = true;
    try {
      const want = o.platform;
      const items = (await loadItems(archive, want)).filter(
        (item) => !want || platformMatches(want, imagePlatform(item.config)),
      );
      // every layer, each chain once, before any image
      const done = new Set<string>();
      for (const item of items) {
        let parent: string | null = null;
        for (const [i, l] of item.layers.entries()) {
          const chain = chainIdOf(parent, l.diffId);
          if (!done.has(chain)) {
            store.pin(chain);
            releases.push(() => store.unpin(chain));
            if (!(await store.overlay.hasLayer(chain))) {
              const progress = o.quiet ? undefined : layerProgress(l.diffId, l.file.size, o.onMessage);
              const { layer, release } = await addLayer(store, parent, archive.open(l.file), progress);
              releases.push(release);
              if (layer.diffId !== l.diffId)
                throw invalidParameter(
                  `invalid diffID for layer ${i}: expected "${l.diffId}", got "${layer.diffId}"`,
                );
            }
            done.add(chain);
          }
          parent = chain;
        }
      }
      const ids = await this.createImages(items);
      failed = false;
      await this.tagImages(items, ids, o.onMessage);
      return ids;
    } finally {
      for (const release of releases) release();
      if (failed) await this.deps.gc.collect().catch(() => undefined);
      await archive.remove();
    }
  }

  /** The images, parents (fewer layers) first; answers their IDs in the archive's order. */
  private async createImages(items: LoadItem[]): Promise<string[]> {
    const { store, creator } = this.deps;
    const ids = new Array<string>(items.length);
    const order = items.map((_, i) => i).sort((a, b) => items[a]!.layers.length - items[b]!.layers.length);
    for (const i of order) {
      const item = items[i] as LoadItem;
      const parentImage = item.parent ? store.get(item.parent) : undefined;
      const parent = parentImage && validParent(item.config, parentImage.config) ? item.parent : undefined;
      ids[i] = await creator.createImageFromBytes(item.configBytes, parent ? { parent } : {});
    }
    return ids;
  }

  /**
   * Tag as dockerd's tarexport does (a tag that named another image says so), then `Loaded
   * image: name:tag` per tag, or `Loaded image ID: sha256:...` for an image without tags.
   */
  private async tagImages(items: LoadItem[], ids: string[], send: (m: LoadMessage) => void): Promise<void> {
    const { store, refs, events } = this.deps;
    const untagged: string[] = [];
    for (const [i, item] of items.entries()) {
      const id = ids[i] as string;
      if (item.tags.length) {
        await store.locked(async () => {
          for (const ref of item.tags) {
            const key = referenceString(ref);
            const previous = refs.idOf(key);
            if (previous && previous !== id)
              send({
                kind: 'stream',
                text: `The image ${familiarString(ref)} already exists, renaming the old one with ID ${previous} to empty string\n`,
              });
            refs.set(key, id);
          }
          await refs.save();
        });
        for (const ref of item.tags) send({ kind: 'stream', text: `Loaded image: ${familiarString(ref)}\n` });
      } else {
        untagged.push(id);
      }
      events.publish('load', id, id);
    }
    for (const id of untagged) send({ kind: 'stream', text: `Loaded image ID: ${id}\n` });
  }
}
