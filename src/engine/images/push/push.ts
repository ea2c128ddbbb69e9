import { setTimeout as sleep } from 'node:timers/promises';
import { MediaTypes } from '../../../common/docker-types.js';
import { errorMessage, invalidParameter, isKind, notFound, unauthorized } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
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
  HUB_DOMAIN,
  hasCredentials,
  NetworkError,
  type RegistryClient,
  type RepositorySession,
} from '../../distribution/index.js';
import { mountBlob, putBlob, putManifest, statBlob, uploadBlob } from '../../distribution/upload.js';
import type { StorageOps } from '../../storage/adapters/host.ops.js';
import type { LayerRecord } from '../../storage/overlay.snapshotter.js';
import type { DistributionMetadataStore } from '../distribution-metadata.js';
import type { ImageEvents } from '../image.events.js';
import type { ImageStore } from '../image.store.js';
import type { ReferenceStore } from '../references.js';
import { layerBlob, shortLayerId } from './layer-blob.js';
import type { PushMessage, PushOptions } from './push.types.js';

/** A layer as the manifest lists it. */
interface PushedLayer {
  mediaType: string;
  size: number;
  digest: string;
}

/** Mount attempts per layer, as moby bounds them (getMaxMountAndExistenceCheckAttempts). */
const MAX_MOUNT_ATTEMPTS = 3;
/** Upload attempts per layer, and the seconds before the first retry (moby's upload manager). */
const MAX_UPLOAD_ATTEMPTS = 5;
const RETRY_SECONDS = 5;
/** Progress updates of one layer at most this often (bytes), as moby's progress reader. */
const PROGRESS_EVERY = 512 * 1024;

export interface PusherDeps {
  store: Pick<ImageStore, 'get' | 'content' | 'overlay' | 'locked' | 'labelsOf'>;
  refs: ReferenceStore;
  /** diff ID <-> blob digests and the repositories holding them (dockerd's v2 metadata). */
  meta: DistributionMetadataStore;
  events: ImageEvents;
  ops: StorageOps;
  registry: RegistryClient;
  maxConcurrentUploads: () => number;
  log: Logger;
}

/** A tiny counting semaphore: `tryAcquire` for the Waiting decision, `acquire` to wait. */
class Slots {
  private waiters: Array<() => void> = [];
  constructor(private free: number) {}
  tryAcquire(): boolean {
    if (this.free > 0) {
      this.free--;
      return true;
    }
    return false;
  }
  acquire(): Promise<void> {
    if (this.tryAcquire()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free++;
  }
}

/**
 * `docker push` (moby's distribution.Push with the v2 pusher): for each tag of the repository
 * (or the one asked for), the image's layers are sent (at most maxConcurrentUploads at once):
 * skipped when the registry has them (HEAD of a digest known for the layer), mounted from
 * another repository of the same registry the engine knows holds them, uploaded otherwise; then
 * the config and the manifest (Docker schema 2). Progress as dockerd words it.
 */
export class Pusher {
  constructor(private readonly deps: PusherDeps) {}

  async push(opts: PushOptions): Promise<void> {
    let ref = parseNormalizedNamed(opts.name);
    if (ref.digest !== undefined && !opts.tag) throw invalidParameter('cannot push a digest reference');
    if (opts.tag) ref = withTag({ ...ref, digest: undefined }, opts.tag);
    const repo: Reference = { domain: ref.domain, path: ref.path };
    const say = opts.onMessage;
    say({ kind: 'status', status: `The push refers to repository [${fullName(repo)}]` });

    const associations = this.deps.refs.byName(fullName(repo));
    if (!associations.length)
      throw notFound(`An image does not exist locally with the tag: ${familiarName(repo)}`);
    if (repo.domain === HUB_DOMAIN)
      throw notFound(
        `push to ${familiarName(repo)} is not possible: there is no Docker Hub here; tag the image with a registry's host:port (docker tag ${familiarName(repo)} <host:port>/${familiarName(repo)})`,
      );

    let targets: Array<{ tag: string; id: string }>;
    if (ref.tag !== undefined) {
      const id = this.deps.refs.idOf(referenceString(ref));
      if (!id) throw notFound(`tag does not exist: ${familiarString(ref)}`);
      targets = [{ tag: ref.tag, id }];
    } else {
      targets = associations
        .filter((a) => a.ref.tag !== undefined)
        .map((a) => ({ tag: a.ref.tag as string, id: a.id }));
      if (!targets.length)
        throw notFound(`An image does not exist locally with the tag: ${familiarName(repo)}`);
    }

    const client = this.deps.registry;
    const endpoints = await client.endpoints(repo.domain, familiarName(repo));
    const session = await client.open(endpoints, repo.path, opts.auth, ['pull', 'push'], opts.signal);
    // layers this push sent or found, by diff ID: a second tag of the same image says "already exists"
    const remote = new Map<string, PushedLayer>();
    try {
      for (const t of targets) await this.pushTag(session, repo, t.tag, t.id, remote, opts);
    } catch (err) {
      // a Basic registry and nothing to answer it with: dockerd's words
      if (isKind(err, 'Unauthorized') && !hasCredentials(opts.auth)) {
        const { challenges } = await client.ping(session.endpoint).catch(() => ({ challenges: [] }));
        if (challenges.some((c) => c.scheme === 'basic') && !challenges.some((c) => c.scheme === 'bearer'))
          throw unauthorized('no basic auth credentials');
      }
      throw err;
    }
    // moby's LogImageEvent: the reference as given, the repository as name, the labels of the
    // image the reference names (when it names one: `name` alone means `name:latest`)
    const named = this.deps.refs.lookup(familiarString(ref)).id;
    const labels = named ? this.deps.store.labelsOf(named) : {};
    this.deps.events.publish('push', familiarString(ref), familiarName(repo), labels);
  }

