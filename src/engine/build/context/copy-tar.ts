import { createReadStream, lstatSync, readFileSync, readlinkSync, type Stats } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { errnoCode, invalidParameter } from '../../../common/errors.js';
import { checkMember, memberTime } from '../../containers/archive/tar-rules.js';
import { HostStorageOps, type StorageOps } from '../../storage/adapters/host.ops.js';
import type { CopyPlan, CopySource, CopyTar } from '../build.types.js';
import { tarMembers } from './context-tar.js';
import { SMALL_FILE, Turns } from './pace.js';
import { PatternMatcher } from './patterns.js';
import { isTarHeader, sniffArchive } from './sniff.js';

export interface CopyTarDeps {
  /** Decompressors for archives ADD extracts (bzip2, xz, zstd); the host's by default. */
  ops?: StorageOps;
}

/** A container path without its leading `/` (a member name of a tar rooted at `/`). */
const member = (path: string) => posix.normalize(path).replace(/^\/+/, '').replace(/\/+$/, '');

async function* once(chunk: Buffer): AsyncGenerator<Buffer> {
  yield chunk;
}

/** Whether a file is a tar archive, in any compression (dockerd's isArchivePath for ADD). */
export async function isArchiveFile(path: string, ops: StorageOps): Promise<boolean> {
  const fh = await open(path, 'r');
  try {
    const head = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead === 0) return false;
    const sniffed = await sniffArchive(once(head.subarray(0, bytesRead)), ops, 'archive').catch(
      () => undefined,
    );
    if (!sniffed) return false;
    const first = await sniffed.bytes.next().catch(() => ({ done: true as const, value: undefined }));
    await sniffed.bytes.return(undefined).catch(() => undefined);
    const block = first.done ? undefined : first.value;
    return (
      !!block && block.length >= 512 && !block.subarray(0, 512).every((b) => b === 0) && isTarHeader(block)
    );
  } finally {
    await fh.close();
  }
}

/**
 * The tar a COPY or ADD extracts at `/` in the step's container, built as it is read:
 * - the directories from `existingDir` down to where the files go (0755; owned uid:gid for a
 *   file's parents and a copied directory itself, root's above a copied directory, as dockerd);
 * - a file source at `dest` (or, when `destIsDir`, at `dest/<its name>`, `dest/<its path>` with
 *   `--parents`), a directory source's contents below `dest` (below `dest/<its path>` with
 *   `--parents`), links in it kept as links, devices and sockets left out; `--exclude` patterns
 *   leave members out; every member owned uid:gid, with `--chmod` as its mode when given (links
 *   aside), the source's mode and time otherwise;
 * - with `extractArchives` (ADD), a source that is a tar in any compression is extracted below
 *   `dest` instead, its members checked as any client's tar (names and links stay below `dest`),
 *   keeping their owners, modes and times (as dockerd);
 * - the inline files (heredocs, downloads) at `dest` or `dest/<name>`.
 * A source that cannot be read fails the stream.
 */
export function makeCopyTar(plan: CopyPlan, deps: CopyTarDeps = {}): CopyTar {
  const pack = tarStream.pack();
  const ops = deps.ops ?? new HostStorageOps();
  void (async () => {
    try {
      await writeCopy(pack, plan, ops);
      pack.finalize();
    } catch (err) {
      pack.destroy(err as Error);
    }
  })();
  return pack as unknown as CopyTar;
}

type Header = Parameters<tarStream.Pack['entry']>[0];

function entry(pack: tarStream.Pack, h: Header, content?: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    if (content !== undefined) pack.entry(h, content, (err) => (err ? reject(err) : resolve()));
    else pack.entry(h, (err) => (err ? reject(err) : resolve()));
  });
}

/** A file member whose bytes come from a host file, or a stream (a member of an archive). */
async function fileEntry(
  pack: tarStream.Pack,
  h: Header,
  from: string | AsyncIterable<Buffer>,
): Promise<void> {
  if (typeof from === 'string' && (h.size ?? 0) <= SMALL_FILE) {
    const content = readFileSync(from);
    // changed since its stat: the header must say what the member holds
    await entry(pack, { ...h, size: content.length }, content);
    return;
  }
  const done = new Promise<void>((resolve, reject) => {
    const sink = pack.entry(h, (err) => (err ? reject(err) : resolve()));
    const source = typeof from === 'string' ? createReadStream(from, { highWaterMark: 1 << 20 }) : from;
    pipeline(source, sink as unknown as NodeJS.WritableStream).catch(reject);
  });
  await done;
}

