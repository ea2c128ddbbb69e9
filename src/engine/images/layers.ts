import { isLayerProducer, type LayerProducer } from '../storage/layer.types.js';
import type { LayerRecord } from '../storage/overlay.snapshotter.js';
import type { ImageStore } from './image.store.js';

/** Digest of an empty tar archive (1024 zero bytes): a layer that changes nothing. */
export const EMPTY_LAYER_DIFF_ID = 'sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef';

/** A layer just added, pinned against garbage collection until release(). */
export interface PinnedLayer {
  layer: LayerRecord;
  /** Unpin (once; later calls do nothing). Call it once the image that uses the layer exists. */
  release(): void;
}

export async function* toBuffers(
  source: AsyncIterable<Buffer | Uint8Array | string>,
): AsyncGenerator<Buffer> {
  for await (const c of source)
    yield typeof c === 'string' ? Buffer.from(c) : Buffer.isBuffer(c) ? c : Buffer.from(c);
}

/**
 * Unpack a layer tarball (any compression) on top of the chain `parent` (null: base layer),
 * keeping its blob in the content store. The layer is pinned from the moment it exists (under
 * the layer's lock) until release(), so a concurrent garbage collection cannot take it before
 * its image is created. Import, commit, pull (and load, build) add their layers here; a pull of a
 * large layer gives a producer (its blob read off the socket) rather than chunks. `parent`
 * may be a promise: the layer is unpacked at once and committed once its parent exists (a pull
 * unpacks its layers side by side); `expectDiffId` refuses a layer whose content is not that;
 * `verifiedDigest`: the input checks itself against this digest (it fails before it ends
 * otherwise), so the blob is not hashed twice; `keepBlob: false` keeps no blob at all (a pull:
 * the registry has it, the distribution metadata store says where); `sizeHint`: the input's size
 * when known (a large layer is unpacked on a worker thread).
 */
export async function addLayer(
  store: Pick<ImageStore, 'content' | 'overlay' | 'pin' | 'unpin'>,
  parent: string | null | Promise<string | null>,
  input: AsyncIterable<Buffer | Uint8Array | string> | LayerProducer,
  onProgress?: (rawBytes: number) => void,
  opts: { expectDiffId?: string; verifiedDigest?: string; keepBlob?: boolean; sizeHint?: number } = {},
): Promise<PinnedLayer> {
  const { layer } = await store.overlay.applyLayer(
    parent,
    isLayerProducer(input) ? input : toBuffers(input),
    {
      blob: opts.keepBlob === false ? undefined : store.content.writer(opts.verifiedDigest),
      onProgress,
      expectDiffId: opts.expectDiffId,
      onCommit: (chainId) => store.pin(chainId),
      sizeHint: opts.sizeHint,
    },
  );
  let released = false;
  return {
    layer,
    release: () => {
      if (released) return;
      released = true;
      store.unpin(layer.chainId);
    },
  };
}
