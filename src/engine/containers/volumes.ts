import { lstat, readlink } from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import { errorMessage, invalidParameter } from '../../common/errors.js';
import type { SpecMount } from '../runtime/runtime.types.js';
import type { VolumeMountUse, VolumeService } from '../volumes/volumes.types.js';
import { type Container, type Internals, resolveForCreate } from './container.js';
import { parseBind } from './mounts.validate.js';

/**
 * A container's mount that is not simply in its HostConfig: a volume (named, anonymous, from
 * `Config.Volumes` or an image's `VOLUME`), or a mount inherited through `VolumesFrom`. Kept in
 * the container's record (`MountPoints`), as dockerd keeps them in config.v2.json.
 */
export interface MountPoint {
  Type: 'volume' | 'bind';
  /** Volume name (volumes only). */
  Name?: string;
  Source: string;
  Destination: string;
  Driver?: string;
  Mode: string;
  RW: boolean;
  Propagation: string;
  /** Copy the image's content at Destination into the (empty) volume on the first start. */
  CopyData?: boolean;
}

/** Inspect/list `Mounts` entry of a mount point. */
export function mountPointView(m: MountPoint): Record<string, unknown> {
  if (m.Type === 'volume') {
    return {
      Type: 'volume',
      Name: m.Name ?? '',
      Source: m.Source,
      Destination: m.Destination,
      Driver: m.Driver ?? 'local',
      Mode: m.Mode,
      RW: m.RW,
      Propagation: m.Propagation,
    };
  }
  return {
    Type: 'bind',
    Source: m.Source,
    Destination: m.Destination,
    Mode: m.Mode,
    RW: m.RW,
    Propagation: m.Propagation,
  };
}

function need(ix: Internals): VolumeService {
  if (!ix.volumes) throw invalidParameter('volumes are not available in this engine');
  return ix.volumes;
}

const clean = (p: string) => posix.normalize(p).replace(/(.)\/+$/, '$1');

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
    if (p.kind !== 'bind') continue;
    out.push({
      Type: 'bind',
      Source: p.source,
      Destination: p.destination,
      Mode: p.mode,
      RW: !p.readOnly,
      Propagation: p.propagation || 'rprivate',
    });
  }
  for (const m of hc.Mounts ?? []) {
    if (m.Type !== 'bind') continue;
    out.push({
      Type: 'bind',
      Source: m.Source ?? '',
      Destination: m.Target ?? '',
      Mode: '',
      RW: !m.ReadOnly,
      Propagation: m.BindOptions?.Propagation || 'rprivate',
    });
  }
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
 * The volume mounts of a new container, as dockerd registers them at create: VolumesFrom first,
 * then volume binds (`name:/dst`, `/dst`), HostConfig.Mounts of type volume, and finally
 * `Config.Volumes` (request and image) not covered by anything else, as anonymous volumes.
 * Volumes are created as needed and referenced by `id`; on failure the references are dropped
 * and the anonymous volumes made here removed.
 */
