import type { Readable } from 'node:stream';

/**
 * Overlay snapshots: one read-only snapshot per image layer, keyed by chain ID, and one writable
 * snapshot per container, keyed by the container ID, on top of its image's top chain ID.
 */
/**
 * An entry of a snapshot's init layer: a read-only layer between the writable layer and the chain
 * (dockerd's `<id>-init`), so that what it holds is in the filesystem but never a change of the
 * writable layer (diff, commit, its size).
 */
export interface InitEntry {
  /** Absolute path in the snapshot. */
  path: string;
  type: 'dir' | 'file' | 'symlink';
  /** Permission bits (dir, file). */
  mode?: number;
  /** Where a symlink points. */
  target?: string;
}

export interface Snapshotter {
  /**
   * Create the writable snapshot `key` on top of the layer chain `parentChainId` (null: empty),
   * with an init layer holding `init` when given (parents are made as directories, 0755).
   * `durable: false`: the snapshot's record is not fsynced (its owner's next durable write commits
   * it with the journal, and the owner makes the snapshot again should a power loss take it).
   */
  prepare(
    key: string,
    parentChainId: string | null,
    opts?: { init?: readonly InitEntry[]; durable?: boolean },
  ): Promise<void>;
  /** Mount snapshot `key` (overlay of its chain, writable upper) at `target` (made when missing). */
  mount(key: string, target: string, options?: { readonly?: boolean }): Promise<void>;
  unmount(target: string): Promise<void>;
  /** Remove a writable snapshot and its files. */
  remove(key: string): Promise<void>;
  /** Bytes in the writable layer (inspect SizeRw). */
  usage(key: string): Promise<number>;
  /**
   * The overlay directories of a writable snapshot (inspect's GraphDriver.Data, diff); MergedDir
   * is `<overlay>/<key>/merged`, where the container's rootfs is mounted.
   */
  paths(key: string): Promise<SnapshotPaths>;
  /** Whether the writable snapshot `key` exists (reconcile after a restart). */
  exists(key: string): Promise<boolean>;
}

/** GraphDriver.Data of inspect (container or image): overlay directories of a snapshot. */
export interface SnapshotPaths {
  /** Lower layers' diff directories, top first, ':'-separated; absent when there are none. */
  LowerDir?: string;
  MergedDir: string;
  UpperDir: string;
  WorkDir: string;
}

/** What the overlay snapshotter offers beyond Snapshotter (ImageService.snapshotter has it all). */
export interface SnapshotterExtras {
  /** All writable snapshots with the chain they sit on. */
  listActive(): Promise<Array<{ key: string; parent: string | null }>>;
  /**
   * The writable layer's changes as an uncompressed layer tarball, whiteouts in AUFS form
   * (docker commit, export of changes, diff): feed it to ImageService.addLayer to commit.
   */
  diff(key: string): Readable;
}
