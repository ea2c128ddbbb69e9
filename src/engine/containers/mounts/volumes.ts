import { lstat, readlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { ContainerConfig, HostConfig } from '../../../common/docker-types.js';
import { errorMessage, invalidParameter } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { ImageResolver } from '../../images/images.types.js';
import type { SpecMount } from '../../runtime/runtime.types.js';
import type { VolumeMountUse, VolumeService } from '../../volumes/volumes.types.js';
import type { Container } from '../core/container.js';
import { clean, parseBind } from '../core/mounts.validate.js';
import type { ContainerSnapshots, MountsPort } from '../core/ports.js';
import type { MountPoint } from '../core/record.types.js';
import type { ContainerSet } from '../core/set.js';
import { bindMountPoint, bindPoint } from '../core/views.js';
import { bindMounts, ensureBindSources } from './binds.js';
import { ImageMounts } from './image-mounts.js';

/**
 * A volume's or image's subdirectory to mount (VolumeOptions/ImageOptions.Subpath), its links
 * resolved inside it: it must exist (dockerd: "cannot access path").
 */
async function subpathOf(root: string, subpath: string): Promise<string> {
  const path = await scopedPath(root, subpath);
  if (!(await lstat(path).catch(() => undefined))) {
    throw invalidParameter(`cannot access path ${path}: no such file or directory`);
  }
  return path;
}

/** `container[:ro|rw]` of VolumesFrom. */
function parseVolumesFrom(spec: string): { ref: string; mode: string } {
  const i = spec.lastIndexOf(':');
  if (i < 0) return { ref: spec, mode: '' };
  const ref = spec.slice(0, i);
  const mode = spec.slice(i + 1);
  if (!ref) throw invalidParameter(`invalid volumes-from specification: ${spec}`);
  for (const m of mode.split(',')) {
    if (!['ro', 'rw', 'z', 'Z', 'nocopy'].includes(m)) throw invalidParameter(`invalid mode: ${mode}`);
  }
  return { ref, mode };
}

/** Every mount of a container as mount points (its binds and bind Mounts, plus its MountPoints). */
function allMountPoints(hc: HostConfig, points: MountPoint[]): MountPoint[] {
  const out: MountPoint[] = [];
  for (const b of hc.Binds ?? []) {
    const p = parseBind(b);
    if (p.kind === 'bind') out.push(bindPoint(p));
  }
  for (const m of hc.Mounts ?? []) if (m.Type === 'bind') out.push(bindMountPoint(m));
  return [...out, ...points];
}

/** Check that destinations in Binds and Mounts do not repeat (dockerd's "Duplicate mount point"). */
function checkDuplicates(hc: HostConfig): void {
  const seen = new Set<string>();
  const add = (d: string) => {
    const c = clean(d);
    if (seen.has(c)) throw invalidParameter(`Duplicate mount point: ${c}`);
    seen.add(c);
  };
  for (const b of hc.Binds ?? []) add(parseBind(b).destination);
  for (const m of hc.Mounts ?? []) add(m.Target ?? '');
}

/**
 * `path` inside `root` with symlinks resolved inside root (never escaping it), as a container
 * would see it. Components that do not exist are appended as they are.
 */
export async function scopedPath(root: string, path: string): Promise<string> {
  const parts = clean(path).split('/').filter(Boolean);
  const done: string[] = [];
  let hops = 0;
  while (parts.length > 0) {
    const part = parts.shift() ?? '';
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const full = join(root, ...done, part);
    const st = await lstat(full).catch(() => undefined);
    if (st?.isSymbolicLink()) {
      if (++hops > 40) throw invalidParameter(`too many symlinks resolving ${path}`);
      const target = await readlink(full);
      if (target.startsWith('/')) done.length = 0;
      parts.unshift(...target.split('/').filter(Boolean));
      continue;
    }
    done.push(part);
  }
  return join(root, ...done);
}

function useOf(c: Container, m: MountPoint): VolumeMountUse {
  return { container: c.id, destination: m.Destination, readWrite: m.RW, propagation: m.Propagation };
}

export interface VolumesDeps {
  set: ContainerSet;
  /** Named and anonymous volumes (absent in unit tests that need none). */
  volumes?: VolumeService;
  /** Images and snapshots, for mounts of type `image`. */
  images: Pick<ImageResolver, 'resolve'>;
  snapshots: ContainerSnapshots;
  log: Logger;
}

/**
 * The container side of volumes: a container's mount points resolved at create (volumes made and
 * referenced), mounted for its runs (with dockerd's `mount`/`unmount` events), its binds, and its
 * anonymous volumes removed with it when asked.
 */
export class ContainerVolumes implements MountsPort {
  /** Containers whose volumes are mounted (between start and exit), and whether that was announced. */
  private readonly mounted = new Map<string, { announced: boolean }>();

  private readonly imageMounts: ImageMounts;

  constructor(private readonly d: VolumesDeps) {
    this.imageMounts = new ImageMounts(d.images, d.snapshots, d.log);
  }

  private need(): VolumeService {
    if (!this.d.volumes) throw invalidParameter('volumes are not available in this engine');
    return this.d.volumes;
  }

  /**
   * The volume mounts of a new container, as dockerd registers them at create: VolumesFrom first,
   * then volume binds (`name:/dst`, `/dst`), HostConfig.Mounts of type volume, and finally
   * `Config.Volumes` (request and image) not covered by anything else, as anonymous volumes.
   * Volumes are created as needed and referenced by `id`; on failure the references are dropped
   * and the anonymous volumes made here removed.
   */
  async resolve(id: string, hc: HostConfig, config: ContainerConfig): Promise<MountPoint[]> {
    checkDuplicates(hc);
    const byDest = new Map<string, MountPoint>();
    const created: string[] = [];
    const referenced: string[] = [];
    const covered = new Set<string>();
    const images: MountPoint[] = [];
    for (const b of hc.Binds ?? []) covered.add(clean(parseBind(b).destination));
    for (const m of hc.Mounts ?? []) covered.add(clean(m.Target ?? ''));
    for (const d of Object.keys(hc.Tmpfs ?? {})) covered.add(clean(d));

    const volume = async (
      name: string,
      req: { Driver?: string; DriverOpts?: Record<string, string>; Labels?: Record<string, string> },
    ) => {
      const vs = this.need();
      const v = await vs.create({ Name: name, ...req }, { reference: id });
      referenced.push(v.Name);
      if (name === '') created.push(v.Name);
      return v;
    };

    try {
      for (const spec of hc.VolumesFrom ?? []) {
        if (typeof spec !== 'string') throw invalidParameter('VolumesFrom entries must be strings');
        const { ref, mode } = parseVolumesFrom(spec);
        const other = this.d.set.find(this.d.set.resolveForCreate(ref));
        if (!other) throw invalidParameter(`No such container: ${ref}`);
        const readOnly = mode.split(',').includes('ro');
        for (const m of allMountPoints(other.hostConfig, other.record.MountPoints ?? [])) {
          const dest = clean(m.Destination);
          // an image mount is the other container's own snapshot: not shared
          if (covered.has(dest) || m.Type === 'image') continue;
          const cp: MountPoint = {
            Type: m.Type,
            Source: m.Source,
            Destination: m.Destination,
            Mode: '',
            RW: m.RW && !readOnly,
            Propagation: m.Propagation,
          };
          if (m.Type === 'volume') {
            cp.Name = m.Name ?? '';
            cp.Driver = m.Driver ?? 'local';
            this.need().reference(cp.Name, id);
            referenced.push(cp.Name);
          }
          byDest.set(dest, cp);
        }
      }
      for (const b of hc.Binds ?? []) {
        const p = parseBind(b);
        if (p.kind !== 'volume') continue;
        const v = await volume(p.source, { Driver: hc.VolumeDriver || undefined });
        const modes = p.mode === '' ? [] : p.mode.split(',');
        byDest.set(clean(p.destination), {
          Type: 'volume',
          Name: v.Name,
          Source: v.Mountpoint,
          Destination: p.destination,
          Driver: v.Driver,
          Mode: p.mode === '' ? 'z' : p.mode,
          RW: !p.readOnly,
          Propagation: p.propagation,
          CopyData: !modes.includes('nocopy'),
        });
      }
      for (const m of hc.Mounts ?? []) {
        if (m.Type === 'image') {
          const point = await this.imageMounts.prepare(id, m);
          images.push(point);
          byDest.set(clean(m.Target ?? ''), point);
          continue;
        }
        if (m.Type !== 'volume') continue;
        const vo = m.VolumeOptions ?? {};
        const driver = vo.DriverConfig?.Name || hc.VolumeDriver || undefined;
        const v = await volume(m.Source ?? '', {
          Driver: driver,
          DriverOpts: vo.DriverConfig?.Options ?? undefined,
          Labels: vo.Labels ?? undefined,
        });
        byDest.set(clean(m.Target ?? ''), {
          Type: 'volume',
          Name: v.Name,
          Source: v.Mountpoint,
          Destination: m.Target ?? '',
          Driver: v.Driver,
          Mode: 'z',
          RW: !m.ReadOnly,
          Propagation: '',
          CopyData: !vo.NoCopy,
          ...(vo.Subpath ? { Subpath: vo.Subpath } : {}),
        });
      }
      for (const spec of Object.keys(config.Volumes ?? {})) {
        if (!isAbsolute(spec))
          throw invalidParameter(`invalid volume specification: '${spec}': must be absolute`);
        const dest = clean(spec);
        if (dest === '/')
          throw invalidParameter(`invalid volume specification: '${spec}': destination can't be '/'`);
        if (covered.has(dest) || byDest.has(dest)) continue;
        const v = await volume('', { Driver: hc.VolumeDriver || undefined });
        byDest.set(dest, {
          Type: 'volume',
          Name: v.Name,
          Source: v.Mountpoint,
          Destination: dest,
          Driver: v.Driver,
          Mode: '',
          RW: true,
          Propagation: '',
          CopyData: true,
        });
      }
    } catch (err) {
      await this.drop(id, referenced, created);
      for (const m of images) await this.imageMounts.remove(m);
      throw err;
    }
    return [...byDest.values()];
  }

  private async drop(id: string, referenced: string[], anonymous: string[]): Promise<void> {
    const volumes = this.d.volumes;
    if (!volumes) return;
    for (const n of referenced) volumes.release(n, id);
    for (const n of anonymous) {
      if (volumes.users(n).length > 0) continue;
      await volumes
        .remove(n)
        .catch((err) => this.d.log.warn('cannot remove volume', { name: n, error: errorMessage(err) }));
    }
  }

  /** Drop a new container's references again (its creation failed after resolveVolumeMounts). */
  async abandon(id: string, points: MountPoint[]): Promise<void> {
    for (const m of points) if (m.Type === 'image') await this.imageMounts.remove(m);
    const names = points.filter((m) => m.Type === 'volume').map((m) => m.Name ?? '');
    await this.drop(
      id,
      names,
      names.filter((n) => this.d.volumes?.isAnonymous(n)),
    );
  }

  /**
   * Mount a starting container's volumes (quietly: `announceVolumeMounts` tells of them at dockerd's
   * point of the start), copy image content into new empty volumes, and answer the runtime mounts
   * for them and for VolumesFrom binds, after HostConfig's binds, mounts and tmpfs.
   */
  async specMounts(c: Container, rootfs: string): Promise<SpecMount[]> {
    await ensureBindSources(c.hostConfig);
    const out = bindMounts(c.hostConfig, { readOnlyNonRecursive: c.record.ReadOnlyNonRecursive === true });
    const points = c.record.MountPoints ?? [];
    if (points.length === 0) return out;
    this.mounted.set(c.id, { announced: false });
    for (const m of points) {
      let source = m.Source;
      if (m.Type === 'volume') {
        const vs = this.need();
        source = await vs.mount(m.Name ?? '', useOf(c, m), { quiet: true });
        if (m.CopyData) {
          await vs.populate(m.Name ?? '', await scopedPath(rootfs, m.Destination));
          m.CopyData = false;
        }
      } else if (m.Type === 'image') {
        source = await this.imageMounts.mount(m);
      }
      if (m.Subpath) source = await subpathOf(source, m.Subpath);
      const opts = ['rbind', m.RW ? 'rw' : 'ro'];
      if (m.Propagation) opts.push(m.Propagation);
      out.push({ destination: m.Destination, type: 'bind', source, options: opts });
    }
    return out;
  }

  /** The start goes on past `network connect`: the `mount` events, in dockerd's order. */
  announce(c: Container): void {
    const state = this.mounted.get(c.id);
    const volumes = this.d.volumes;
    if (!state || state.announced || !volumes) return;
    state.announced = true;
    for (const m of c.record.MountPoints ?? []) {
      if (m.Type === 'volume') volumes.announceMount(m.Name ?? '', useOf(c, m));
    }
  }

  /**
   * The container stopped (or never started): unmount its volumes, emitting `unmount` for those
   * whose `mount` was announced.
   */
  async release(c: Container): Promise<void> {
    const state = this.mounted.get(c.id);
    if (!state) return;
    this.mounted.delete(c.id);
    const quiet = !state.announced;
    for (const m of c.record.MountPoints ?? []) {
      if (m.Type !== 'image') continue;
      await this.imageMounts
        .unmount(m)
        .catch((err) =>
          this.d.log.warn('image mount unmount failed', { id: c.id, error: errorMessage(err) }),
        );
    }
    const volumes = this.d.volumes;
    if (!volumes) return;
    for (const m of c.record.MountPoints ?? []) {
      if (m.Type !== 'volume') continue;
      await volumes
        .unmount(m.Name ?? '', c.id, { quiet })
        .catch((err) => this.d.log.warn('volume unmount failed', { id: c.id, error: errorMessage(err) }));
    }
  }

  /** The container is gone: drop its references; with `removeAnonymous`, remove its anonymous volumes. */
  async forget(c: Container, removeAnonymous: boolean): Promise<void> {
    for (const m of c.record.MountPoints ?? []) if (m.Type === 'image') await this.imageMounts.remove(m);
    const volumes = this.d.volumes;
    if (!volumes) return;
    const names = (c.record.MountPoints ?? []).filter((m) => m.Type === 'volume').map((m) => m.Name ?? '');
    for (const n of names) volumes.release(n, c.id);
    if (!removeAnonymous) return;
    for (const n of names) {
      // Anonymous volumes made for this container; one another container still uses (VolumesFrom) stays.
      if (!volumes.isAnonymous(n) || volumes.users(n).length > 0) continue;
      await volumes
        .remove(n)
        .catch((err) => this.d.log.warn('cannot remove volume', { name: n, error: errorMessage(err) }));
    }
  }

  /**
   * After a daemon restart: every container references its volumes again; running ones have them
   * mounted (quietly: no events); device mounts nobody uses any more are unmounted.
   */
  async restore(containers: Iterable<Container>): Promise<void> {
    const all = [...containers];
    for (const c of all) {
      // a running container's image mounts stayed mounted: unmounted when it stops
      if (c.state.Running && (c.record.MountPoints ?? []).some((m) => m.Type === 'image')) {
        this.mounted.set(c.id, { announced: true });
      }
    }
    const volumes = this.d.volumes;
    if (!volumes) return;
    for (const c of all) {
      for (const m of c.record.MountPoints ?? []) {
        if (m.Type !== 'volume') continue;
        try {
          volumes.reference(m.Name ?? '', c.id);
          if (c.state.Running) {
            await volumes.mount(m.Name ?? '', useOf(c, m), { quiet: true });
            // announced when it started (before this engine's restart): its unmount will be too
            this.mounted.set(c.id, { announced: true });
          }
        } catch (err) {
          this.d.log.warn('volume of a container is missing', {
            id: c.id,
            volume: m.Name,
            error: errorMessage(err),
          });
        }
      }
    }
    await volumes.settle();
  }
}
