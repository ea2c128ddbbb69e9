import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  type Stats,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { lstat } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import {
  BerthError,
  errnoCode,
  errorMessage,
  invalidParameter,
  isKind,
  notFound,
} from '../../../common/errors.js';
import { resolveUserInRootfs } from '../../runtime/oci/user.js';
import type { Container } from '../core/container.js';
import type { ArchiveHost } from './archive.host.js';
import { type ContainerFs, type HeldDir, inContainer, type Place, requestedPath } from './container-fs.js';
import type { CopyDeps } from './copy.js';
import { inContainerTerms, toolReason } from './host-errors.js';
import type { SpooledArchive } from './spool.js';
import { checkMember, memberTime } from './tar-rules.js';

export interface ExtractOptions {
  noOverwriteDirNonDir: boolean;
  copyUIDGID: boolean;
  /** The request's Content-Length, when it has one (checked against the spool's cap first). */
  declaredLength?: number;
}

type Entry = AsyncIterable<unknown> & { resume(): unknown; header: tarStream.Header };

/** Each member of an archive in turn; a malformed archive is a 400. */
async function* members(source: Readable): AsyncGenerator<Entry> {
  const extract = tarStream.extract();
  const feeding = pipeline(source, extract).catch((err) => {
    // the source's own refusals (an archive over the engine's cap: 413) keep their kind
    if (err instanceof BerthError) throw err;
    throw invalidParameter(`cannot read the archive: ${errorMessage(err)}`);
  });
  feeding.catch(() => undefined);
  try {
    for await (const entry of extract) yield entry as Entry;
  } catch (err) {
    await feeding;
    throw invalidParameter(`cannot read the archive: ${errorMessage(err)}`);
  }
  await feeding;
}

/** The extraction point: an existing directory the container may write (404, 400, 403). */
async function extractionPoint(fs: ContainerFs, c: Container, path: string): Promise<string> {
  const { clean } = requestedPath(path);
  const dest = await fs.resolve(clean, true, path);
  const st = await lstat(fs.host(dest)).catch((err) => {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') {
      throw notFound(`Could not find the file ${path} in container ${c.name.replace(/^\//, '')}`);
    }
    throw err;
  });
  if (!st.isDirectory()) throw invalidParameter('extraction point is not a directory');
  fs.checkWritable(dest);
  return dest;
}

/**
 * The owner, mode and time of what a descriptor holds (owner first: a chown clears set-id bits),
 * then closed. Synchronous, as the other calls of a member: the container is frozen while they
 * run, and each of them is a few microseconds where a promise costs far more (writeArchive lets
 * other requests in between members).
 */
function settle(fd: number, uid: number, gid: number, mode: number, mtime: Date): void {
  try {
    fchownSync(fd, uid, gid);
    fchmodSync(fd, mode);
    futimesSync(fd, mtime, mtime);
  } finally {
    closeSync(fd);
  }
}

/** All of `chunk` written at the descriptor's position. */
function writeAll(fd: number, chunk: Buffer): void {
  for (let done = 0; done < chunk.length; ) done += writeSync(fd, chunk, done);
}

/**
 * One tar member written at `at` (in its held parent: nothing below follows a link swapped in
 * since). Owners before modes, so set-uid and set-gid bits stay (dockerd's order).
 */
