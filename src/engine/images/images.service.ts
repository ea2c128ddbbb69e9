/**
 * The image service, composed of focused parts (all in this folder):
 *
 * - image.store.ts   ImageStore: the loaded images and their records, the content store and the
 *                    overlay snapshotter they live in, lookup by ID prefix, the lock, GC pins
 * - references.ts    ReferenceStore: tags and digests, repositories.json, which image a name means
 * - tags.ts          Tagger: docker tag, and tagging for import and commit
 * - layers.ts        addLayer: unpack a layer blob, pinned until its image exists
 * - create.ts        ImageCreator: createImage (an image from a config whose layers exist), commit
 * - import.ts        ImageImporter: docker import from a tarball or a URL
 * - views.ts         ImageViews: records (ImageResolver), inspect, history
 * - list.ts          ImageLister: GET /images/json with filters and shared sizes, layersSize
 * - delete.ts        ImageDeleter: docker rmi with moby's conflict rules
 * - prune.ts         ImagePruner: POST /images/prune
 * - gc.ts            LayerCollector: layers and blobs nothing uses
 * - snapshots.ts     the containers' snapshotter (removing a snapshot may free layers)
 * - archive/         docker save and load: the archive reader (spooled, defensive), its two forms
 *                    (docker save's manifest.json, OCI layouts), the loader, the saver
 * - distribution-metadata.ts  DistributionMetadataStore: layer blob digest <-> diff ID and the
 *                    repositories a layer came from (pull writes it, push reads it)
 * - pull/            ImagePuller: docker pull through the registry client (src/engine/distribution)
 * - push/            Pusher: docker push (layers skipped, mounted or uploaded; config; manifest)
 *
 * Entry points for what comes next: load adds each layer with
 * `addLayer(parent, blob)`, register the image with `createImage(config)` (then release() the
 * layers), and tag it with `tag()`; they keep manifests by extending ImageMeta and
 * LayerCollector.collectBlobs. Build (src/engine/build/) runs containers and calls `commit()`
 * per step, or `addLayer()` + `createImage()` for steps without a container.
 */
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { ImageConfigFile } from '../../common/docker-types.js';
import type { Logger } from '../../common/log.js';
import { RegistryClient } from '../distribution/index.js';
import type { EventsService } from '../events/events.service.js';
import { HostStorageOps, type StorageOps } from '../storage/adapters/host.ops.js';
import type { Snapshotter, SnapshotterExtras } from '../storage/snapshotter.types.js';
import { ImageLoader, type LoadOptions } from './archive/load.js';
import { ArchiveSpool } from './archive/reader.js';
import { ImageSaver } from './archive/save.js';
import { ImageCreator } from './create.js';
import { ImageDeleter } from './delete.js';
import { DistributionMetadataStore } from './distribution-metadata.js';
import { LayerCollector } from './gc.js';
import { ImageEvents } from './image.events.js';
import { ImageStore } from './image.store.js';
import type {
  CommitOptions,
  ImageDeleteItem,
  ImageDetails,
  ImageHistoryItem,
  ImageListItem,
  ImageListOptions,
  ImageRemoveOptions,
  ImageResolver,
  ImageUsers,
  ImportOptions,
  PlatformOption,
  PullOptions,
} from './images.types.js';
import { ImageImporter } from './import.js';
import { addLayer } from './layers.js';
import { ImageLister } from './list.js';
import { ImagePruner } from './prune.js';
import { ImagePuller } from './pull/puller.js';
import { Pusher } from './push/push.js';
import type { PushOptions } from './push/push.types.js';
import { ReferenceStore } from './references.js';
import { containerSnapshotter } from './snapshots.js';
import { Tagger } from './tags.js';
import { ImageViews } from './views.js';

export type { LoadMessage, LoadOptions } from './archive/load.js';
export { parseTimestamp } from './filters.js';
export type { CommitOptions, PullMessage, PullOptions } from './images.types.js';
export { parsePlatform } from './import.js';
export { EMPTY_LAYER_DIFF_ID } from './layers.js';
export type { PushMessage, PushOptions } from './push/push.types.js';

export const DEFAULT_PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The image service: everything the image routes and the other engine services ask of images. */
export interface ImageService extends ImageResolver {
  /** Writable snapshots for containers (prepare on an image's chainId, mount, remove...). */
  readonly snapshotter: Snapshotter & SnapshotterExtras;
  /**
   * `POST /images/create?fromImage=...`: pull from a registry, progress through `onMessage`.
   * Errors thrown before the first message are the answer's status; later ones go in-band.
   */
  pull(opts: PullOptions): Promise<void>;
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
  /**
   * Register an image from its config (its layers must exist already). Used by import and commit;
   * load, pull and build later.
   */
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
  /** With a platform: NotFound unless the image is for it. */
  inspect(name: string, opts?: PlatformOption): Promise<ImageDetails>;
  history(name: string, opts?: PlatformOption): Promise<ImageHistoryItem[]>;
  /** Tag `name` as `repo[:tag]` (tag defaults to latest). */
  tag(name: string, repo: string, tag?: string): Promise<void>;
  remove(name: string, opts?: ImageRemoveOptions): Promise<ImageDeleteItem[]>;
  /** POST /images/prune: filters dangling (default true), label, label!, until. */
  prune(
    filters?: Map<string, string[]>,
  ): Promise<{ ImagesDeleted: ImageDeleteItem[] | null; SpaceReclaimed: number }>;
  /** Remove layers that neither an image nor a writable snapshot uses; returns their chain IDs. */
  collectGarbage(): Promise<string[]>;
  /**
   * docker save: resolve `names` (NotFound, InvalidParameter before anything is written), then
   * the archive as a stream (archive/save.ts).
   */
  saveImages(names: string[], opts?: PlatformOption): Promise<Readable>;
  /** 413 when an upload's declared length is over the load limit (before the body is read). */
  checkLoadSize(length: number | undefined): void;
  /** docker load (archive/load.ts): returns the loaded image IDs; messages as it goes. */
  loadImages(opts: LoadOptions): Promise<string[]>;
  /**
   * POST /images/{name}/push: errors before the first message are the caller's to answer as a
   * status; later ones end the stream.
   */
  push(opts: PushOptions): Promise<void>;
}

