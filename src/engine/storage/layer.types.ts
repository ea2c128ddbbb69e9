/** What unpacking a layer tarball yields (layer.apply.ts, in this thread or on unpack.thread.ts's). */

export type Compression = 'none' | 'gzip' | 'bzip2' | 'xz' | 'zstd';

/** What a layer tarball says besides its files: whiteouts and opaque directories (AUFS style). */
export interface LayerListing {
  /** Paths (relative, no leading slash) to hide: `.wh.<name>` entries, their prefix removed. */
  whiteouts: string[];
  /** Directories whose lower content is hidden: parents of `.wh..wh..opq`. */
  opaqueDirs: string[];
  /** Sum of regular file sizes (what dockerd reports as the layer size). */
  size: number;
  entries: number;
}

/** A layer tarball unpacked into its directory. */
export interface UnpackedLayer {
  diffId: string;
  /** Regular file bytes in the layer. */
  size: number;
  compression: Compression;
  /** Bytes of the uncompressed layer tarball (what the diff ID is the digest of). */
  tarSize: number;
  listing: LayerListing;
  /** The tar-split record (gzip'd) that rebuilds the tarball from the unpacked files (tar-split.ts). */
  tarSplit?: Buffer;
}

/** Where a producer puts a layer's bytes (what the distribution client's `blobTo` writes to). */
export interface ByteSink {
  /** Take a chunk, copied before this returns (its bytes are reused after). False: await `room`. */
  write(chunk: Uint8Array): boolean;
  /** Resolves once the sink takes more; rejects when the unpacking gave up. */
  room(): Promise<void>;
}

/**
 * A layer's bytes pushed rather than iterated (a pull reading its blob off the socket):
 * `produce` writes them all to the sink, then resolves; it rejects when the input failed.
 */
export interface LayerProducer {
  produce(sink: ByteSink): Promise<void>;
}

export function isLayerProducer(input: unknown): input is LayerProducer {
  return typeof (input as Partial<LayerProducer> | null)?.produce === 'function';
}
