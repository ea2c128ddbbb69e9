import { createHash, type Hash } from 'node:crypto';
import { createReadStream, lstatSync, readFileSync, readlinkSync, type Stats, statSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ContentDigests, CopyPlan, CopySource } from '../build.types.js';
import { SMALL_FILE, Turns } from './pace.js';
import { PatternMatcher } from './patterns.js';

/**
 * The cache checksums of COPY/ADD sources, in the forms of dockerd's classic builder (what its
 * history shows: `COPY file:<sha256> in /dest`): `file:` for one file, `dir:` for a directory
 * (over its members), `multi:` over several. A member counts with its name, type, mode (with
 * set-id bits), size, link target and content; never its times or owners (a fresh checkout of
 * the same files is the same copy). Files are read as streams, unless the context's extraction
 * hashed them already (`known`: the file's inode, size and time unchanged since).
 */

function typeOf(st: Stats): string {
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFile()) return 'file';
  return 'other';
}

function header(h: Hash, name: string, type: string, mode: number, size: number, link: string): void {
  h.update(`${type}\0${name}\0${(mode & 0o7777).toString(8)}\0${size}\0${link}\0`);
}

/** The sha256 (hex) of a file's content, streamed when it is large. */
async function contentHash(path: string, size: number): Promise<string> {
  const h = createHash('sha256');
  if (size <= SMALL_FILE) h.update(readFileSync(path));
  else
    for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** The digest the context's extraction took of this file, when it is still the file it wrote. */
function knownHash(path: string, known: ContentDigests | undefined): string | undefined {
  if (!known?.size) return undefined;
  const st = statSync(path, { bigint: true });
  const d = known.get(`${st.dev}:${st.ino}`);
  if (!d || BigInt(d.size) !== st.size || d.mtimeNs !== st.mtimeNs) return undefined;
  return d.sha256;
}

/**
 * Content hashes by inode within one checksum (a file under many hard links is read once), and
 * the ones the context's extraction took.
 */
interface Contents {
  seen: Map<string, string>;
  known?: ContentDigests;
}

/** The sha256 (hex) of one member: `name` is its path in the copy. */
async function memberHash(path: string, name: string, st: Stats, contents: Contents): Promise<string> {
  const h = createHash('sha256');
  const type = typeOf(st);
  const link = type === 'symlink' ? readlinkSync(path) : '';
  header(h, name, type, st.mode, type === 'file' ? st.size : 0, link);
  if (type === 'file') {
    const inode = `${st.dev}:${st.ino}`;
    let content = contents.seen.get(inode) ?? knownHash(path, contents.known);
    if (content === undefined) {
      content = await contentHash(path, st.size);
      if (st.nlink > 1) contents.seen.set(inode, content);
    }
    h.update(content);
  }
  return h.digest('hex');
}

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** The member hashes below a directory, by path (`exclude` against the path below it). */
async function walkHashes(
  dir: string,
  exclude: PatternMatcher,
  rel: string,
  out: string[],
  walk: { turns: Turns; contents: Contents },
): Promise<void> {
  const { turns, contents } = walk;
  const entries = await readdir(rel ? join(dir, rel) : dir);
  entries.sort();
  for (const name of entries) {
    await turns.take();
    const path = rel ? `${rel}/${name}` : name;
    if (!exclude.empty && exclude.matches(path)) continue;
    const full = join(dir, path);
    const st = lstatSync(full);
    out.push(await memberHash(full, path, st, contents));
    if (st.isDirectory()) await walkHashes(dir, exclude, path, out, walk);
  }
}

/**
 * One source's checksum: `file:<sha256>` or `dir:<sha256>` (its own mode and every member);
 * `known`: the context's digests when the source is in the context.
 */
export async function sourceChecksum(
  source: CopySource,
  exclude: string[] = [],
  known?: ContentDigests,
): Promise<string> {
  // resolved in its root already; a link left is one to a place outside it, read as the file
  const st = await stat(source.hostPath);
  const contents: Contents = { seen: new Map(), ...(known ? { known } : {}) };
  if (!source.isDir) return `file:${await memberHash(source.hostPath, source.relPath, st, contents)}`;
  const members: string[] = [`${source.relPath}\0${(st.mode & 0o7777).toString(8)}`];
  await walkHashes(source.hostPath, new PatternMatcher(exclude), '', members, {
    turns: new Turns(),
    contents,
  });
  return `dir:${sha(members.join(','))}`;
}

/** An in-memory file's checksum (a heredoc, a downloaded URL). */
export function inlineChecksum(file: CopyPlan['inline'][number]): string {
  const h = createHash('sha256');
  header(h, file.name, 'file', file.mode ?? 0o644, file.content.length, '');
  h.update(file.content);
  return `file:${h.digest('hex')}`;
}

/**
 * The checksum of everything a COPY/ADD takes: one source's own, or `multi:<sha256>` over each
 * one's in order (dockerd's getSourceHashFromInfos).
 */
export async function checksumSources(
  sources: CopySource[],
  inline: CopyPlan['inline'] = [],
  exclude: string[] = [],
  known?: ContentDigests,
): Promise<string> {
  const all: string[] = [];
  for (const s of sources) all.push(await sourceChecksum(s, exclude, known));
  for (const f of inline) all.push(inlineChecksum(f));
  if (all.length === 1) return all[0] as string;
  return `multi:${sha(all.join(','))}`;
}
