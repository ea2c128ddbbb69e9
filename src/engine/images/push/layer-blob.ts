import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { MediaTypes } from '../../../common/docker-types.js';
import { invalidParameter, systemError } from '../../../common/errors.js';
import type { StorageOps } from '../../storage/adapters/host.ops.js';
import type { ContentStore } from '../../storage/content.store.js';
import { decompress } from '../../storage/layer.apply.js';
import { exportDiff } from '../../storage/layer.export.js';
import type { LayerRecord } from '../../storage/overlay.snapshotter.js';
import { toBuffers } from '../layers.js';
import { parallelGzip } from './gzip.js';

/**
 * A layer as push sends it: gzip-compressed. The blob kept at import or pull is sent as it is
 * when it is gzip (same digest as it came with) or zstd (an OCI layer); otherwise its tar (the kept blob uncompressed,
 * or, when no blob was kept, the tarball rebuilt from the layer's tar-split record and files, or
 * for a layer without a record exported from its snapshot; either checked against its diff ID)
 * is compressed while it is read, so nothing is staged on disk.
 */
export interface LayerBlob {
  diffId: string;
  /** Its media type: gzip (Docker's), or OCI's zstd for a kept zstd blob (sent as it is). */
  mediaType: string;
  /** The kept gzip blob: its digest and size are known before reading anything. */
  kept?: { digest: string; size: number };
  /** The total the progress counts towards (dockerd: the layer's size; here the bytes read when known). */
  progressTotal: number;
  /**
   * The compressed bytes. `progress` is told how many bytes were read so far (of the kept blob,
   * or of the tar before compression). Throws before the end when an exported layer does not
   * hash to its diff ID, so a bad blob is never committed.
   */
  read(progress: (n: number) => void): AsyncIterable<Buffer>;
}

export interface LayerBlobDeps {
  content: Pick<ContentStore, 'path'>;
  ops: StorageOps;
  /** The layer's diff directory (`overlay/<chain>/diff`). */
  diffDir(chainId: string): Promise<string>;
  /** The layer's exact tarball rebuilt from its tar-split record, when it has one. */
  rebuiltTar?(layer: LayerRecord): AsyncIterable<Buffer> | undefined;
  /** Blocks compressed at once (thread pool). */
  gzipParallel?: number;
}

async function* counted(
  source: AsyncIterable<Buffer>,
  progress: (n: number) => void,
): AsyncGenerator<Buffer> {
  let n = 0;
  for await (const c of source) {
    n += c.length;
    progress(n);
    yield c;
  }
}

/** Check the tar against the diff ID as it passes; throw at the end when it differs. */
async function* verified(source: AsyncIterable<Buffer>, diffId: string): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  for await (const c of source) {
    hash.update(c);
    yield c;
  }
  const got = `sha256:${hash.digest('hex')}`;
  if (got !== diffId)
    throw systemError(
      `layer ${diffId} cannot be reproduced from its snapshot (its files export to ${got}) and its blob was not kept`,
    );
}

export function layerBlob(deps: LayerBlobDeps, layer: LayerRecord): LayerBlob {
  const blob = layer.blob;
  const gzip = (tar: AsyncIterable<Buffer>) => parallelGzip(tar, { parallel: deps.gzipParallel });
  if (blob?.compression === 'gzip' || blob?.compression === 'zstd') {
    return {
      diffId: layer.diffId,
      mediaType: blob.compression === 'zstd' ? MediaTypes.ociLayerZstd : MediaTypes.dockerLayer,
      kept: { digest: blob.digest, size: blob.size },
      progressTotal: blob.size,
      read: (progress) => counted(toBuffers(createReadStream(deps.content.path(blob.digest))), progress),
    };
  }
  if (blob) {
    return {
      diffId: layer.diffId,
      mediaType: MediaTypes.dockerLayer,
      // an uncompressed blob is the tar itself: its size is what will be read
      progressTotal: blob.compression === 'none' ? blob.size : layer.size,
      read: (progress) => {
        const file = toBuffers(createReadStream(deps.content.path(blob.digest)));
        const tar =
          blob.compression === 'none'
            ? file
            : decompress(file, deps.ops, (c) => {
                if (c !== blob.compression)
                  throw invalidParameter(
                    `layer blob ${blob.digest} is ${c}, its record says ${blob.compression}`,
                  );
              });
        return gzip(counted(tar, progress));
      },
    };
  }
  return {
    diffId: layer.diffId,
    mediaType: MediaTypes.dockerLayer,
    progressTotal: layer.size,
    read: (progress) => {
      // dockerd's way: the tar-split record and the files rebuild the tarball as it came; a
      // layer without a record is exported from its snapshot (which may not hash the same)
      async function* exported(): AsyncGenerator<Buffer> {
        const rebuilt = deps.rebuiltTar?.(layer);
        if (rebuilt) {
          yield* rebuilt;
          return;
        }
        const dir = await deps.diffDir(layer.chainId);
        yield* toBuffers(exportDiff(dir, deps.ops));
      }
      return gzip(counted(verified(exported(), layer.diffId), progress));
    },
  };
}

/** The 12 hex digits of a diff ID, as dockerd names a layer in push progress. */
export function shortLayerId(diffId: string): string {
  return diffId.replace(/^sha256:/, '').slice(0, 12);
}
