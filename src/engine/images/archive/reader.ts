import { createHash, randomBytes } from 'node:crypto';
import { closeSync, createReadStream, openSync, writeSync } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import {
  BerthError,
  errnoCode,
  errorMessage,
  invalidParameter,
  systemError,
} from '../../../common/errors.js';
import type { StorageOps } from '../../storage/adapters/host.ops.js';
import { cleanMemberPath, decompress } from '../../storage/layer.apply.js';

/** The default cap on what one image archive may hold (its files, uncompressed): 64 GiB. */
export const DEFAULT_LOAD_LIMIT = 64 * 1024 ** 3;
/** The most members an image archive may have (real ones have a few per layer). */
export const MAX_ARCHIVE_MEMBERS = 100_000;
/** The largest JSON document (manifest.json, index.json, a config, a manifest) read from an archive. */
export const MAX_ARCHIVE_JSON = 16 * 1024 * 1024;

const PREFIX = 'load-';
const WHAT = 'image archive';

/** A regular file of an archive, spooled: its size and sha256 were taken as it arrived. */
export interface ArchiveFile {
  kind: 'file';
  size: number;
  digest: string;
  spool: string;
}

type ArchiveNode = ArchiveFile | { kind: 'dir' } | { kind: 'symlink'; target: string };

function refuse(message: string): BerthError {
  return invalidParameter(`invalid ${WHAT}: ${message}`);
}

function tooLarge(limit: number): BerthError {
  return new BerthError('TooLarge', `${WHAT} is larger than the engine accepts (${limit} bytes)`);
}

/**
 * An image archive received whole (docker load): its regular files spooled one per file under
 * `<data root>/tmp/load-<random>/`, its names kept in memory only. Nothing is ever written at a
 * path the archive names, so no member can land outside the spool; links are followed inside the
 * archive alone (an absolute target from the archive's root, `..` stopping at the root, as
 * dockerd's FollowSymlinkInScope).
 */
export class ImageArchive {
  constructor(
    readonly dir: string,
    private readonly nodes: Map<string, ArchiveNode>,
  ) {}

  /** The names of the top-level directories. */
  topDirs(): string[] {
    const out: string[] = [];
    for (const [name, node] of this.nodes) if (node.kind === 'dir' && !name.includes('/')) out.push(name);
    return out.sort();
  }

  /** The path `name` leads to once links are followed, inside the archive. */
  resolve(name: string): string {
    let parts = name.split('/').filter((p) => p !== '' && p !== '.');
    const done: string[] = [];
    for (let hops = 0; parts.length; ) {
      const part = parts.shift() as string;
      if (part === '..') {
        done.pop();
        continue;
      }
      const node = this.nodes.get([...done, part].join('/'));
      if (node?.kind !== 'symlink') {
        done.push(part);
        continue;
      }
      if (++hops > 40) throw refuse(`too many links in ${JSON.stringify(name)}`);
      if (node.target.startsWith('/')) done.length = 0;
      parts = [...node.target.split('/').filter((p) => p !== '' && p !== '.'), ...parts];
    }
    return done.join('/');
  }

  /** The regular file `name` leads to, or undefined. */
  file(name: string): ArchiveFile | undefined {
    const node = this.nodes.get(this.resolve(name));
    return node?.kind === 'file' ? node : undefined;
  }

  /** Like file(), refusing a name the archive does not hold as a file (`by` names who named it). */
  need(name: string, by: string): ArchiveFile {
    const f = this.file(name);
    if (!f) throw refuse(`${by} names ${JSON.stringify(name)}, which the archive does not hold`);
    return f;
  }

  /** A file's bytes, at most `limit` of them (refused beyond). */
  async read(f: ArchiveFile, name: string, limit = MAX_ARCHIVE_JSON): Promise<Buffer> {
    if (f.size > limit) throw refuse(`${name} is too large (${f.size} bytes; at most ${limit} are read)`);
    return readFile(f.spool);
  }

  /** A JSON document of the archive, with its exact bytes. */
  async readJson<T>(name: string, by: string): Promise<{ value: T; bytes: Buffer }> {
    const f = this.need(name, by);
    const bytes = await this.read(f, name);
    try {
      return { value: JSON.parse(bytes.toString('utf8')) as T, bytes };
    } catch (err) {
      throw refuse(`${name} is not JSON: ${errorMessage(err)}`);
    }
  }

  open(f: ArchiveFile): Readable {
    return createReadStream(f.spool);
  }

  /** Idempotent; never rejects. */
  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Where load spools its archives: `<data root>/tmp`; `sweep()` removes what a killed engine left. */
export class ArchiveSpool {
  constructor(
    readonly dir: string,
    readonly limit = DEFAULT_LOAD_LIMIT,
  ) {}

  async sweep(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.dir)) {
      if (name.startsWith(PREFIX)) await rm(join(this.dir, name), { recursive: true, force: true });
    }
  }

  /** 413 when a declared length is over the limit (nothing read yet). */
  checkDeclared(length: number | undefined): void {
    if (length !== undefined && length > this.limit) throw tooLarge(this.limit);
  }

  /**
   * Read an image archive (plain or compressed as dockerd accepts: gzip, bzip2, xz, zstd) into
   * the spool. Refused (400, nothing kept): names with `..` or absolute names, members below a
   * link or a file, symlinks whose relative target climbs out, hard links to anything but an
   * earlier file, devices and fifos, malformed tars; 413 beyond `limit` bytes of files.
   */
  async receive(input: AsyncIterable<Buffer>, ops: StorageOps): Promise<ImageArchive> {
    const dir = join(this.dir, `${PREFIX}${randomBytes(12).toString('hex')}`);
    await mkdir(dir, { recursive: true, mode: 0o700 }).catch((err) => {
      throw storeError(err);
    });
    const nodes = new Map<string, ArchiveNode>();
    try {
      await readMembers(
        decompress(input, ops, () => undefined, WHAT),
        dir,
        nodes,
        this.limit,
      );
    } catch (err) {
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      throw err;
    }
    return new ImageArchive(dir, nodes);
  }
}

