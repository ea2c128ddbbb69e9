import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import tarStream from 'tar-stream';
import { MediaTypes } from '../../../common/docker-types.js';
import { errorMessage, invalidParameter, isKind, notFound, systemError } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import {
  familiarName,
  familiarString,
  fullName,
  parseAnyReference,
  type Reference,
  referenceString,
  tagNameOnly,
} from '../../../common/reference.js';
import { decompress } from '../../storage/layer.apply.js';
import type { LayerRecord } from '../../storage/overlay.snapshotter.js';
import type { ImageEvents } from '../image.events.js';
import type { ImageStore, LoadedImage } from '../image.store.js';
import { hex } from '../image.store.js';
import { formatPlatform, imagePlatform, type OciPlatform, platformMatches } from '../platform.js';
import type { ReferenceStore } from '../references.js';
import { ANNOTATION_IMAGE_NAME, ANNOTATION_REF_NAME, type Descriptor } from './formats.js';
import { goJsonEscape, legacyLayers } from './legacy.js';

/** One image of a save, resolved before anything is written. */
interface SavedImage {
  id: string;
  image: LoadedImage;
  configBytes: Buffer;
  /** Its layers, bottom first. */
  layers: LayerRecord[];
  /** The tags it is saved under (name:tag), in the order they were asked for. */
  tags: Reference[];
}

/** What `prepare` found: stream it with `write`, or `release` it unwritten. */
export interface SaveSet {
  images: SavedImage[];
  release(): void;
}

const EPOCH = new Date(0);

/** Go's json.Encoder: the text and a newline. */
function encoded(value: unknown): string {
  return `${goJsonEscape(JSON.stringify(value))}\n`;
}

function sorted<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * docker save (`GET /images/{name}/get`, `GET /images/get?names=`): the names are resolved as
 * moby's tarexport does (a name alone: every tag of it; name:tag; an ID) before anything is sent
 * (404 then), then the archive is streamed, never staged: each layer's uncompressed tarball once
 * (`blobs/sha256/<diff id>`, decompressed from the kept blob as it goes, its digest checked),
 * dockerd 20.10's legacy directory per layer (`<v1 id>/VERSION`, `json`, `layer.tar` a link to the
 * blob), each config and an OCI manifest under `blobs/sha256/`, then `index.json`,
 * `manifest.json`, `oci-layout` and `repositories`. Events: `save` per image.
 */
