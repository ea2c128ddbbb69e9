import type { Dirent } from 'node:fs';
import { lstat, readdir, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import { errnoCode, invalidParameter } from '../../../common/errors.js';
import { resolveInRoot } from '../../runtime/oci/rootfs-path.js';
import type { CopySource } from '../build.types.js';
import { filepathMatch, hasWildcards, PatternMatcher } from './patterns.js';

export interface SourceOptions {
  /** `COPY` or `ADD`: the word dockerd's messages start with. */
  instruction?: 'COPY' | 'ADD';
  /** `--exclude` patterns (patternmatcher, against the path in the root). */
  exclude?: string[];
}

/** The paths below `root` (lexical order, links not followed) at most `depth` components deep. */
async function walk(root: string, depth: number, rel = '', out: string[] = []): Promise<string[]> {
  if (depth === 0) return out;
  let entries: Dirent[];
  try {
    entries = await readdir(rel ? posix.join(root, rel) : root, { withFileTypes: true });
  } catch (err) {
    if (errnoCode(err) === 'ENOTDIR' || errnoCode(err) === 'ENOENT') return out;
    throw err;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const path = rel ? `${rel}/${e.name}` : e.name;
    out.push(path);
    if (e.isDirectory()) await walk(root, depth - 1, path, out);
  }
  return out;
}

/**
 * The paths a wildcard pattern may match: below its leading components without wildcards (when
 * they are real directories: the walk follows no link, as dockerd's), as deep as the pattern.
 */
async function candidates(root: string, pattern: string): Promise<string[]> {
  const parts = pattern.split('/').filter((p) => p !== '' && p !== '.');
  let prefix = '';
  while (parts.length > 1 && !hasWildcards(parts[0] as string) && !(parts[0] as string).includes('\\')) {
    const next = prefix ? `${prefix}/${parts[0]}` : (parts[0] as string);
    const st = await lstat(posix.join(root, next)).catch(() => undefined);
    if (!st?.isDirectory()) return [];
    prefix = next;
    parts.shift();
  }
  return walk(root, parts.length, prefix);
}

/**
 * One source path in `root`: followed through links inside the root (a link out of it, or `..`,
 * stays in it: moby's FollowSymlinkInScope), as dockerd's copyInfoForFile.
 */
async function sourceAt(root: string, path: string, instruction: string): Promise<CopySource> {
  const hostPath = await resolveInRoot(root, path);
  const st = await stat(hostPath).catch((err) => {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR' || errnoCode(err) === 'ELOOP') {
      throw invalidParameter(
        `${instruction} failed: file not found in build context or excluded by .dockerignore: stat ${path}: file does not exist`,
      );
    }
    throw err;
  });
  const relPath = posix.normalize(path || '.').replace(/\/+$/, '') || '.';
  return { hostPath, relPath, isDir: st.isDirectory() };
}

/**
 * The files and directories COPY/ADD takes for `sources` (as written, relative to `root`: the
 * context, or a stage's or image's filesystem), as dockerd's classic builder finds them: a
 * leading `/` or `./` dropped; a path with wildcards matched (filepath.Match) against every path
 * of the root, each match taken; a link as a source followed inside the root. Sources matching an
 * `--exclude` pattern are left out. Nothing found for a path is dockerd's "file not found" error,
 * nothing at all its "no source files were specified".
 */
export async function resolveCopySources(
  root: string,
  sources: string[],
  opts: SourceOptions = {},
): Promise<CopySource[]> {
  const instruction = opts.instruction ?? 'COPY';
  const exclude = new PatternMatcher(opts.exclude ?? []);
  const found: CopySource[] = [];
  for (const source of sources) {
    let path = source.startsWith('/') ? source.slice(1) : source;
    if (path.startsWith('./')) path = path.slice(2);
    const clean = posix.normalize(path || '.');
    if (clean === '..' || clean.startsWith('../')) {
      throw invalidParameter(`${instruction} failed: forbidden path outside the build context: ${source} ()`);
    }
    if (hasWildcards(path)) {
      for (const rel of await candidates(root, path)) {
        let match = false;
        try {
          match = filepathMatch(path, rel);
        } catch {
          // dockerd ignores a malformed pattern's error: nothing matches
        }
        if (match) found.push(await sourceAt(root, rel, instruction));
      }
    } else {
      found.push(await sourceAt(root, path, instruction));
    }
  }
  const kept = exclude.empty ? found : found.filter((s) => !exclude.matches(s.relPath));
  if (kept.length === 0) throw invalidParameter(`${instruction} failed: no source files were specified`);
  return kept;
}

/**
 * dockerd's rule for several sources: the destination must be a directory written with a
 * trailing `/` (checked once wildcards are expanded).
 */
export function checkCopyDestination(instruction: 'COPY' | 'ADD', count: number, dest: string): void {
  if (count > 1 && !dest.endsWith('/')) {
    throw invalidParameter(
      `When using ${instruction} with more than one source file, the destination must be a directory and end with a /`,
    );
  }
}
