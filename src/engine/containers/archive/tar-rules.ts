import { posix } from 'node:path';
import type tarStream from 'tar-stream';
import { invalidParameter } from '../../../common/errors.js';

/** The member types docker cp writes; the PAX and GNU records that describe them never arrive here. */
const WRITTEN = new Set([
  'file',
  'contiguous-file',
  'directory',
  'symlink',
  'link',
  'character-device',
  'block-device',
  'fifo',
]);

/** The largest owner id a file can have (uid_t; -1 means "unchanged" to chown). */
const MAX_ID = 2 ** 32 - 2;

/** A path relative to the extraction point, cleaned; undefined when it climbs out of it. */
function inside(path: string): string | undefined {
  const clean = posix.normalize(path.replace(/^\/+/, '') || '.');
  if (clean === '..' || clean.startsWith('../')) return undefined;
  return clean.replace(/\/+$/, '');
}

/**
 * One member of an archive docker cp extracts at `dest` (a container path), checked as dockerd's
 * archive.Unpack does: the name (an absolute one is taken below `dest`) must stay below `dest`;
 * a hard link must lead to a name below `dest`; a relative symbolic link must not lead above
 * `dest` (an absolute one is read in the container, where it cannot leave it); only the types
 * dockerd writes; owners that a file can have. Returns the member's cleaned path below `dest`
 * ('.' for `dest` itself). Every refusal is a 400 naming container paths only.
 */
export function checkMember(h: tarStream.Header, dest: string): string {
  const rel = inside(h.name);
  if (rel === undefined) {
    throw invalidParameter(`${JSON.stringify(h.name)} is outside of ${JSON.stringify(dest)}`);
  }
  const type = h.type ?? 'file';
  if (!WRITTEN.has(type))
    throw invalidParameter(`unhandled tar header type ${type} (${JSON.stringify(h.name)})`);
  const at = posix.join(dest, rel);
  if (type === 'link') {
    const target = inside(h.linkname ?? '');
    if (target === undefined || target === '.' || !h.linkname) {
      throw invalidParameter(`invalid hardlink ${JSON.stringify(at)} -> ${JSON.stringify(h.linkname ?? '')}`);
    }
  }
  if (type === 'symlink') {
    const link = h.linkname ?? '';
    if (link === '') throw invalidParameter(`invalid symlink ${JSON.stringify(at)} -> ""`);
    if (!link.startsWith('/') && inside(posix.join(posix.dirname(rel), link)) === undefined) {
      throw invalidParameter(`invalid symlink ${JSON.stringify(at)} -> ${JSON.stringify(link)}`);
    }
  }
  for (const [what, id] of [
    ['uid', h.uid],
    ['gid', h.gid],
  ] as const) {
    if (id !== undefined && (!Number.isInteger(id) || id < 0 || id > MAX_ID)) {
      throw invalidParameter(`invalid ${what} ${id} for ${JSON.stringify(h.name)}`);
    }
  }
  return rel;
}

/** A member's time, or now when the archive's is not one a file can have. */
export function memberTime(h: tarStream.Header): Date {
  const t = h.mtime?.getTime();
  return t !== undefined && Number.isFinite(t) && t >= 0 && t < 2 ** 42 ? (h.mtime as Date) : new Date();
}
