import { isDigest } from '../../../common/digest.js';
import type { ImageConfigFile } from '../../../common/docker-types.js';
import { BerthError, invalidParameter, isBerthError, notFound, unavailable } from '../../../common/errors.js';
import {
  familiarName,
  familiarString,
  fullName,
  parseNormalizedNamed,
  type Reference,
  referenceString,
  withDigest,
  withTag,
} from '../../../common/reference.js';
import {
  type AuthConfig,
  choosePlatform,
  decodeAuthHeader,
  describeRegistryError,
  type FetchedManifest,
  type ImageManifest,
  NetworkError,
  type RegistryClient,
  type RepositorySession,
  registryDetail,
  type Schema1Layer,
  schema1Config,
  schema1Layers,
} from '../../distribution/index.js';
import type { LayerProducer } from '../../storage/layer.types.js';
import { chainIdOf } from '../../storage/overlay.snapshotter.js';
import { UNPACK_THREAD_FROM, warmUnpackThreads } from '../../storage/unpack.thread.js';
import type { ImageCreator } from '../create.js';
import type { DistributionMetadataStore } from '../distribution-metadata.js';
import type { LayerCollector } from '../gc.js';
import type { ImageEvents } from '../image.events.js';
import type { ImageStore } from '../image.store.js';
import type { PullOptions } from '../images.types.js';
import { parsePlatform } from '../import.js';
import { addLayer } from '../layers.js';
import { formatPlatform, type OciPlatform, platformMatches, platformRank } from '../platform.js';
import type { ReferenceStore } from '../references.js';
import { Limiter } from './limiter.js';
import { PullProgress, shortId } from './progress.js';

export interface PullerDeps {
  store: Pick<ImageStore, 'content' | 'overlay' | 'pin' | 'unpin' | 'locked' | 'has' | 'get'>;
  creator: Pick<ImageCreator, 'createImageFromBytes'>;
  refs: ReferenceStore;
  events: ImageEvents;
  gc: Pick<LayerCollector, 'collect'>;
  meta: DistributionMetadataStore;
  client: RegistryClient;
  /** Layers fetched at once (`--max-concurrent-downloads`), read at each pull (a reload may change it). */
  maxConcurrentDownloads: () => number;
  /**
   * Keep each pulled layer's compressed blob in the content store (default: no, as dockerd).
   * Without it a push to another registry (and docker save) rebuilds the layer's exact tarball
   * from the tar-split record kept beside the layer and gzips it again.
   */
  keepBlobs?: boolean;
}

/** One layer to have, bottom first. */
interface LayerPlan {
  digest: string;
  size?: number;
  /** Known up front for schema 2 (from the config); found by download for schema 1. */
  diffId?: string;
  /** A schema 1 throwaway entry: no layer at all. */
  empty?: boolean;
}

/** What one pulled manifest gave. */
interface PulledOne {
  id: string;
  manifestDigest: string;
  /** The reference asked for names a different image than before (dockerd's tagUpdated). */
  updated: boolean;
}

/**
 * docker pull (`POST /images/create?fromImage=`): manifests negotiated (an index narrowed to the
 * platform), the config, then the layers fetched `maxConcurrentDownloads` at a time and unpacked
 * while they download (each verified against its digest as it streams, committed once the layer
 * below it is), layers the store has skipped (`Already exists`). Nothing half-done stays after a
 * failure or a client that went away: layers of the failed pull are unpinned and collected.
 * Progress in dockerd's message form; errors before the first message are thrown (the route
 * answers them as HTTP statuses), later ones too (the route writes them in-band).
 */
export class ImagePuller {
  constructor(private readonly deps: PullerDeps) {}

  async pull(o: PullOptions): Promise<void> {
    let ref = parseNormalizedNamed(o.image);
    if (o.tag) {
      ref = isDigest(o.tag) ? withDigest({ ...ref, tag: undefined }, o.tag) : withTag(ref, o.tag);
    }
    const want = parsePlatform(o.platform) as OciPlatform;
    const creds = decodeAuthHeader(o.registryAuth);
    const progress = new PullProgress(o.onMessage);
    const signal = o.signal;
    const session = await this.open(ref, creds, signal);

    if (ref.tag === undefined && ref.digest === undefined) {
      // docker pull --all-tags: every tag of the repository, one after the other
      let tags: string[];
      try {
        tags = await session.tags(signal);
      } catch (err) {
        throw translate(err, ref);
      }
      if (!tags.length) throw notFound(`repository ${familiarName(ref)} not found: no tags`);
      let downloaded = false;
      for (const tag of tags) {
        const one = await this.pullOne(
          session,
          withTag(ref, tag),
          want,
          o.platform !== undefined,
          progress,
          signal,
        );
        downloaded ||= one.updated;
      }
      this.deps.events.publish('pull', familiarName(ref), familiarName(ref), {});
      progress.status(statusLine(downloaded, familiarName(ref)));
      return;
    }
    const one = await this.pullOne(session, ref, want, o.platform !== undefined, progress, signal);
    // dockerd's pull event: the reference as actor and name, the image's labels beside
    const labels = { ...(this.deps.store.get(one.id)?.config.config?.Labels ?? {}) };
    this.deps.events.publish('pull', familiarString(ref), familiarName(ref), labels);
    progress.status(statusLine(one.updated, familiarString(ref)));
  }

