/**
 * Overlay snapshots: one read-only snapshot per image layer, keyed by chain ID, and one writable
 * snapshot per container, keyed by the container ID, on top of its image's top chain ID.
 */
export interface Snapshotter {
  /** Create the writable snapshot `key` on top of the layer chain `parentChainId` (null: empty). */
  prepare(key: string, parentChainId: string | null): Promise<void>;
  /** Mount snapshot `key` (overlay of its chain, writable upper) at `target`. */
  mount(key: string, target: string, options?: { readonly?: boolean }): Promise<void>;
  unmount(target: string): Promise<void>;
  /** Remove a writable snapshot and its files. */
  remove(key: string): Promise<void>;
  /** Bytes in the writable layer (inspect SizeRw). */
  usage(key: string): Promise<number>;
  /** The writable layer's upper directory (changes, export, commit). */
  upperDir(key: string): string;
}
