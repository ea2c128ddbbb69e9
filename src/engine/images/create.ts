import type { ContainerConfig, ImageConfigFile } from '../../common/docker-types.js';
import { invalidParameter, notFound } from '../../common/errors.js';
import { parseNormalizedNamed, type Reference, withTag } from '../../common/reference.js';
import { rfc3339Nano } from '../../common/time.js';
import { chainIds } from '../storage/overlay.snapshotter.js';
import { hostArchitecture, orderedContainerConfig, serializeImageConfig } from './config.js';
import type { LayerCollector } from './gc.js';
import type { ImageStore } from './image.store.js';
import type { CommitOptions } from './images.types.js';
import { addLayer, EMPTY_LAYER_DIFF_ID } from './layers.js';
import { hasDigest } from './references.js';
import type { Tagger } from './tags.js';

/** What creating images asks of the store. */
export type CreatingStore = Pick<
  ImageStore,
  'content' | 'overlay' | 'locked' | 'has' | 'get' | 'add' | 'pin' | 'unpin'
>;

/**
 * Images made here: createImage registers an image from its config once its layers exist (the
 * entry point of import, and of load, pull and build later); commit makes one from a container.
 */
export class ImageCreator {
  constructor(
    private readonly deps: {
      store: CreatingStore;
      tags: Pick<Tagger, 'tagId'>;
      gc: Pick<LayerCollector, 'collect'>;
      /** Written as docker_version into new image configs. */
      engineVersion: string;
    },
  ) {}

  /**
   * Register an image from its config: the layers of its rootfs.diff_ids must exist (NotFound
   * otherwise). The config is stored as moby serialises it; its digest is the ID. An image that
   * exists already is answered as it is. `raw`: the config's bytes as a registry gave them.
   */
  async createImage(config: ImageConfigFile, opts: { parent?: string } = {}): Promise<string> {
    return this.createImageFromBytes(Buffer.from(serializeImageConfig(config)), opts);
  }

  /**
   * createImage from a config's exact bytes (load and pull: the ID is the digest of the bytes the
   * image came with, whatever their JSON form).
   */
  async createImageFromBytes(bytes: Buffer, opts: { parent?: string } = {}): Promise<string> {
    const { store } = this.deps;
    const config = JSON.parse(bytes.toString('utf8')) as ImageConfigFile;
    const chain = chainIds(config.rootfs?.diff_ids ?? []);
    return store.locked(async () => {
      let size = 0;
      for (const c of chain) {
        const layer = await store.overlay.getLayer(c);
        if (!layer) throw notFound(`layer ${c} does not exist`);
        size += layer.size;
      }
      const id = await store.content.put(bytes);
      if (store.has(id)) return id;
      await store.add({
        meta: { id, parent: opts.parent ?? '', added: new Date().toISOString() },
        config,
        chain,
        size,
      });
      return id;
    });
  }

  /**
   * docker commit's image half (moby's CommitImage): the writable snapshot `key` becomes a layer
   * on the parent image's chain (none when the layer is empty), then an image with history and
   * parent; tagged when `repo` is given.
   */
  async commit(o: CommitOptions): Promise<string> {
    const { store } = this.deps;
    let newRef: Reference | undefined;
    if (o.repo) {
      newRef = parseNormalizedNamed(o.repo);
      if (hasDigest(newRef)) throw invalidParameter('refusing to create a tag with a digest reference');
      if (o.tag) newRef = withTag(newRef, o.tag);
    } else if (o.tag) {
      throw invalidParameter('tag is specified without repository');
    }
    const parent = o.parentImageId ? store.get(o.parentImageId) : undefined;
    if (o.parentImageId && !parent) throw notFound(`No such image: ${o.parentImageId}`);
    const parentChain = parent?.chain.length ? (parent.chain[parent.chain.length - 1] as string) : null;
    // a snapshot that changed nothing (a build's metadata step) is an empty layer without a tar
    // read of it, a layer added or a garbage collection of that layer after
    const added = (await store.overlay.diffIsEmpty(o.key))
      ? undefined
      : await addLayer(store, parentChain, store.overlay.diff(o.key));
    const diffId = added?.layer.diffId ?? EMPTY_LAYER_DIFF_ID;
    try {
      const empty = diffId === EMPTY_LAYER_DIFF_ID;
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
        docker_version: this.deps.engineVersion,
        history: [...(base?.history ?? []), history],
        os: base?.os ?? 'linux',
        rootfs: {
          type: 'layers',
          diff_ids: [...(base?.rootfs?.diff_ids ?? []), ...(empty ? [] : [diffId])],
        },
      };
      // moby's NewChildImage: the author at the top, the comment in the history entry only
      if (o.author) config.author = o.author;
      if (base?.variant) config.variant = base.variant;
      if (base?.['os.version']) config['os.version'] = base['os.version'];
      const id = await this.createImage(config, { parent: o.parentImageId ?? '' });
      if (newRef) await this.deps.tags.tagId(id, newRef);
      return id;
    } finally {
      added?.release();
      // an empty layer added from a tar (a snapshot whose changes cancel out) is in no image: it goes
      if (added && diffId === EMPTY_LAYER_DIFF_ID) await this.deps.gc.collect().catch(() => undefined);
    }
  }
}
