import { lstat, readdir, stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import type { Container } from '../core/container.js';
import type { ContainerSnapshots } from '../core/ports.js';
import type { ArchiveHost } from './archive.host.js';

/** docker diff's kinds. */
export const CHANGE_MODIFY = 0;
export const CHANGE_ADD = 1;
export const CHANGE_DELETE = 2;

export interface Change {
  Path: string;
  Kind: number;
}

/**
 * What dockerd keeps in a container's init layer (below the writable one), never shown as a
 * change: the mount points of the files and filesystems every container gets.
 */
const INIT_PATHS = new Set([
  '/.dockerenv',
  '/dev',
  '/dev/console',
  '/dev/pts',
  '/dev/shm',
  '/etc/hostname',
  '/etc/hosts',
  '/etc/mtab',
  '/etc/resolv.conf',
  '/proc',
  '/sys',
]);

/** Where a path is in the image's layers (top first), if anywhere: `os.Stat` as dockerd does. */
async function inLowers(lowers: string[], path: string): Promise<import('node:fs').Stats | undefined> {
  for (const dir of lowers) {
    try {
      return await stat(join(dir, path));
    } catch (err) {
      const code = errnoCode(err);
      if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'ELOOP') throw err;
    }
  }
  return undefined;
}

/** The entries of a directory in the image's layers: those of the top-most layer that has it. */
async function lowerNames(lowers: string[], path: string): Promise<string[]> {
  for (const dir of lowers) {
    try {
      return await readdir(join(dir, path));
    } catch (err) {
      const code = errnoCode(err);
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
    }
  }
  return [];
}

/**
 * The changes of an overlay upper directory against the layers below it, as dockerd 20.10 reports
 * them (its tree comparison): an entry absent below is an addition; one present below a
 * modification (a directory only when its size, mode or time differ); a whiteout (0/0 character
 * device) a deletion; in a directory made again in the container (opaque), what was below and is
 * not there any more is deleted too; and every directory holding a change is a modification. In
 * path order, parents first (dockerd's order is a map's); the init layer's mount points are left out.
 */
export async function overlayChanges(
  host: Pick<ArchiveHost, 'opaqueDirs'>,
  upper: string,
  lowers: string[],
): Promise<Change[]> {
  const opaque = await host.opaqueDirs(upper);
  const found = new Map<string, number>();
  const walk = async (rel: string): Promise<void> => {
    let names: string[];
    try {
      names = await readdir(join(upper, rel));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw err;
    }
    for (const name of names) {
      const path = posix.join('/', rel, name);
      const st = await lstat(join(upper, path)).catch(() => undefined);
      if (!st) continue;
      if (st.isCharacterDevice() && st.rdev === 0) {
        found.set(path, CHANGE_DELETE);
        continue;
      }
      const isDir = st.isDirectory();
      const below = await inLowers(lowers, path);
      if (!below) found.set(path, CHANGE_ADD);
      else if (
        !isDir ||
        !below.isDirectory() ||
        below.size !== st.size ||
        below.mode !== st.mode ||
        Math.floor(below.mtimeMs) !== Math.floor(st.mtimeMs)
      ) {
        found.set(path, CHANGE_MODIFY);
      }
      if (!isDir) continue;
      await walk(path);
      if (below?.isDirectory() && opaque.has(join(upper, path))) {
        const now = new Set(await readdir(join(upper, path)));
        for (const gone of await lowerNames(lowers, path)) {
          if (!now.has(gone)) found.set(posix.join(path, gone), CHANGE_DELETE);
        }
      }
    }
  };
  await walk('');
  const changes = dropInitPaths([...found].map(([Path, Kind]) => ({ Path, Kind })));
  // every directory holding a change is changed itself (dockerd keeps permissions so)
  const paths = new Map(changes.map((c) => [c.Path, c.Kind]));
  for (const c of changes) {
    for (let p = posix.dirname(c.Path); p !== '/'; p = posix.dirname(p)) {
      if (!paths.has(p)) paths.set(p, CHANGE_MODIFY);
    }
  }
  return [...paths].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([Path, Kind]) => ({ Path, Kind }));
}

/** Leave out the init layer's paths, and directories changed only by them. */
function dropInitPaths(changes: Change[]): Change[] {
  const kept = changes.filter((c) => !INIT_PATHS.has(c.Path));
  const parentsOfDropped = new Set(
    changes.filter((c) => INIT_PATHS.has(c.Path)).map((c) => posix.dirname(c.Path)),
  );
  return kept.filter(
    (c) =>
      c.Kind !== CHANGE_MODIFY ||
      !parentsOfDropped.has(c.Path) ||
      kept.some((o) => o.Path.startsWith(`${c.Path}/`)),
  );
}

/** GET /containers/{id}/changes: the writable layer against the image, null when unchanged. */
export async function containerChanges(
  snapshots: ContainerSnapshots,
  host: Pick<ArchiveHost, 'opaqueDirs'>,
  c: Container,
): Promise<Change[] | null> {
  const paths = await snapshots.paths(c.id);
  const lowers = paths.LowerDir ? paths.LowerDir.split(':') : [];
  const changes = await overlayChanges(host, paths.UpperDir, lowers);
  return changes.length ? changes : null;
}