async function writeMember(
  host: Pick<ArchiveHost, 'mknod' | 'mkfifo'>,
  fs: ContainerFs,
  dest: string,
  at: Place,
  h: tarStream.Header,
  entry: Entry,
  owner: { uid: number; gid: number } | undefined,
): Promise<void> {
  const mode = (h.mode ?? 0o644) & 0o7777;
  const uid = owner?.uid ?? h.uid ?? 0;
  const gid = owner?.gid ?? h.gid ?? 0;
  const mtime = memberTime(h);
  switch (h.type) {
    case 'file':
    case 'contiguous-file': {
      const fd = openSync(
        at.host,
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        0o600,
      );
      try {
        // consumed to its end (a pipeline would end the member early and stall the archive)
        for await (const chunk of entry) writeAll(fd, chunk as Buffer);
      } catch (err) {
        closeSync(fd);
        throw err;
      }
      settle(fd, uid, gid, mode, mtime);
      return;
    }
    case 'directory': {
      entry.resume();
      try {
        mkdirSync(at.host, { mode: 0o700 });
      } catch (err) {
        if (errnoCode(err) !== 'EEXIST') throw err;
      }
      settle(
        openSync(at.host, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW),
        uid,
        gid,
        mode,
        mtime,
      );
      return;
    }
    case 'symlink':
      entry.resume();
      symlinkSync(h.linkname ?? '', at.host);
      break;
    case 'link': {
      entry.resume();
      // below the extraction point (checkMember), its links read in the container; the link
      // shares the inode of its target, whose owner, mode and times stay as they are
      const missing = () =>
        invalidParameter(
          `invalid hardlink ${JSON.stringify(at.path)} -> ${JSON.stringify(h.linkname)}: no such file`,
        );
      const source = await fs.resolve(posix.join(dest, h.linkname ?? ''), false).catch((err) => {
        throw isKind(err, 'NotFound') ? missing() : err;
      });
      const dir = await fs.openDir(posix.dirname(source), false).catch((err) => {
        throw isKind(err, 'NotFound') ? missing() : err;
      });
      try {
        linkSync(fs.place(dir, posix.basename(source)).host, at.host);
      } catch (err) {
        throw errnoCode(err) === 'ENOENT' ? missing() : inContainerTerms(err, fs);
      } finally {
        await dir.close();
      }
      return;
    }
    case 'character-device':
    case 'block-device':
    case 'fifo': {
      entry.resume();
      // made with its mode (a chmod after would follow a link swapped in)
      const made =
        h.type === 'fifo'
          ? host.mkfifo(at.tool, mode)
          : host.mknod(
              at.tool,
              h.type === 'block-device' ? 'b' : 'c',
              mode,
              h.devmajor ?? 0,
              h.devminor ?? 0,
            );
      await made.catch((err) => {
        throw invalidParameter(`mknod ${at.path}: ${toolReason(err)}`);
      });
      break;
    }
    default:
      // checkMember lets no other type through
      entry.resume();
      return;
  }
  lchownSync(at.host, uid, gid);
  lutimesSync(at.host, mtime, mtime);
}

/**
 * Make way for a member: what is there is removed unless both are directories (or 400). Whether
 * a directory or a link went (paths through it resolve differently now).
 */