  /** The repository on the first endpoint that answers (mirrors for docker.io names). */
  private async open(ref: Reference, creds: AuthConfig, signal?: AbortSignal): Promise<RepositorySession> {
    try {
      const endpoints = await this.deps.client.endpoints(ref.domain, familiarName(ref));
      return await this.deps.client.open(endpoints, ref.path, creds, ['pull'], signal);
    } catch (err) {
      throw translate(err, ref);
    }
  }

  private async pullOne(
    session: RepositorySession,
    ref: Reference,
    want: OciPlatform,
    platformGiven: boolean,
    progress: PullProgress,
    signal?: AbortSignal,
  ): Promise<PulledOne> {
    const reference = ref.digest ?? ref.tag ?? 'latest';
    let fetched: FetchedManifest;
    try {
      fetched = await session.manifest(reference, signal);
    } catch (err) {
      throw translate(err, ref);
    }
    progress.status(`Pulling from ${ref.path}`, ref.digest ?? ref.tag);
    const manifestDigest = fetched.digest;
    if (fetched.kind === 'index') {
      const entry = choosePlatform(fetched.index, (p) => platformRank(want, p), formatPlatform(want));
      try {
        fetched = await session.manifest(entry.digest, signal);
      } catch (err) {
        throw translate(err, ref);
      }
      if (fetched.kind === 'index') throw invalidParameter('a manifest list names another manifest list');
    }
    const result =
      fetched.kind === 'manifest'
        ? await this.pullSchema2(session, ref, fetched.manifest, progress, signal)
        : await this.pullSchema1(session, ref, schema1Layers(fetched.schema1), progress, signal);
    const image = this.deps.store.get(result.id);
    if (platformGiven && image) {
      const have: OciPlatform = { os: image.config.os ?? '', architecture: image.config.architecture ?? '' };
      if (image.config.variant) have.variant = image.config.variant;
      if (!platformMatches(want, have))
        throw notFound(
          `image with reference ${familiarString(ref)} was found but does not match the specified platform: wanted ${formatPlatform(want)}, actual: ${formatPlatform(have)}`,
        );
    }
    // the tag (or the digest asked for) and the digest reference (RepoDigests); as dockerd,
    // "Downloaded newer image" means the reference asked for did not name this image before
    const digestRef = referenceString(withDigest({ ...ref, tag: undefined }, manifestDigest));
    const asked = ref.tag !== undefined ? referenceString(ref) : digestRef;
    let updated = false;
    await this.deps.store.locked(async () => {
      if (!this.deps.store.has(result.id)) throw notFound(`image ${result.id} went away during the pull`);
      updated = this.deps.refs.idOf(asked) !== result.id;
      if (ref.tag !== undefined) this.deps.refs.set(asked, result.id);
      this.deps.refs.set(digestRef, result.id);
      await this.deps.refs.save();
    });
    progress.status(`Digest: ${manifestDigest}`);
    return { id: result.id, manifestDigest, updated };
  }

  private async pullSchema2(
    session: RepositorySession,
    ref: Reference,
    manifest: ImageManifest,
    progress: PullProgress,
    signal?: AbortSignal,
  ): Promise<{ id: string; downloaded: boolean }> {
    const id = manifest.config.digest;
    // an image the store has already: nothing to fetch (dockerd says nothing of its layers)
    if (this.deps.store.has(id)) return { id, downloaded: false };
    let raw: Buffer;
    try {
      raw = await session.blobBytes(id, signal);
    } catch (err) {
      throw translate(err, ref);
    }
    let config: ImageConfigFile;
    try {
      config = JSON.parse(raw.toString('utf8')) as ImageConfigFile;
    } catch {
      throw invalidParameter(`the image config ${id} is not JSON`);
    }
    if (config.os && config.os !== 'linux')
      throw invalidParameter(`image operating system "${config.os}" cannot be used on this platform`);
    const diffIds = config.rootfs?.diff_ids ?? [];
    if (diffIds.length !== manifest.layers.length)
      throw invalidParameter("layers from manifest don't match image configuration");
    const plan: LayerPlan[] = manifest.layers.map((l, i) => ({
      digest: l.digest,
      size: l.size,
      diffId: diffIds[i] as string,
    }));
    return this.pullLayers(session, ref, plan, progress, signal, async () =>
      this.deps.creator.createImageFromBytes(raw),
    );
  }