export async function resolveVolumeMounts(
  ix: Internals,
  id: string,
  hc: HostConfig,
  config: ContainerConfig,
): Promise<MountPoint[]> {
  checkDuplicates(hc);
  const byDest = new Map<string, MountPoint>();
  const created: string[] = [];
  const referenced: string[] = [];
  const covered = new Set<string>();
  for (const b of hc.Binds ?? []) covered.add(clean(parseBind(b).destination));
  for (const m of hc.Mounts ?? []) covered.add(clean(m.Target ?? ''));
  for (const d of Object.keys(hc.Tmpfs ?? {})) covered.add(clean(d));

  const volume = async (
    name: string,
    req: { Driver?: string; DriverOpts?: Record<string, string>; Labels?: Record<string, string> },
  ) => {
    const vs = need(ix);
    const v = await vs.create({ Name: name, ...req }, { reference: id });
    referenced.push(v.Name);
    if (name === '') created.push(v.Name);
    return v;
  };

  try {
    for (const spec of hc.VolumesFrom ?? []) {
      if (typeof spec !== 'string') throw invalidParameter('VolumesFrom entries must be strings');
      const { ref, mode } = parseVolumesFrom(spec);
      const other = ix.containers.get(resolveForCreate(ix, ref));
      if (!other) throw invalidParameter(`No such container: ${ref}`);
      const readOnly = mode.split(',').includes('ro');
      for (const m of allMountPoints(other.hostConfig, other.record.MountPoints ?? [])) {
        const dest = clean(m.Destination);
        if (covered.has(dest)) continue;
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
          need(ix).reference(cp.Name, id);
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
    await dropVolumes(ix, id, referenced, created);
    throw err;
  }
  return [...byDest.values()];
}

async function dropVolumes(
  ix: Internals,
  id: string,
  referenced: string[],
  anonymous: string[],
): Promise<void> {
  if (!ix.volumes) return;
  for (const n of referenced) ix.volumes.release(n, id);
  for (const n of anonymous) {
    if (ix.volumes.users(n).length > 0) continue;
    await ix.volumes
      .remove(n)
      .catch((err) => ix.log.warn('cannot remove volume', { name: n, error: errorMessage(err) }));
  }
}

/** Drop a new container's references again (its creation failed after resolveVolumeMounts). */
export async function abandonVolumeMounts(ix: Internals, id: string, points: MountPoint[]): Promise<void> {
  const names = points.filter((m) => m.Type === 'volume').map((m) => m.Name ?? '');
  await dropVolumes(
    ix,
    id,
    names,
    names.filter((n) => ix.volumes?.isAnonymous(n)),
  );
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

/**
 * Mount a starting container's volumes (quietly: `announceVolumeMounts` tells of them at dockerd's
 * point of the start), copy image content into new empty volumes, and answer the runtime mounts
 * for them and for VolumesFrom binds.
 */
export async function volumeSpecMounts(ix: Internals, c: Container, rootfs: string): Promise<SpecMount[]> {
  const points = c.record.MountPoints ?? [];
  if (points.length === 0) return [];
  const out: SpecMount[] = [];
  c.volumesMounted = true;
  c.volumeMountsAnnounced = false;
  for (const m of points) {
    let source = m.Source;
    if (m.Type === 'volume') {
      const vs = need(ix);
      source = await vs.mount(m.Name ?? '', useOf(c, m), { quiet: true });
      if (m.CopyData) {
        await vs.populate(m.Name ?? '', await scopedPath(rootfs, m.Destination));
        m.CopyData = false;
      }
    }
    const opts = ['rbind', m.RW ? 'rw' : 'ro'];
    if (m.Propagation) opts.push(m.Propagation);
    out.push({ destination: m.Destination, type: 'bind', source, options: opts });
  }
  return out;
}

/** The start goes on past `network connect`: the `mount` events, in dockerd's order. */
export function announceVolumeMounts(ix: Internals, c: Container): void {
  if (!c.volumesMounted || c.volumeMountsAnnounced || !ix.volumes) return;
  c.volumeMountsAnnounced = true;
  for (const m of c.record.MountPoints ?? []) {
    if (m.Type === 'volume') ix.volumes.announceMount(m.Name ?? '', useOf(c, m));
  }
}

/**
 * The container stopped (or never started): unmount its volumes, emitting `unmount` for those
 * whose `mount` was announced.
 */
export async function releaseVolumeMounts(ix: Internals, c: Container): Promise<void> {
  if (!c.volumesMounted) return;
  c.volumesMounted = false;
  const quiet = !c.volumeMountsAnnounced;
  c.volumeMountsAnnounced = false;
  if (!ix.volumes) return;
  for (const m of c.record.MountPoints ?? []) {
    if (m.Type !== 'volume') continue;
    await ix.volumes
      .unmount(m.Name ?? '', c.id, { quiet })
      .catch((err) => ix.log.warn('volume unmount failed', { id: c.id, error: errorMessage(err) }));
  }
}

/** The container is gone: drop its references; with `removeAnonymous`, remove its anonymous volumes. */
export async function forgetVolumes(ix: Internals, c: Container, removeAnonymous: boolean): Promise<void> {
  if (!ix.volumes) return;
  const names = (c.record.MountPoints ?? []).filter((m) => m.Type === 'volume').map((m) => m.Name ?? '');
  for (const n of names) ix.volumes.release(n, c.id);
  if (!removeAnonymous) return;
  for (const n of names) {
    // Anonymous volumes made for this container; one another container still uses (VolumesFrom) stays.
    if (!ix.volumes.isAnonymous(n) || ix.volumes.users(n).length > 0) continue;
    await ix.volumes
      .remove(n)
      .catch((err) => ix.log.warn('cannot remove volume', { name: n, error: errorMessage(err) }));
  }
}

/**
 * After a daemon restart: every container references its volumes again; running ones have them
 * mounted (quietly: no events); device mounts nobody uses any more are unmounted.
 */
export async function restoreVolumes(ix: Internals): Promise<void> {
  if (!ix.volumes) return;
  for (const c of ix.containers.values()) {
    for (const m of c.record.MountPoints ?? []) {
      if (m.Type !== 'volume') continue;
      try {
        ix.volumes.reference(m.Name ?? '', c.id);
        if (c.state.Running) {
          await ix.volumes.mount(m.Name ?? '', useOf(c, m), { quiet: true });
          c.volumesMounted = true;
          // announced when it started (before this engine's restart): its unmount will be too
          c.volumeMountsAnnounced = true;
        }
      } catch (err) {
        ix.log.warn('volume of a container is missing', {
          id: c.id,
          volume: m.Name,
          error: errorMessage(err),
        });
      }
    }
  }
  await ix.volumes.settle();
}