export async function createImageService(opts: {
  dataRoot: string;
  events: EventsService;
  log: Logger;
  /** Host adapters (tests may fake them). */
  ops?: StorageOps;
  /** Written as docker_version into new image configs. */
  engineVersion?: string;
  /** The most bytes of files an archive docker load receives may hold (413 beyond; default 64 GiB). */
  loadLimit?: number;
  /** The registry client pulls go through (default: loopback insecure, no mirrors). */
  registry?: RegistryClient;
  /** Layers one pull downloads at once (default 3). */
  maxConcurrentDownloads?: () => number;
  /** Layers one push uploads at once (default 5). */
  maxConcurrentUploads?: () => number;
}): Promise<ImageService> {
  const { log } = opts;
  const engineVersion = opts.engineVersion ?? '0.1.0';
  const ops = opts.ops ?? new HostStorageOps();
  const store = new ImageStore({ dataRoot: opts.dataRoot, ops, log });
  const refs = new ReferenceStore(join(opts.dataRoot, 'image', 'repositories.json'), store);
  const events = new ImageEvents(opts.events, (id) => store.labelsOf(id));
  // The containers service registers itself after start-up (setUsers); until then nobody uses images.
  let currentUsers: ImageUsers = { containersUsing: () => [] };
  const users: ImageUsers = { containersUsing: (id) => currentUsers.containersUsing(id) };

  const gc = new LayerCollector(store, log);
  const tags = new Tagger({ store, refs, events });
  const creator = new ImageCreator({ store, tags, gc, engineVersion });
  const importer = new ImageImporter({ store, creator, tags, events, engineVersion });
  const views = new ImageViews(store, refs);
  const lister = new ImageLister({ store, refs, views, users });
  const deleter = new ImageDeleter({ store, refs, events, users, gc });
  const pruner = new ImagePruner({ store, refs, deleter, events });
  const spool = new ArchiveSpool(join(opts.dataRoot, 'tmp'), opts.loadLimit);
  const loader = new ImageLoader({ store, creator, refs, events, gc, spool });
  const saver = new ImageSaver({ store, refs, events, log });
  const distribution = new DistributionMetadataStore(opts.dataRoot);
  const registry = opts.registry ?? new RegistryClient({ insecureRegistries: ['127.0.0.0/8'], mirrors: [] });
  const puller = new ImagePuller({
    store,
    creator,
    refs,
    events,
    gc,
    meta: distribution,
    client: registry,
    maxConcurrentDownloads: opts.maxConcurrentDownloads ?? (() => 3),
  });
  const pusher = new Pusher({
    store,
    refs,
    meta: distribution,
    events,
    ops,
    registry,
    maxConcurrentUploads: opts.maxConcurrentUploads ?? (() => 5),
    log: log.child('push'),
  });
  const snapshotter = containerSnapshotter({
    overlay: store.overlay,
    usesLayer: (chainId) => store.usesLayer(chainId),
    collectGarbage: () => gc.collect(),
    log,
  });

  // Start-up: images, then the references to them, then what a crash left unused.
  await store.init();
  await distribution.init();
  await refs.load();
  const removed = await gc.collect();
  if (removed.length) log.info('removed unused layers', { count: removed.length });
  await gc.collectBlobs();
  await spool.sweep();

  return {
    snapshotter,
    resolve: (refOrId) => views.resolve(refOrId),
    get: (id) => views.get(id),
    list: () => views.list(),
    setUsers: (u) => {
      currentUsers = u;
    },
    pull: (o) => puller.pull(o),
    importImage: (o) => importer.importImage(o),
    addLayer: async (parent, input) => {
      const { layer, release } = await addLayer(store, parent, input);
      return { chainId: layer.chainId, diffId: layer.diffId, size: layer.size, release };
    },
    createImage: (config, o) => creator.createImage(config, o),
    commit: (o) => creator.commit(o),
    listImages: (o) => lister.listImages(o),
    layersSize: () => lister.layersSize(),
    inspect: (name, o) => views.inspect(name, o),
    history: (name, o) => views.history(name, o),
    tag: (name, repo, tag) => tags.tag(name, repo, tag),
    remove: (name, o) => deleter.remove(name, o),
    prune: (filters) => pruner.prune(filters),
    collectGarbage: () => gc.collect(),
    saveImages: async (names, o) => saver.write(await saver.prepare(names, o?.platform)),
    checkLoadSize: (length) => spool.checkDeclared(length),
    loadImages: (o) => loader.load(o),
    push: (o) => pusher.push(o),
  };
}