/** The member's name cleaned to a path inside the archive; absolute and climbing names refused. */
function memberPath(name: string): string {
  if (name.startsWith('/')) throw refuse(`member ${JSON.stringify(name)} has an absolute name`);
  return cleanMemberPath(name, WHAT);
}

async function readMembers(
  source: AsyncIterable<Buffer>,
  dir: string,
  nodes: Map<string, ArchiveNode>,
  limit: number,
): Promise<void> {
  const extract = tarStream.extract();
  const feeding = pipeline(Readable.from(source), extract as unknown as NodeJS.WritableStream);
  feeding.catch(() => undefined);
  let count = 0;
  let total = 0;
  try {
    for await (const entry of extract) {
      const h = entry.header;
      if (++count > MAX_ARCHIVE_MEMBERS) throw refuse(`more than ${MAX_ARCHIVE_MEMBERS} members`);
      const rel = memberPath(h.name);
      const type = h.type ?? 'file';
      if (rel === '') {
        if (type !== 'directory') throw refuse(`member ${JSON.stringify(h.name)} is not a directory`);
        entry.resume();
        continue;
      }
      checkParents(nodes, rel);
      const existing = nodes.get(rel);
      if (existing?.kind === 'dir' && type !== 'directory')
        throw refuse(`member ${JSON.stringify(h.name)} replaces a directory`);
      if (existing && existing.kind !== 'dir' && type === 'directory')
        throw refuse(`directory ${JSON.stringify(h.name)} replaces a file or a link`);
      switch (type) {
        case 'directory':
          nodes.set(rel, { kind: 'dir' });
          entry.resume();
          break;
        case 'file':
        case 'contiguous-file': {
          const size = h.size ?? 0;
          total += size;
          if (total > limit) throw tooLarge(limit);
          nodes.set(rel, await spoolMember(entry as AsyncIterable<Buffer>, join(dir, String(count))));
          break;
        }
        case 'symlink': {
          const target = h.linkname ?? '';
          if (target === '') throw refuse(`symlink ${JSON.stringify(h.name)} has no target`);
          if (!target.startsWith('/')) {
            const at = posix.normalize(posix.join(posix.dirname(rel), target));
            if (at === '..' || at.startsWith('../'))
              throw refuse(
                `symlink ${JSON.stringify(h.name)} -> ${JSON.stringify(target)} leads out of the archive`,
              );
          }
          nodes.set(rel, { kind: 'symlink', target });
          entry.resume();
          break;
        }
        case 'link': {
          const name = h.linkname ?? '';
          if (name.startsWith('/') || name === '')
            throw refuse(
              `hard link ${JSON.stringify(h.name)} -> ${JSON.stringify(name)} leads out of the archive`,
            );
          const target = cleanMemberPath(name, WHAT);
          const node = nodes.get(target);
          if (node?.kind !== 'file')
            throw refuse(
              `hard link ${JSON.stringify(h.name)} -> ${JSON.stringify(name)} names no earlier file`,
            );
          nodes.set(rel, node);
          entry.resume();
          break;
        }
        default:
          throw refuse(
            `member ${JSON.stringify(h.name)} is a ${type}: an image archive holds files, directories and links`,
          );
      }
    }
    await feeding;
  } catch (err) {
    extract.destroy();
    await feeding.catch(() => undefined);
    if (err instanceof BerthError) throw err;
    // tar-stream's words for an archive that stops inside a member
    if (/destroyed|Unexpected end/i.test(errorMessage(err)))
      throw refuse('unexpected end of the archive (cut short inside a member)');
    throw refuse(errorMessage(err));
  }
}

/** The parents of `rel` are directories (made so when missing), never links or files. */
function checkParents(nodes: Map<string, ArchiveNode>, rel: string): void {
  const parts = rel.split('/');
  for (let i = 1; i < parts.length; i++) {
    const parent = parts.slice(0, i).join('/');
    const node = nodes.get(parent);
    if (!node) nodes.set(parent, { kind: 'dir' });
    else if (node.kind === 'symlink') throw refuse(`member ${JSON.stringify(rel)} is below a link`);
    else if (node.kind === 'file') throw refuse(`member ${JSON.stringify(rel)} is below a file`);
  }
}

/** Write one member's data to `path`, hashing it (synchronous writes: the spool is local, as the content store's ingests). */
async function spoolMember(entry: AsyncIterable<Buffer>, path: string): Promise<ArchiveFile> {
  const hash = createHash('sha256');
  let size = 0;
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (err) {
    throw storeError(err);
  }
  try {
    for await (const chunk of entry) {
      hash.update(chunk);
      size += chunk.length;
      try {
        for (let off = 0; off < chunk.length; ) off += writeSync(fd, chunk, off, chunk.length - off);
      } catch (err) {
        throw storeError(err);
      }
    }
  } finally {
    closeSync(fd);
  }
  return { kind: 'file', size, digest: `sha256:${hash.digest('hex')}`, spool: path };
}

/** A failure of the engine's own spool, told without its path. */
function storeError(err: unknown): BerthError {
  const code = errnoCode(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return systemError("no space left in the engine's storage to receive the image archive");
  }
  return systemError(`cannot store the image archive: ${code ?? errorMessage(err)}`);
}