export class ImageSaver {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'content' | 'overlay' | 'get' | 'has' | 'pin' | 'unpin'>;
      refs: Pick<ReferenceStore, 'lookup' | 'idOf' | 'byName'>;
      events: ImageEvents;
      log?: Logger;
    },
  ) {}

  /** Resolve the names (NotFound, InvalidParameter) and pin the layers until the archive is written. */
  async prepare(names: string[], platform?: OciPlatform): Promise<SaveSet> {
    const { store, refs } = this.deps;
    const byId = new Map<string, SavedImage>();
    const pinned: string[] = [];
    const release = () => {
      for (const c of pinned.splice(0)) store.unpin(c);
    };
    const add = async (id: string, ref?: Reference) => {
      let saved = byId.get(id);
      if (!saved) {
        const image = store.get(id);
        if (!image) throw notFound(`No such image: ${id}`);
        if (platform && !platformMatches(platform, imagePlatform(image.config)))
          throw notFound(`no suitable export target found for platform ${formatPlatform(platform)}`);
        const layers: LayerRecord[] = [];
        for (const chainId of image.chain) {
          store.pin(chainId);
          pinned.push(chainId);
          const layer = await store.overlay.getLayer(chainId);
          if (!layer) throw notFound(`layer ${chainId} does not exist`);
          const rebuildable = layer.tarSplit && !layer.blob && layer.tarSize !== undefined;
          if (!rebuildable && (!layer.blob || !(await store.content.has(layer.blob.digest))))
            throw systemError(`the layer ${layer.diffId} of image ${id} has no stored tarball to save`);
          layers.push(layer);
        }
        const configBytes = await store.content.get(id);
        saved = { id, image, configBytes, layers, tags: [] };
        byId.set(id, saved);
      }
      if (ref && ref.digest === undefined) {
        const tagged = tagNameOnly(ref);
        if (!saved.tags.some((t) => referenceString(t) === referenceString(tagged))) saved.tags.push(tagged);
      }
    };
    try {
      for (const name of names) {
        const any = parseAnyReference(name);
        if (any.kind === 'id') {
          if (!store.has(any.id)) throw notFound(`No such image: ${name}`);
          await add(any.id);
          continue;
        }
        const ref = any.ref;
        if (familiarName(ref) === 'sha256' || (ref.tag === undefined && ref.digest === undefined)) {
          const named = familiarName(ref) === 'sha256' ? [] : refs.byName(fullName(ref));
          if (named.length) {
            for (const n of named) await add(n.id, n.ref);
            continue;
          }
          const { id } = refs.lookup(name);
          if (!id) throw notFound(`No such image: ${name}`);
          await add(id);
          continue;
        }
        const id = refs.idOf(referenceString(ref.digest !== undefined ? { ...ref, tag: undefined } : ref));
        if (!id || !store.has(id)) throw notFound('reference does not exist');
        await add(id, ref);
      }
    } catch (err) {
      release();
      throw err;
    }
    return { images: [...byId.values()], release };
  }

  /** The archive of a prepared set; its layers are released when it ends or fails. */
  write(set: SaveSet): Readable {
    const pack = tarStream.pack();
    const writing = this.writeEntries(set, pack);
    writing.then(
      () => pack.finalize(),
      (err: Error) => pack.destroy(err),
    );
    const out = Readable.from(pack as AsyncIterable<Buffer>, { objectMode: false });
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      set.release();
    };
    out.on('close', () => {
      release();
      // a reader that left: stop writing (the entries' promises settle with the pack's error)
      if (!pack.destroyed) pack.destroy();
    });
    writing
      .catch((err: unknown) => {
        // the engine's own fault (a stored layer that is not its diff ID), not a reader that left
        if (isKind(err, 'System')) this.deps.log?.error('save failed', { error: errorMessage(err) });
      })
      .finally(release);
    return out;
  }

  private async writeEntries(set: SaveSet, pack: tarStream.Pack): Promise<void> {
    const entry = (
      header: Partial<tarStream.Header> & { name: string },
      body?: string | Buffer,
    ): Promise<void> =>
      new Promise((resolve, reject) => {
        pack.entry({ ...header, uid: 0, gid: 0 } as tarStream.Header, body ?? '', (err) =>
          err ? reject(err) : resolve(),
        );
      });
    const dir = (name: string, mtime: Date) => entry({ name, type: 'directory', mode: 0o755, mtime });
    const file = (name: string, body: string | Buffer, mtime: Date) =>
      entry({ name, type: 'file', mode: 0o644, mtime, size: Buffer.byteLength(body) }, body);

    await dir('blobs/', EPOCH);
    await dir('blobs/sha256/', EPOCH);
    const blobsDone = new Map<string, number>();
    const legacyDone = new Set<string>();
    const manifest: Array<Record<string, unknown>> = [];
    const index: Descriptor[] = [];
    const repositories: Record<string, Record<string, string>> = {};
    for (const saved of set.images) {
      this.deps.events.publish('save', saved.id, saved.id);
      const { config } = saved.image;
      const created = config.created ? new Date(config.created) : EPOCH;
      const mtime = Number.isFinite(created.getTime()) ? created : EPOCH;
      const legacy = legacyLayers(
        config,
        saved.layers.map((l) => l.chainId),
      );
      const layerDescriptors: Descriptor[] = [];
      for (const [i, layer] of saved.layers.entries()) {
        const blobName = `blobs/sha256/${hex(layer.diffId)}`;
        let size = blobsDone.get(layer.diffId);
        if (size === undefined) {
          size = await this.writeLayer(pack, blobName, layer, mtime);
          blobsDone.set(layer.diffId, size);
        }
        layerDescriptors.push({ mediaType: MediaTypes.ociLayer, digest: layer.diffId, size });
        const v1 = legacy[i] as { id: string; json: string };
        if (!legacyDone.has(v1.id)) {
          legacyDone.add(v1.id);
          await dir(`${v1.id}/`, mtime);
          await file(`${v1.id}/VERSION`, '1.0', mtime);
          await file(`${v1.id}/json`, v1.json, mtime);
          await entry({
            name: `${v1.id}/layer.tar`,
            type: 'symlink',
            mode: 0o777,
            mtime,
            linkname: `../${blobName}`,
          });
        }
      }
      const configName = `blobs/sha256/${hex(saved.id)}`;
      if (!blobsDone.has(saved.id)) {
        await file(configName, saved.configBytes, mtime);
        blobsDone.set(saved.id, saved.configBytes.length);
      }
      const manifestBytes = Buffer.from(
        goJsonEscape(
          JSON.stringify({
            schemaVersion: 2,
            mediaType: MediaTypes.ociManifest,
            config: { mediaType: MediaTypes.ociConfig, digest: saved.id, size: saved.configBytes.length },
            layers: layerDescriptors,
          }),
        ),
      );
      const manifestDigest = `sha256:${createHash('sha256').update(manifestBytes).digest('hex')}`;
      if (!blobsDone.has(manifestDigest)) {
        await file(`blobs/sha256/${hex(manifestDigest)}`, manifestBytes, EPOCH);
        blobsDone.set(manifestDigest, manifestBytes.length);
      }
      const descriptor: Descriptor = {
        mediaType: MediaTypes.ociManifest,
        digest: manifestDigest,
        size: manifestBytes.length,
      };
      const top = legacy[legacy.length - 1]?.id;
      for (const ref of saved.tags) {
        const tag = ref.tag as string;
        if (top) {
          const name = familiarName(ref);
          repositories[name] = { ...repositories[name], [tag]: top };
        }
        index.push({
          ...descriptor,
          annotations: { [ANNOTATION_IMAGE_NAME]: referenceString(ref), [ANNOTATION_REF_NAME]: tag },
        });
      }
      if (!saved.tags.length) index.push(descriptor);
      const item: Record<string, unknown> = {
        Config: configName,
        RepoTags: saved.tags.length ? saved.tags.map(familiarString) : null,
        Layers: saved.layers.map((l) => `blobs/sha256/${hex(l.diffId)}`),
      };
      // moby's validatedParentLinks: a parent only when it is saved too
      const parent = saved.image.meta.parent;
      if (parent && set.images.some((s) => s.id === parent)) item.Parent = parent;
      manifest.push(item);
    }
    const indexText = goJsonEscape(
      JSON.stringify({ schemaVersion: 2, mediaType: MediaTypes.ociIndex, manifests: index }),
    );
    await file('index.json', indexText, EPOCH);
    await file('manifest.json', encoded(manifest.length ? manifest : null), EPOCH);
    await file('oci-layout', '{"imageLayoutVersion": "1.0.0"}', EPOCH);
    if (Object.keys(repositories).length) {
      const repos = sorted(Object.fromEntries(Object.entries(repositories).map(([k, v]) => [k, sorted(v)])));
      await file('repositories', encoded(repos), EPOCH);
    }
  }

  /**
   * A layer's uncompressed tarball from its kept blob (decompressed on the way when it was kept
   * compressed; counted first when its record does not know the size). Its digest must be the
   * diff ID: anything else fails the archive. Answers the size.
   */
  private async writeLayer(
    pack: tarStream.Pack,
    name: string,
    layer: LayerRecord,
    mtime: Date,
  ): Promise<number> {
    const { content, overlay } = this.deps.store;
    const blob = layer.blob;
    // no blob kept (a pulled layer): the tarball rebuilt from its tar-split record and files
    const bytes = (): AsyncIterable<Buffer> =>
      !blob
        ? (overlay.rebuiltTar(layer) as AsyncIterable<Buffer>)
        : blob.compression === 'none'
          ? (content.open(blob.digest) as AsyncIterable<Buffer>)
          : decompress(content.open(blob.digest) as AsyncIterable<Buffer>, overlay.ops, () => undefined);
    let size = blob?.compression === 'none' ? blob.size : layer.tarSize;
    if (size === undefined) {
      size = 0;
      for await (const chunk of bytes()) size += chunk.length;
    }
    const hash = createHash('sha256');
    let written = 0;
    await new Promise<void>((resolve, reject) => {
      const sink = pack.entry({ name, type: 'file', mode: 0o644, mtime, size, uid: 0, gid: 0 }, (err) =>
        err ? reject(err) : resolve(),
      );
      // its failure is the entry callback's (an emitter without a listener would throw)
      sink.on('error', () => undefined);
      (async () => {
        for await (const chunk of bytes()) {
          hash.update(chunk);
          written += chunk.length;
          if (written > (size as number))
            throw systemError(`layer ${layer.diffId} changed while it was saved`);
          if (!sink.write(chunk))
            await new Promise<void>((r) => {
              const done = () => {
                sink.off('drain', done);
                sink.off('close', done);
                r();
              };
              sink.on('drain', done);
              sink.on('close', done);
            });
          if (sink.destroyed) throw invalidParameter('the archive was abandoned');
        }
        const digest = `sha256:${hash.digest('hex')}`;
        if (written !== size || digest !== layer.diffId)
          throw systemError(`layer ${layer.diffId} is corrupt: its stored tarball hashes to ${digest}`);
        (sink as unknown as NodeJS.WritableStream).end();
      })().catch((err: Error) => {
        sink.destroy(err);
        reject(err);
      });
    });
    return size;
  }
}
