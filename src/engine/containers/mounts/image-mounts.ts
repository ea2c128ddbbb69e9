import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import type { MountSpec } from '../../../common/docker-types.js';
import { errorMessage, invalidParameter, isKind } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { ImageResolver } from '../../images/images.types.js';
import type { ContainerSnapshots } from '../core/ports.js';
import type { MountPoint } from '../core/record.types.js';
import { isMounted } from '../core/rootfs.js';

/**
 * Mounts of type `image` (API 1.48): an image's filesystem, read-only, in a container. As dockerd
 * does, each gets a snapshot of its own on the image's layers (named from the container, source
 * and destination), made at create, mounted while the container runs, removed with it.
 */
export class ImageMounts {
  constructor(
    private readonly images: Pick<ImageResolver, 'resolve'>,
    private readonly snapshots: ContainerSnapshots,
    private readonly log: Logger,
  ) {}

  /** Create: the image resolved (a 400 when there is none), its snapshot prepared. */
  async prepare(id: string, m: MountSpec): Promise<MountPoint> {
    const source = m.Source ?? '';
    const image = await this.images.resolve(source).catch((err) => {
      // not a 404: the docker CLI would take it for the container's image missing and pull that
      if (isKind(err, 'NotFound')) throw invalidParameter(errorMessage(err));
      throw err;
    });
    const key = createHash('sha256')
      .update(`${id}-src=${source}-dst=${m.Target ?? ''}`)
      .digest('hex');
    await this.snapshots.prepare(key, image.chainId);
    const point: MountPoint = {
      Type: 'image',
      Name: source,
      Source: (await this.snapshots.paths(key)).MergedDir,
      Destination: m.Target ?? '',
      Mode: '',
      RW: false,
      Propagation: 'rprivate',
      ImageID: image.id,
      Snapshot: key,
    };
    if (m.ImageOptions?.Subpath) point.Subpath = m.ImageOptions.Subpath;
    return point;
  }

  /** Start: the snapshot mounted read-only; the host path to bind. */
  async mount(m: MountPoint): Promise<string> {
    const target = m.Source;
    await mkdir(target, { recursive: true });
    if (!(await isMounted(target))) await this.snapshots.mount(m.Snapshot ?? '', target, { readonly: true });
    return target;
  }

  async unmount(m: MountPoint): Promise<void> {
    if (await isMounted(m.Source)) await this.snapshots.unmount(m.Source);
  }

  /** The container is gone (or its create failed): the snapshot goes. */
  async remove(m: MountPoint): Promise<void> {
    await this.unmount(m).catch(() => undefined);
    if (!m.Snapshot) return;
    await this.snapshots
      .remove(m.Snapshot)
      .catch((err) =>
        this.log.warn('cannot remove an image mount', { snapshot: m.Snapshot, error: errorMessage(err) }),
      );
  }
}