  private async pushTag(
    session: RepositorySession,
    repo: Reference,
    tag: string,
    id: string,
    remote: Map<string, PushedLayer>,
    opts: PushOptions,
  ): Promise<void> {
    const { store } = this.deps;
    const image = store.get(id);
    if (!image) throw notFound(`No such image: ${id}`);
    const configBytes = await store.content.get(id);
    const layers: LayerRecord[] = [];
    for (const chainId of image.chain) {
      const l = await store.overlay.getLayer(chainId);
      if (!l) throw notFound(`layer ${chainId} of image ${id} does not exist`);
      layers.push(l);
    }
    // moby lists the descriptors top layer first: Preparing and the uploads go in that order
    const topFirst = [...layers].reverse();
    const say = opts.onMessage;
    const unique = new Map<string, LayerRecord>();
    for (const l of topFirst) {
      say({ kind: 'layer', id: shortLayerId(l.diffId), status: 'Preparing' });
      if (!unique.has(l.diffId)) unique.set(l.diffId, l);
    }
    const slots = new Slots(Math.max(1, this.deps.maxConcurrentUploads()));
    const inner = new AbortController();
    const onAbort = () => inner.abort(opts.signal?.reason);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const jobs = new Map<string, Promise<PushedLayer>>();
    let firstError: unknown;
    for (const l of unique.values()) {
      const started = slots.tryAcquire();
      if (!started) say({ kind: 'layer', id: shortLayerId(l.diffId), status: 'Waiting' });
      const job = (async () => {
        if (!started) await slots.acquire();
        try {
          if (inner.signal.aborted) throw inner.signal.reason ?? new Error('push cancelled');
          return await this.pushLayer(session, repo, l, remote, say, inner.signal);
        } finally {
          slots.release();
        }
      })();
      // the first failure stops the others; it is the one reported, not their aborts
      job.catch((err) => {
        if (!inner.signal.aborted) firstError ??= err;
        inner.abort();
      });
      jobs.set(l.diffId, job);
    }
    let pushed: Map<string, PushedLayer>;
    try {
      const results = await Promise.allSettled(jobs.values());
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw firstError ?? (failed as PromiseRejectedResult).reason;
      pushed = new Map(
        [...jobs.keys()].map((k, i) => [k, (results[i] as PromiseFulfilledResult<PushedLayer>).value]),
      );
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
    }

    const configDesc = await putBlob(session, configBytes, opts.signal);
    // Docker schema 2, as dockerd pushes; an OCI manifest when a layer is one only OCI can name (zstd)
    const oci = [...pushed.values()].some((p) => p.mediaType === MediaTypes.ociLayerZstd);
    const manifestType = oci ? MediaTypes.ociManifest : MediaTypes.dockerManifest;
    const manifest = {
      schemaVersion: 2,
      mediaType: manifestType,
      config: {
        mediaType: oci ? MediaTypes.ociConfig : MediaTypes.dockerConfig,
        size: configDesc.size,
        digest: configDesc.digest,
      },
      layers: layers.map((l) => {
        const p = pushed.get(l.diffId) as PushedLayer;
        const mediaType =
          oci && p.mediaType === MediaTypes.dockerLayer ? MediaTypes.ociLayerGzip : p.mediaType;
        return { mediaType, size: p.size, digest: p.digest };
      }),
    };
    // distribution's schema2 manifests are indented with three spaces
    const bytes = Buffer.from(JSON.stringify(manifest, null, 3));
    const digest = await putManifest(session, tag, manifestType, bytes, opts.signal);
    say({ kind: 'status', status: `${tag}: digest: ${digest} size: ${bytes.length}` });
    say({ kind: 'aux', tag, digest, size: bytes.length });
    // the pushed manifest's digest becomes a RepoDigest of the image, as dockerd records it
    await store.locked(async () => {
      if (!store.get(id)) return;
      this.deps.refs.set(referenceString(withDigest(repo, digest)), id);
      await this.deps.refs.save();
    });
  }

