import type { ImageConfigFile } from '../../common/docker-types.js';

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