  private async pullSchema1(
    session: RepositorySession,
    ref: Reference,
    layers: Schema1Layer[],
    progress: PullProgress,
    signal?: AbortSignal,
  ): Promise<{ id: string; downloaded: boolean }> {
    const plan: LayerPlan[] = [];
    for (const l of layers) {
      plan.push({
        digest: l.blobSum,
        empty: l.throwaway,
        diffId: l.throwaway ? undefined : await this.deps.meta.diffIdOf(l.blobSum),
      });
    }
    return this.pullLayers(session, ref, plan, progress, signal, async (found) => {
      const raw = schema1Config(layers, found);
      return this.deps.creator.createImageFromBytes(raw);
    });
  }

  /**
   * Have every layer of `plan` (skipping the chains the store has), then make the image with
   * `create(diffIds)`; on any failure abort the other downloads, drop what this pull added, and
   * throw the first error.
   */
  private async pullLayers(
    session: RepositorySession,
    ref: Reference,
    plan: LayerPlan[],
    progress: PullProgress,
    outer: AbortSignal | undefined,
    create: (diffIds: string[]) => Promise<string>,
  ): Promise<{ id: string; downloaded: boolean }> {
    const store = this.deps.store;
    const overlay = store.overlay;
    const controller = new AbortController();
    const onOuter = () => controller.abort(outer?.reason ?? new Error('the client went away'));
    if (outer?.aborted) onOuter();
    outer?.addEventListener('abort', onOuter, { once: true });
    const signal = controller.signal;
    const pinned: string[] = [];
    const limiter = new Limiter(Math.max(1, this.deps.maxConcurrentDownloads()));
    const tasks: Array<Promise<unknown>> = [];
    let downloaded = false;
    let firstError: unknown;
    const fail = (err: unknown) => {
      firstError ??= err;
      if (!signal.aborted) controller.abort(err);
    };
    const layers = plan.filter((l) => !l.empty);
    const diffIds: Array<string | undefined> = layers.map((l) => l.diffId);
    try {
      // the chains the store has already, bottom up (a known schema 1 blob has its diff ID)
      let parent: string | null = null;
      let have = 0;
      for (const l of layers) {
        if (!l.diffId) break;
        const chain = chainIdOf(parent, l.diffId);
        store.pin(chain);
        pinned.push(chain);
        if (!(await overlay.getLayer(chain))) break;
        parent = chain;
        have++;
      }
      const repository = fullName(ref);
      for (let i = 0; i < have; i++) {
        const l = layers[i] as LayerPlan;
        progress.layer(shortId(l.digest), 'Already exists');
        // this repository has the layer too (push mounts from the repositories it knows)
        if (l.diffId) await this.deps.meta.record(l.diffId, l.digest, repository).catch(() => undefined);
      }
      // large layers unpack on worker threads: start them while the first downloads begin
      const large = layers
        .slice(have)
        .filter((l) => l.size !== undefined && l.size >= UNPACK_THREAD_FROM).length;
      if (large && !this.deps.keepBlobs)
        warmUnpackThreads(Math.min(large, this.deps.maxConcurrentDownloads()));
      let below: Promise<string | null> = Promise.resolve(parent);
      for (let i = have; i < layers.length; i++) {
        const l = layers[i] as LayerPlan;
        progress.layer(shortId(l.digest), 'Pulling fs layer');
      }
      for (let i = have; i < layers.length; i++) {
        const l = layers[i] as LayerPlan;
        const sid = shortId(l.digest);
        if (limiter.full) progress.layer(sid, 'Waiting');
        const parentOf = below;
        const committed = (async (): Promise<string> => {
          const release = await limiter.acquire(signal);
          let slot = true;
          let complete = false;
          let received = 0;
          let blob: AsyncGenerator<Buffer> | undefined;
          let produced: Promise<void> | undefined;
          const free = () => {
            if (slot) {
              slot = false;
              release();
            }
          };
          const reading = {
            signal,
            onBytes: (n: number) => {
              received = n;
              progress.bytes(sid, 'Downloading', n, l.size);
            },
          };
          const downloadDone = () => {
            complete = true;
            free();
            progress.layer(sid, 'Verifying Checksum');
            progress.layer(sid, 'Download complete');
          };
          try {
            let input: AsyncIterable<Buffer> | LayerProducer;
            if (!this.deps.keepBlobs && l.size !== undefined && l.size >= UNPACK_THREAD_FROM) {
              // a large layer: its blob is written into the unpacker as it comes off the socket
              // (the client reads on for the digest when the unpacker gives up first)
              input = {
                produce: async (sink) => {
                  produced = session.blobTo(l.digest, l.size, sink, reading);
                  await produced;
                  downloadDone();
                },
              };
            } else {
              const source = session.blob(l.digest, l.size, reading);
              blob = source;
              input = (async function* () {
                for (;;) {
                  const r = await source.next();
                  if (r.done) break;
                  yield r.value;
                }
                downloadDone();
              })();
            }
            const { layer, release: unpin } = await addLayer(store, parentOf, input, undefined, {
              expectDiffId: l.diffId,
              verifiedDigest: l.digest,
              keepBlob: this.deps.keepBlobs ?? false,
              sizeHint: l.size,
            });
            pinned.push(layer.chainId);
            store.pin(layer.chainId);
            unpin();
            diffIds[i] = layer.diffId;
            downloaded = true;
            await this.deps.meta.record(layer.diffId, l.digest, repository).catch(() => undefined);
            const size = layer.blob?.size ?? l.size ?? received;
            progress.bytes(sid, 'Extracting', size, size, true);
            progress.layer(sid, 'Pull complete');
            return layer.chainId;
          } catch (err) {
            // the unpacker gave up before the download ended (the bytes are no layer): read on,
            // so that a corrupt download is reported as dockerd reports it, by its digest
            let cause: unknown;
            if (blob && !complete && !signal.aborted) {
              try {
                while (!(await blob.next()).done);
              } catch (e) {
                cause = e;
              }
            }
            // a producer reads on by itself once the unpacker gave up: its end says the same
            if (produced && !signal.aborted) await produced.catch((e: unknown) => (cause = e));
            const e = isBerthError(cause) && /verification failed/.test(cause.message) ? cause : err;
            fail(e);
            throw e;
          } finally {
            free();
          }
        })();
        committed.catch(() => undefined);
        tasks.push(committed);
        below = committed;
      }
      await Promise.allSettled(tasks);
      if (firstError !== undefined || signal.aborted) throw firstError ?? signal.reason;
      const id = await create(diffIds as string[]);
      return { id, downloaded };
    } catch (err) {
      fail(err);
      await Promise.allSettled(tasks);
      throw translateLayerError(firstError ?? err, ref, outer);
    } finally {
      outer?.removeEventListener('abort', onOuter);
      for (const c of pinned) store.unpin(c);
      if (firstError !== undefined) await this.deps.gc.collect().catch(() => undefined);
    }
  }
}