  /** One layer: already there, mounted, or uploaded. */
  private async pushLayer(
    session: RepositorySession,
    repo: Reference,
    layer: LayerRecord,
    remote: Map<string, PushedLayer>,
    say: (m: PushMessage) => void,
    signal: AbortSignal,
  ): Promise<PushedLayer> {
    const id = shortLayerId(layer.diffId);
    const target = fullName(repo);
    const done = remote.get(layer.diffId);
    if (done) {
      say({ kind: 'layer', id, status: 'Layer already exists' });
      return done;
    }
    const { meta, store } = this.deps;
    const blob = layerBlob(
      {
        content: store.content,
        ops: this.deps.ops,
        diffDir: async (chainId) => (await store.overlay.layerPaths(chainId)).UpperDir,
        rebuiltTar: (l) => store.overlay.rebuiltTar(l),
      },
      layer,
    );
    const mediaType = blob.mediaType;
    // the blobs the engine knows for this layer: the kept gzip blob, then what pull and push
    // recorded (most recent first), each with the repositories holding it
    const known = new Map<string, string[]>();
    if (blob.kept) known.set(blob.kept.digest, []);
    for (const s of (await meta.sourcesOf(layer.diffId)).reverse()) {
      const repos = known.get(s.digest) ?? [];
      repos.push(s.sourceRepository);
      known.set(s.digest, repos);
    }

    const finish = async (d: PushedLayer, status: string): Promise<PushedLayer> => {
      say({ kind: 'layer', id, status });
      remote.set(layer.diffId, d);
      await meta.record(layer.diffId, d.digest, target);
      return d;
    };

    // 1. already in the target repository? (HEAD the kept blob and the newest recorded ones)
    for (const digest of [...known.keys()].slice(0, 2)) {
      const size = await statBlob(session, digest, signal);
      if (size !== undefined && size >= 0) return finish({ mediaType, digest, size }, 'Layer already exists');
    }

    // 2. mount from another repository of the same registry
    let location: string | undefined;
    let attempts = 0;
    mounting: for (const [digest, repos] of known) {
      for (const source of repos) {
        if (attempts >= MAX_MOUNT_ATTEMPTS) break mounting;
        let from: Reference;
        try {
          from = parseNormalizedNamed(source);
        } catch {
          continue;
        }
        if (from.domain !== repo.domain || from.path === repo.path) continue;
        attempts++;
        try {
          const r = await mountBlob(session, digest, from.path, signal);
          if (r.mounted) {
            const size = await statBlob(session, digest, signal);
            if (size !== undefined && size >= 0)
              return finish({ mediaType, digest, size }, `Mounted from ${from.path}`);
            continue;
          }
          location = r.location;
          break mounting;
        } catch (err) {
          if (signal.aborted) throw err;
          this.deps.log.debug('mount failed', { from: source, digest, error: errorMessage(err) });
        }
      }
    }

    // 3. upload
    const total = blob.progressTotal;
    let last = -Infinity;
    let lastAt = 0;
    const progress = (n: number) => {
      const now = Date.now();
      if (n - last >= PROGRESS_EVERY || now - lastAt >= 100) {
        last = n;
        lastAt = now;
        say({ kind: 'layer', id, status: 'Pushing', current: n, total });
      }
    };
    let sent: { digest: string; size: number };
    for (let attempt = 1; ; attempt++) {
      try {
        last = -Infinity;
        sent = await uploadBlob(session, blob.read(progress), {
          signal,
          location,
          expected: blob.kept?.digest,
          // a layer compressed on the way goes in one streamed PATCH; a kept blob in chunks
          stream: !blob.kept,
        });
        break;
      } catch (err) {
        // moby's upload manager: a dropped connection or a registry's 5xx is tried again (five
        // attempts), after attempt×5 seconds counted down; the registry's 4xx answers are final
        const retryable = err instanceof NetworkError || isKind(err, 'Unavailable');
        if (signal.aborted || !retryable || attempt >= MAX_UPLOAD_ATTEMPTS) {
          if (err instanceof NetworkError) throw invalidParameter(err.message);
          throw err;
        }
        this.deps.log.warn('upload failed, retrying', { layer: layer.diffId, error: errorMessage(err) });
        location = undefined;
        for (let left = attempt * RETRY_SECONDS; left > 0; left--) {
          say({ kind: 'layer', id, status: `Retrying in ${left} second${left === 1 ? '' : 's'}` });
          await sleep(1000, undefined, { signal });
        }
      }
    }
    return finish({ mediaType, digest: sent.digest, size: sent.size }, 'Pushed');
  }
}