async function writeCopy(pack: tarStream.Pack, plan: CopyPlan, ops: StorageOps): Promise<void> {
  const made = new Set<string>();
  const now = new Date();
  const existing = member(plan.existingDir ?? '/');
  /**
   * Entries for the directories down to `path` (included) below existingDir, made 0755 as
   * dockerd makes them: owned uid:gid when `chownAll` (the parents of a copied file), else only
   * `path` is (a copied directory's parents stay root's).
   */
  const dirsTo = async (path: string, chownAll: boolean) => {
    const parts = path.split('/').filter(Boolean);
    let cur = '';
    for (const part of parts) {
      cur = cur ? `${cur}/${part}` : part;
      const below = existing === '' || existing === '.' || cur.startsWith(`${existing}/`);
      if (!below || made.has(cur)) continue;
      made.add(cur);
      const owned = chownAll || cur === path;
      await entry(pack, {
        name: `${cur}/`,
        type: 'directory',
        mode: 0o755,
        uid: owned ? plan.uid : 0,
        gid: owned ? plan.gid : 0,
        mtime: now,
      });
    }
  };
  const dest = member(plan.dest);
  const exclude = new PatternMatcher(plan.exclude ?? []);
  const walk = { turns: new Turns(), links: new Map<string, string>() };
  for (const source of plan.sources) {
    if (source.isDir) {
      const at = plan.parents ? member(posix.join(dest, source.relPath)) : dest;
      await dirsTo(at, plan.parents);
      await copyDir(pack, plan, source.hostPath, at, exclude, walk);
      continue;
    }
    if (plan.extractArchives && (await isArchiveFile(source.hostPath, ops))) {
      await dirsTo(dest, false);
      await extractArchive(pack, source, dest, ops);
      continue;
    }
    const name = plan.destIsDir
      ? member(posix.join(dest, plan.parents ? source.relPath : posix.basename(source.relPath)))
      : dest;
    await dirsTo(posix.dirname(name) === '.' ? '' : posix.dirname(name), true);
    const st = await stat(source.hostPath);
    await fileEntry(
      pack,
      {
        name,
        type: 'file',
        size: st.size,
        mode: plan.mode ?? st.mode & 0o7777,
        uid: plan.uid,
        gid: plan.gid,
        mtime: st.mtime,
      },
      source.hostPath,
    );
  }
  for (const file of plan.inline) {
    const name = plan.destIsDir ? member(posix.join(dest, file.name)) : dest;
    await dirsTo(posix.dirname(name) === '.' ? '' : posix.dirname(name), true);
    await entry(
      pack,
      {
        name,
        type: 'file',
        size: file.content.length,
        mode: plan.mode ?? file.mode ?? 0o644,
        uid: plan.uid,
        gid: plan.gid,
        mtime: file.mtime ?? now,
      },
      file.content,
    );
  }
}

/**
 * A directory's members below `at` (sorted; symbolic links as links, hard links within the copy
 * as hard links; `exclude` against the path in it).
 */
async function copyDir(
  pack: tarStream.Pack,
  plan: CopyPlan,
  root: string,
  at: string,
  exclude: PatternMatcher,
  walk: { turns: Turns; links: Map<string, string> },
  rel = '',
): Promise<void> {
  const { turns, links } = walk;
  const names = await readdir(rel ? join(root, rel) : root);
  names.sort();
  for (const name of names) {
    await turns.take();
    const path = rel ? `${rel}/${name}` : name;
    if (!exclude.empty && exclude.matches(path)) continue;
    const full = join(root, path);
    let st: Stats;
    try {
      st = lstatSync(full);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') continue;
      throw err;
    }
    const target = at ? `${at}/${path}` : path;
    const base = { uid: plan.uid, gid: plan.gid, mtime: st.mtime };
    if (st.isDirectory()) {
      await entry(pack, {
        ...base,
        name: `${target}/`,
        type: 'directory',
        mode: plan.mode ?? st.mode & 0o7777,
      });
      await copyDir(pack, plan, root, at, exclude, walk, path);
    } else if (st.isSymbolicLink()) {
      await entry(pack, {
        ...base,
        name: target,
        type: 'symlink',
        mode: 0o777,
        linkname: readlinkSync(full),
      });
    } else if (st.isFile()) {
      // hard links stay links (busybox's /bin is one file under 400 names)
      const inode = st.nlink > 1 ? `${st.dev}:${st.ino}` : undefined;
      const first = inode !== undefined ? links.get(inode) : undefined;
      if (first !== undefined) {
        await entry(pack, {
          ...base,
          name: target,
          type: 'link',
          mode: plan.mode ?? st.mode & 0o7777,
          linkname: first,
        });
        continue;
      }
      if (inode !== undefined) links.set(inode, target);
      await fileEntry(
        pack,
        { ...base, name: target, type: 'file', size: st.size, mode: plan.mode ?? st.mode & 0o7777 },
        full,
      );
    }
  }
}

/** ADD of a local archive: its members below `dest`, checked as a client's tar. */
async function extractArchive(
  pack: tarStream.Pack,
  source: CopySource,
  dest: string,
  ops: StorageOps,
): Promise<void> {
  const sniffed = await sniffArchive(createReadStream(source.hostPath), ops, 'archive');
  try {
    for await (const e of tarMembers(sniffed.bytes)) {
      const h = e.header;
      const rel = checkMember(h, `/${dest}`);
      if (rel === '.') {
        e.resume();
        continue;
      }
      const name = dest ? `${dest}/${rel}` : rel;
      const type = h.type ?? 'file';
      const base: Header = {
        name,
        type,
        mode: (h.mode ?? 0o644) & 0o7777,
        uid: h.uid ?? 0,
        gid: h.gid ?? 0,
        mtime: memberTime(h),
      };
      if (type === 'file' || type === 'contiguous-file') {
        await fileEntry(pack, { ...base, type: 'file', size: h.size ?? 0 }, e);
      } else if (type === 'link') {
        e.resume();
        const target = checkMember({ ...h, type: 'file', name: h.linkname ?? '' }, `/${dest}`);
        await entry(pack, { ...base, linkname: dest ? `${dest}/${target}` : target });
      } else if (type === 'symlink') {
        e.resume();
        await entry(pack, { ...base, linkname: h.linkname ?? '' });
      } else if (type === 'directory') {
        e.resume();
        await entry(pack, { ...base, name: `${name}/` });
      } else if (type === 'character-device' || type === 'block-device' || type === 'fifo') {
        e.resume();
        await entry(pack, { ...base, devmajor: h.devmajor ?? 0, devminor: h.devminor ?? 0 });
      } else {
        e.resume();
        throw invalidParameter(`unhandled tar header type ${type} in ${source.relPath}`);
      }
    }
  } finally {
    await sniffed.bytes.return(undefined).catch(() => undefined);
  }
}
