import type { ContainerConfig, ImageConfigFile } from '../../common/docker-types.js';
import type { SnapshotPaths } from '../storage/snapshotter.types.js';
import type { OciPlatform } from './platform.js';

export type { OciPlatform };

/** What other engine services (containers, build, system) need to know of an image. */
export interface ImageRecord {
  /** `sha256:<hex>` of the config blob. */
  id: string;
  config: ImageConfigFile;
  repoTags: string[];
  repoDigests: string[];
  /** Chain ID of the top layer (the snapshot a container's writable layer sits on), null if none. */
  chainId: string | null;
  /** Sum of the layers' unpacked sizes. */
  size: number;
  created: string;
  parent: string;
}

/** Who uses an image, so that image removal can answer 409 as dockerd does. */
export interface ImageUsers {
  containersUsing(imageId: string): Array<{ id: string; running: boolean }>;
}

/** The image service as containers and system see it. */
export interface ImageResolver {
  /** By reference (`busybox`, `busybox:1`, `repo@sha256:...`), full or short ID. NotFound: `No such image: <ref>`. */
  resolve(refOrId: string): Promise<ImageRecord>;
  /** By full ID; undefined when gone. */
  get(id: string): Promise<ImageRecord | undefined>;
  list(): Promise<ImageRecord[]>;
  setUsers(users: ImageUsers): void;
}

// ---- The image service's own operations (API backends). ----

/** A progress message of an import, as the route turns it into JSON stream messages. */
export type ImportProgress =
  | { kind: 'status'; status: string }
  | { kind: 'progress'; status: string; current: number; total?: number };

export interface ImportOptions {
  /** `-` (read `body`) or an http(s) URL to fetch. */
  src: string;
  body?: AsyncIterable<Buffer>;
  /** Content-Length of the body when known (progress total). */
  bodySize?: number;
  repo?: string;
  tag?: string;
  /** Dockerfile instructions (CMD, ENV, ...). */
  changes?: string[];
  message?: string;
  /** `os[/arch[/variant]]`. */
  platform?: string;
  onProgress?: (p: ImportProgress) => void;
}

/** One row of GET /images/json before shaping. */
export interface ImageListItem {
  record: ImageRecord;
  /** Familiar `name:tag` strings shown for this row (filtered by `reference`); [] when untagged. */
  repoTags: string[];
  repoDigests: string[];
  /** With `sharedSize`: the size of this image's layers that other images use too. */
  sharedSize?: number;
  /** With `containers`: how many containers use this image. */
  containers?: number;
}

export interface ImageListOptions {
  all?: boolean;
  /** Work out each row's shared size (API 1.42 `shared-size`). */
  sharedSize?: boolean;
  /** Count the containers using each image (GET /system/df; the list from API 1.51). */
  containers?: boolean;
  /** dangling, label, before, since, reference. */
  filters?: Map<string, string[]>;
}

/** What GET /images/{name}/json needs beyond the record. */
export interface ImageDetails {
  record: ImageRecord;
  /** RFC 3339 time of the last tag, null when never tagged. */
  lastTagTime: string | null;
  /** Overlay directories of the top layer, null for an image without layers. */
  graphDriver: SnapshotPaths | null;
}

export interface ImageHistoryItem {
  id: string;
  created: number;
  createdBy: string;
  tags: string[] | null;
  size: number;
  comment: string;
}

export type ImageDeleteItem = { Untagged: string } | { Deleted: string };

/** Inspect, history and delete of one platform's image: NotFound when the image is for another. */
export interface PlatformOption {
  platform?: OciPlatform;
}

export interface ImageRemoveOptions extends PlatformOption {
  force?: boolean;
  /** Delete untagged parents too (default true). */
  prune?: boolean;
}

/** docker commit's image half (ImageService.commit). */
export interface CommitOptions {
  /** The writable snapshot (container ID). */
  key: string;
  /** The image the container runs (ID), or undefined for a container from scratch. */
  parentImageId?: string;
  containerId: string;
  /** The container's config, recorded as ContainerConfig; its Cmd becomes the history's created_by. */
  containerConfig: ContainerConfig;
  /** The new image's config. */
  config: ContainerConfig;
  author?: string;
  comment?: string;
  repo?: string;
  tag?: string;
}

/**
 * One progress message of a pull, in dockerd's JSON message form before it is written: `detail`
 * present means a `progressDetail` (empty, or with current/total, which also gets the
 * `progress` bar).
 */
export interface PullMessage {
  status: string;
  id?: string;
  detail?: { current?: number; total?: number };
}

/** `POST /images/create?fromImage=&tag=&platform=` */
export interface PullOptions {
  /** fromImage: a name, with a tag or digest or neither (no tag: every tag, docker pull -a). */
  image: string;
  /** tag: a tag, or a digest. */
  tag?: string;
  /** `os[/arch[/variant]]`; the host's platform by default. */
  platform?: string;
  /** The X-Registry-Auth header as the client sent it. */
  registryAuth?: string;
  /** The client went away: stop, keep nothing half-done. */
  signal?: AbortSignal;
  onMessage: (m: PullMessage) => void;
}
