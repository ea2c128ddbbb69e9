/** A volume as the service keeps it (and persists in `<data-root>/volumes/<name>/volume.json`). */
export interface VolumeRecord {
  Name: string;
  Driver: 'local';
  /** Labels as given at create (empty object when none). */
  Labels: Record<string, string>;
  /** The local driver's options (`type`, `device`, `o`, `size`); empty object when none. */
  Options: Record<string, string>;
  /** RFC 3339, seconds, UTC. */
  CreatedAt: string;
}

/** A volume with where it lives on the host. */
export interface VolumeInfo extends VolumeRecord {
  Mountpoint: string;
  Scope: 'local';
}

/** A volume with the space it takes (GET /system/df). */
export interface VolumeUsage extends VolumeInfo {
  /** Bytes under `_data` (each inode once); `RefCount`: containers referencing it. */
  UsageData: { Size: number; RefCount: number };
}

export interface CreateVolumeRequest {
  /** Generated (64 hex, anonymous label) when omitted or empty. */
  Name?: string;
  Driver?: string;
  DriverOpts?: Record<string, string> | null;
  Labels?: Record<string, string> | null;
}

export interface VolumePruneReport {
  /** `[]` when nothing was deleted (dockerd 20.10). */
  VolumesDeleted: string[];
  SpaceReclaimed: number;
}

/** What `mount` tells the events about the container's use of a volume. */
export interface VolumeMountUse {
  container: string;
  destination: string;
  readWrite: boolean;
  propagation: string;
}

/** What the routes and the containers service ask of the volumes service. */
export interface VolumeService {
  /**
   * Create a volume, or answer the existing one of that name (a `create` event either way, as
   * dockerd). `reference`: a container that references it from now on (atomically, so a
   * concurrent prune cannot take it away).
   */
  create(req: CreateVolumeRequest, opts?: { reference?: string }): Promise<VolumeInfo>;
  /** `filters`: name, dangling, driver, label. */
  list(filters: Map<string, string[]>): Promise<{ Volumes: VolumeInfo[]; Warnings: string[] | null }>;
  /** 404 `get <name>: no such volume`. */
  inspect(name: string): Promise<VolumeInfo>;
  /** 404, or 409 when in use; `force` turns the 404 into success. */
  remove(name: string, opts?: { force?: boolean }): Promise<void>;
  /**
   * Remove unreferenced volumes (a `prune` event, no `destroy` per volume, as dockerd).
   * `allNamed`: named volumes too (before API 1.42); `allFilter`: the `all` filter is known
   * (API 1.42+; before, it is a 400).
   */
  prune(
    filters: Map<string, string[]>,
    opts: { allNamed: boolean; allFilter?: boolean },
  ): Promise<VolumePruneReport>;

  /**
   * Volumes without driver options (what dockerd sizes: others are a device's), each with its
   * size and reference count, sorted by name.
   */
  usage(): Promise<VolumeUsage[]>;

  /** Whether a volume carries the anonymous label. */
  isAnonymous(name: string): boolean;
  /** Containers referencing the volume (in use while any do). */
  users(name: string): string[];
  /** Record that a container references a volume (create, restore). Unknown names: 404. */
  reference(name: string, containerId: string): void;
  /** Forget a container's reference. */
  release(name: string, containerId: string): void;
  /**
   * A container starts using the volume: mount its device on first use; emits `mount`. Returns
   * the host path to bind into the container.
   */
  mount(name: string, use: VolumeMountUse, opts?: { quiet?: boolean }): Promise<string>;
  /** The container stopped: unmount the device after its last user; emits `unmount`. */
  unmount(name: string, containerId: string, opts?: { quiet?: boolean }): Promise<void>;
  /**
   * The `mount` / `unmount` events alone, for a caller that mounted or unmounted quietly and
   * announces at the point of dockerd's order (connect, mount, start; die, disconnect, unmount).
   */
  announceMount(name: string, use: VolumeMountUse): void;
  announceUnmount(name: string, containerId: string): void;
  /** Copy `source` (a directory in a container's rootfs) into the volume when the volume is empty. */
  populate(name: string, source: string): Promise<void>;
  /** Unmount devices of volumes nobody uses any more (after the containers were restored). */
  settle(): Promise<void>;
}