function statusLine(downloaded: boolean, name: string): string {
  return downloaded
    ? `Status: Downloaded newer image for ${name}`
    : `Status: Image is up to date for ${name}`;
}

/** A layer step's failure as the pull reports it (a cancelled pull says so). */
function translateLayerError(err: unknown, ref: Reference, outer?: AbortSignal): unknown {
  if (outer?.aborted) return invalidParameter('the client went away: pull cancelled');
  return translate(err, ref);
}

/**
 * A registry's answer as dockerd's translatePullError words it: a missing manifest or
 * repository, or access denied, is NotFound with dockerd's text; a failure to connect names the
 * URL as Go's client prints it, as a 503 (the registry is unavailable; dockerd answers 500, which
 * berth keeps for its own faults: the CLI prints the same message either way), as login does.
 */
export function translate(err: unknown, ref: Reference): unknown {
  if (err instanceof NetworkError) return unavailable(err.message);
  const d = registryDetail(err);
  if (!d) return err;
  const code = d.errors[0]?.code ?? '';
  const text = describeRegistryError(d);
  if (code === 'MANIFEST_UNKNOWN' || (d.status === 404 && code === ''))
    return notFound(`manifest for ${familiarString(ref)} not found: ${text}`, d);
  if (code === 'NAME_UNKNOWN') return notFound(`repository ${familiarName(ref)} not found: ${text}`, d);
  // no read access is a 404 for dockerd too (its notFoundError): the repository may not exist
  if (code === 'DENIED')
    return new BerthError(
      'NotFound',
      `pull access denied for ${familiarName(ref)}, repository does not exist or may require 'docker login': ${d.errors[0]?.message ?? 'requested access to the resource is denied'}`,
      d,
    );
  if (isBerthError(err)) return err;
  return err;
}