async function replaceExisting(
  host: Pick<ArchiveHost, 'removeTree'>,
  at: Place,
  h: tarStream.Header,
  o: ExtractOptions,
): Promise<boolean> {
  let existing: Stats;
  try {
    existing = lstatSync(at.host);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
  const isDir = h.type === 'directory';
  if (o.noOverwriteDirNonDir && existing.isDirectory() !== isDir) {
    throw invalidParameter(
      existing.isDirectory()
        ? `cannot overwrite directory "${at.path}" with non-directory "${h.name}"`
        : `cannot overwrite non-directory "${at.path}" with directory "${h.name}"`,
    );
  }
  if (existing.isDirectory() && isDir) return false;
  if (!existing.isDirectory()) {
    unlinkSync(at.host);
    return existing.isSymbolicLink();
  }
  // a tree another process may be changing: GNU rm walks it without following links
  await host.removeTree(at.tool).catch((err) => {
    throw invalidParameter(`cannot remove ${at.path}: ${toolReason(err)}`);
  });
  return true;
}

/**
 * The parents held open during one extraction, by the path asked for: archives write many members
 * in one directory, and each opening walks from the mount's root. A directory or link the archive
 * removes may leave any of them stale: then all are let go. At most 32 at a time.
 */
class HeldParents {
  private readonly held = new Map<string, HeldDir>();

  constructor(private readonly fs: ContainerFs) {}

  async get(path: string): Promise<HeldDir> {
    const hit = this.held.get(path);
    if (hit) return hit;
    if (this.held.size >= 32) await this.clear();
    const dir = await this.fs.openDir(path, true);
    this.held.set(path, dir);
    return dir;
  }

  async clear(): Promise<void> {
    const all = [...this.held.values()];
    this.held.clear();
    for (const dir of all) await dir.close();
  }
}

/** Write every member of a checked archive below `dest`. */
async function writeArchive(
  d: Pick<CopyDeps, 'host'>,
  fs: ContainerFs,
  dest: string,
  archive: SpooledArchive,
  o: ExtractOptions,
  owner: { uid: number; gid: number } | undefined,
): Promise<void> {
  const parents = new HeldParents(fs);
  let ran = Date.now();
  try {
    for await (const entry of members(archive.open())) {
      // other requests get their turn at least every 20 ms
      if (Date.now() - ran > 20) {
        await new Promise((r) => setImmediate(r));
        ran = Date.now();
      }
      const h = entry.header;
      const rel = checkMember(h, dest);
      if (rel === '.') {
        entry.resume();
        continue;
      }
      const full = posix.join(dest, rel);
      let removed = false;
      try {
        const parent = await parents.get(posix.dirname(full));
        const at = fs.place(parent, posix.basename(full));
        fs.checkWritable(at.path);
        removed = await replaceExisting(d.host, at, h, o);
        await writeMember(d.host, fs, dest, at, h, entry, owner);
      } catch (err) {
        // told while the parents are held: their descriptors' paths map to the container's
        throw inContainerTerms(err, fs);
      } finally {
        entry.resume();
      }
      if (removed) await parents.clear();
    }
  } finally {
    await parents.clear();
  }
}

/**
 * Read a whole received archive once before anything is written: a malformed one (cut short,
 * bad checksums, oversized headers) or one with a member docker cp refuses is a 400 that leaves
 * the container untouched.
 */
async function checkArchive(archive: SpooledArchive, dest: string): Promise<void> {
  for await (const entry of members(archive.open())) {
    checkMember(entry.header, dest);
    entry.resume();
  }
}

/**
 * PUT /containers/{id}/archive (docker cp into a container). The path is checked first (404,
 * 400, 403 before the body is read); the archive is then received whole into the engine's spool
 * (bounded: 413) and read through once (400 for anything docker cp refuses), with the container
 * running as usual meanwhile; only then are its members written, every parent resolved inside
 * the container's filesystem as for reading (no link leads out of it), an existing entry replaced
 * (or, with `noOverwriteDirNonDir`, a directory and a non-directory never replace each other),
 * owners from the tar or, with `copyUIDGID`, the container's user. A running container is frozen
 * while its files change (so that it cannot swap a directory for a link under the copy), and only
 * then. The spool file is removed in every case. Emits `extract-to-dir`.
 */
export async function extractToContainer(
  d: CopyDeps,
  c: Container,
  path: string,
  body: Readable,
  o: ExtractOptions,
): Promise<void> {
  d.spool.checkDeclared(o.declaredLength);
  await inContainer(d, c, async (fs) => {
    await extractionPoint(fs, c, path);
  });
  const archive = await d.spool.receive(body, o.declaredLength);
  try {
    // one upload written at a time: a second freeze would fail, a thaw end another's freeze
    await d.writes.run(c.id, () =>
      inContainer(d, c, async (fs, dir) => {
        // checked against the extraction point as it is now
        await checkArchive(archive, await extractionPoint(fs, c, path));
        const owner = o.copyUIDGID ? await resolveUserInRootfs(dir, c.record.Config.User ?? '') : undefined;
        const freeze = c.isRunningProcess && !c.state.Paused;
        if (freeze) await d.runtime.pause(c.id);
        try {
          const dest = await extractionPoint(fs, c, path);
          await writeArchive(d, fs, dest, archive, o, owner ? { uid: owner.uid, gid: owner.gid } : undefined);
        } finally {
          if (freeze) await d.runtime.resume(c.id).catch(() => undefined);
        }
      }),
    );
    d.events.emit(c, 'extract-to-dir');
  } finally {
    await archive.remove();
  }
}
