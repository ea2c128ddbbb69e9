import { createHash, type Hash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  futimesSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  rmSync,
  type Stats,
  symlinkSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { BerthError, errnoCode, errorMessage, invalidParameter } from '../../../common/errors.js';
import { checkMember, memberTime } from '../../containers/archive/tar-rules.js';
import { TarScanner, type TarScanSink } from '../../storage/tar-scan.js';
import type { KnownDigest } from '../build.types.js';
import { DEFER_FROM, DeferredContents } from './deferred.js';
import type { LargeFile, LocalSources } from './local-sources.js';
import type { NamedFiles } from './named-files.js';
import { Turns } from './pace.js';
import type { StoredComparison } from './stored-compare.js';

type Entry = AsyncIterable<Buffer> & { resume(): unknown; header: tarStream.Header };

/** What an extraction knows once the archive is read. */
export interface Extracted {
  digests: Map<string, KnownDigest>;
  large: LargeFile[];
  deferred?: DeferredContents;
}

/** How dockerd words an archive it cannot read (chrootarchive's untar, then archive/tar). */
export function tarReadError(err: unknown): BerthError {
  if (err instanceof BerthError) return err;
  const message = errorMessage(err);
  if (/invalid tar header|checksum/i.test(message))
    return invalidParameter('archive/tar: invalid tar header');
  const reason = /unexpected end of data|premature close/i.test(message) ? 'unexpected EOF' : message;
  return invalidParameter(`Error processing tar file(exit status 1): ${reason}`);
}

/**
 * Each member of an uncompressed tar in turn, read as it arrives (never buffered whole); an
 * archive that cannot be read fails with dockerd's words.
 */
export async function* tarMembers(source: AsyncIterable<Buffer>): AsyncGenerator<Entry> {
  const extract = tarStream.extract();
  let failure: unknown;
  const feeding = pipeline(Readable.from(source, { objectMode: false }), extract).catch((err) => {
    failure ??= err;
  });
  let finished = false;
  try {
    for await (const raw of extract) {
      const entry = raw as unknown as Entry;
      yield {
        header: entry.header,
        resume: () => entry.resume(),
        // a member cut short fails with what the archive's reading says
        async *[Symbol.asyncIterator]() {
          try {
            for await (const chunk of entry) yield chunk;
          } catch (err) {
            await feeding;
            throw tarReadError(failure ?? err);
          }
        },
      };
    }
    finished = true;
  } catch (err) {
    await feeding;
    throw tarReadError(failure ?? err);
  } finally {
    // the reader stopped early (a refused member): stop reading the source too
    if (!finished) extract.destroy();
  }
  await feeding;
  if (failure) throw tarReadError(failure);
}

/**
 * The directories known to be real below the root during one extraction (a member replacing
 * one takes it and everything below out of the set).
 */
class RealDirs {
  private readonly known = new Set<string>(['']);
  constructor(private readonly root: string) {}

  /** Makes the missing parents of `rel`; a parent that is a link or a file is a refusal. */
  parentsOf(rel: string): void {
    const parts = rel.split('/');
    parts.pop();
    let cur = '';
    for (const part of parts) {
      cur = cur ? `${cur}/${part}` : part;
      if (this.known.has(cur)) continue;
      const st = lstatOrNot(join(this.root, cur));
      if (!st) mkdirSync(join(this.root, cur), { mode: 0o755 });
      else if (!st.isDirectory()) {
        throw invalidParameter(
          `cannot extract ${JSON.stringify(rel)}: ${JSON.stringify(cur)} is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}`,
        );
      }
      this.known.add(cur);
    }
  }

  add(rel: string): void {
    this.known.add(rel);
  }

  forget(rel: string): void {
    this.known.delete(rel);
    const prefix = `${rel}/`;
    for (const k of this.known) if (k.startsWith(prefix)) this.known.delete(k);
  }
}

/**
 * A context tar's extraction below `root` (an empty directory of the engine's), fed its chunks
 * synchronously as they arrive (`write`), defensively: member names and hard links stay below
 * the root (checked as dockerd's Unpack does), nothing is written through a symbolic link (a
 * member below one is refused), devices and fifos are not made (a context has no use for them),
 * owners are not kept (COPY sets its own). Modes and times are kept; directories get theirs once
 * their members are in. The archive is read by the storage's TarScanner (no stream per member)
 * and files are written and hashed from the chunks themselves: the result is each regular file's
 * content digest by inode (what COPY's checksum would otherwise read every byte again for). With
 * `hold`, large files' contents are held in memory rather than written (DeferredContents:
 * `staging` is where they are written out from, outside the root), as far as the engine's bound
 * for them allows. An archive that cannot be read fails in dockerd's words.
 */
export class ContextExtraction {
  readonly digests = new Map<string, KnownDigest>();
  /** The large regular files extracted (for the engine's store of context sources). */
  readonly large: LargeFile[] = [];
  private readonly deferred: DeferredContents | undefined;
  private readonly writer: ContextWriter;
  private readonly scanner: TarScanner;
  private done = false;

  /** In `views` lending, the buffer of the last chunk written (given back once a chunk of another begins). */
  private lastBuffer: ArrayBufferLike | undefined;

  /**
   * `named`: small files to keep by name as they pass (the Dockerfile, the ignore files); `lend`:
   * how the source's chunks may be used once written. `whole`: each chunk that is all of its
   * buffer is the source's own, used by nobody else (node's HTTP parser makes one per body piece),
   * and a held file's such chunks are handed over to the held-contents thread whole rather than
   * copied; `views`: every chunk is a view of a buffer the source reads into again once it is
   * given back (`recycle`, a body read below the parser: RawChunkedBody), the chunks of one buffer
   * one after another: held files' pieces are copied, and each buffer is given back once a chunk
   * of another begins (a cached build's upload then reads into the same few buffers).
   */
  constructor(
    root: string,
    hold?: { staging: string; sources?: LocalSources | undefined },
    named?: NamedFiles,
    private readonly lend: Lending = 'none',
    private readonly recycle?: (buffer: ArrayBufferLike) => void,
  ) {
    this.deferred = hold ? new DeferredContents(root, hold.staging, this.digests, hold.sources) : undefined;
    this.writer = new ContextWriter(root, this.digests, this.deferred, named, this.large);
    this.scanner = new TarScanner(this.writer);
  }

  /**
   * The next chunk of the archive: the members it completes are written. `lent` false: this chunk
   * is not the source's to give (whatever `lend` says).
   */
  write(chunk: Buffer, lent = true): void {
    const views = this.lend === 'views';
    if (views && lent && chunk.buffer !== this.lastBuffer) {
      // every chunk of the last buffer is written (nothing of it kept): it may be read into again
      if (this.lastBuffer) this.recycle?.(this.lastBuffer);
      this.lastBuffer = chunk.buffer;
    }
    this.writer.owned =
      lent &&
      this.lend === 'whole' &&
      chunk.buffer instanceof ArrayBuffer &&
      chunk.byteOffset === 0 &&
      chunk.buffer.byteLength === chunk.length;
    try {
      this.scanner.write(chunk);
    } catch (err) {
      throw tarReadError(err);
    }
    this.deferred?.between();
  }

  /**
   * The archive ended: its directories get their times; the digests (the held files' once the
   * held-contents thread has them) and the held contents.
   */
  async end(): Promise<Extracted> {
    try {
      this.scanner.finish();
    } catch (err) {
      this.fail();
      throw tarReadError(err);
    }
    this.done = true;
    try {
      this.writer.close();
      this.writer.finish();
      await this.deferred?.settle();
    } catch (err) {
      this.deferred?.release();
      throw err;
    }
    return {
      digests: this.digests,
      large: this.large,
      ...(this.deferred ? { deferred: this.deferred } : {}),
    };
  }

  /** The extraction stops short (a failure, a cancel): the file being written is closed, held contents go. */
  fail(): void {
    if (this.done) return;
    this.done = true;
    this.writer.close();
    this.deferred?.release();
  }
}

/** How a source lends its chunks' buffers to an extraction (ContextExtraction). */
export type Lending = 'none' | 'whole' | 'views';

/**
 * Extract a context tar that comes as an async stream of chunks (a decompressor's, a download's)
 * below `root`, as ContextExtraction does; other requests get a turn at least every 20 ms.
 */
export async function extractContextTar(
  source: AsyncIterable<Buffer>,
  root: string,
  signal: AbortSignal,
  hold?: { staging: string; sources?: LocalSources | undefined },
  named?: NamedFiles,
): Promise<Extracted> {
  const extraction = new ContextExtraction(root, hold, named);
  const turns = new Turns();
  try {
    for await (const chunk of source) {
      signal.throwIfAborted();
      extraction.write(chunk);
      await turns.take();
    }
  } catch (err) {
    extraction.fail();
    signal.throwIfAborted();
    throw tarReadError(err);
  }
  return extraction.end();
}

/** What the file system says of a member that is the archive's fault (host paths never shown). */
const ARCHIVE_FAULTS: Record<string, string> = {
  ENAMETOOLONG: 'file name too long',
  ELOOP: 'too many levels of symbolic links',
  ENOTDIR: 'not a directory',
  EISDIR: 'is a directory',
  EEXIST: 'file exists',
  EINVAL: 'invalid argument',
};

/** A file-system refusal of a member in dockerd's words (other errors as they are). */
function memberFault(rel: string, err: unknown): unknown {
  const code = errnoCode(err);
  if (code && ARCHIVE_FAULTS[code]) {
    return invalidParameter(
      `Error processing tar file(exit status 1): ${JSON.stringify(rel)}: ${ARCHIVE_FAULTS[code]}`,
    );
  }
  return err;
}

/** All of `chunk` written at the descriptor's position. */
function writeAll(fd: number, chunk: Buffer): void {
  for (let done = 0; done < chunk.length; ) done += writeSync(fd, chunk, done);
}

/**
 * The members of a context tar written below a root as the scanner reads them. Synchronous
 * file-system calls (as docker cp's extraction): each is a few microseconds where a promise
 * through the thread pool costs far more, and a context has thousands of small files; the
 * extraction lets other requests in between chunks.
 */
class ContextWriter implements TarScanSink {
  private readonly dirs: RealDirs;
  private readonly dirTimes = new Map<string, { mode: number; mtime: Date }>();
  /** Whether the chunk being read is the request's own, to be handed over whole (see `lend`). */
  owned = false;
  /** The regular file being written (or, `held`, whose content is being held). */
  private file:
    | {
        rel: string;
        fd: number;
        mode: number;
        mtime: Date;
        /** Its content's hash (a held file's is taken on the held-contents thread). */
        hash?: Hash;
        size: number;
        /** Its number among the held contents. */
        held?: number;
        /** A held file's comparison with the stored content of its path and size, while equal. */
        compared?: StoredComparison | undefined;
        /** Its content kept by name (NamedFiles) too. */
        kept?: Buffer[];
      }
    | undefined;

  /**
   * `digests`: each regular file's digest by inode (a later file on a reused inode replaces it);
   * `named`: the files kept by name.
   */
  constructor(
    private readonly root: string,
    private readonly digests: Map<string, KnownDigest>,
    private readonly deferred: DeferredContents | undefined,
    private readonly named: NamedFiles | undefined,
    private readonly large: LargeFile[],
  ) {
    this.dirs = new RealDirs(root);
  }

  member(h: tarStream.Header): void {
    const type = h.type ?? 'file';
    if (type === 'character-device' || type === 'block-device' || type === 'fifo') return;
    const rel = checkMember(h, '/');
    if (rel === '.') return;
    try {
      this.start(rel, h);
    } catch (err) {
      throw memberFault(rel, err);
    }
  }

  data(chunk: Buffer): void {
    const f = this.file;
    if (!f) return;
    if (f.held !== undefined && this.deferred) {
      if (f.compared?.equal(chunk) === true) {
        // equal to the stored content so far: nothing of it is hashed or kept
        f.kept?.push(Buffer.from(chunk));
        return;
      }
      if (f.compared) {
        // the first difference: the member is hashed and held from its first byte
        f.compared = undefined;
        this.deferred.storedDiffers(f.held);
      }
      this.deferred.data(f.held, chunk, this.owned);
    } else {
      writeAll(f.fd, chunk);
      f.hash?.update(chunk);
    }
    // a copy: the chunk may be handed over to the held-contents thread
    f.kept?.push(Buffer.from(chunk));
  }

  end(): void {
    const f = this.file;
    if (!f) return;
    if (f.kept) this.named?.keep(f.rel, Buffer.concat(f.kept));
    if (f.size >= DEFER_FROM) this.large.push({ rel: f.rel, size: f.size });
    if (f.held !== undefined && this.deferred) {
      const { rel, fd, held: id, size, mode, mtime } = f;
      if (f.compared) this.deferred.storedEnd(id);
      f.compared = undefined;
      f.held = undefined;
      this.deferred.hold(rel, fd, id, { size, mode, mtime });
      this.close();
      return;
    }
    fchmodSync(f.fd, f.mode);
    futimesSync(f.fd, f.mtime, f.mtime);
    const st = fstatSync(f.fd, { bigint: true });
    this.digests.set(`${st.dev}:${st.ino}`, {
      size: Number(st.size),
      mtimeNs: st.mtimeNs,
      sha256: (f.hash as Hash).digest('hex'),
    });
    this.close();
  }

  /** Closes the file being written (an archive that failed mid-member). */
  close(): void {
    if (!this.file) return;
    // a content held for a file the archive did not complete: its share goes back
    if (this.file.held !== undefined) this.deferred?.giveBack(this.file.held, this.file.size);
    closeSync(this.file.fd);
    this.file = undefined;
  }

  /** The directories' modes and times (deepest first: after their members changed them). */
  finish(): void {
    for (const [rel, { mode, mtime }] of [...this.dirTimes].sort((a, b) => b[0].length - a[0].length)) {
      const at = join(this.root, rel);
      chmodSync(at, mode);
      utimesSync(at, mtime, mtime);
    }
  }

  private start(rel: string, h: tarStream.Header): void {
    const { dirs, dirTimes } = this;
    const type = h.type ?? 'file';
    const keep = this.named?.member(rel, type, h.size ?? 0) ?? false;
    dirs.parentsOf(rel);
    const at = join(this.root, rel);
    const existing = lstatOrNot(at);
    if (existing && !(existing.isDirectory() && type === 'directory')) {
      dirs.forget(rel);
      dirTimes.delete(rel);
      this.deferred?.forget(rel);
      rmSync(at, { recursive: true, force: true });
    }
    const mode = (h.mode ?? 0o644) & 0o7777;
    const mtime = memberTime(h);
    switch (type) {
      case 'directory':
        if (!existing?.isDirectory()) mkdirSync(at, { mode: 0o700 });
        dirs.add(rel);
        dirTimes.set(rel, { mode, mtime });
        return;
      case 'symlink':
        symlinkSync(h.linkname ?? '', at);
        try {
          lutimesSync(at, mtime, mtime);
        } catch {
          // a time the file system refuses is no reason to fail the build
        }
        return;
      case 'link': {
        const target = checkMember({ ...h, type: 'file', name: h.linkname ?? '' }, '/');
        dirs.parentsOf(target);
        const st = lstatOrNot(join(this.root, target));
        if (!st || st.isDirectory()) {
          throw invalidParameter(`invalid hardlink ${JSON.stringify(rel)} -> ${JSON.stringify(h.linkname)}`);
        }
        // both names share one content: a held one is written now
        this.deferred?.writeInPlace(target);
        linkSync(join(this.root, target), at);
        return;
      }
      default: {
        const fd = openSync(
          at,
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o600,
        );
        const size = h.size ?? 0;
        const held = this.deferred?.take(size);
        // a content the engine stored under this path and size: compared with it as it arrives
        const compared = held !== undefined ? this.deferred?.compareStored(held, rel, size) : undefined;
        this.file = {
          compared,
          rel,
          fd,
          mode,
          mtime,
          size,
          ...(held !== undefined ? { held } : { hash: createHash('sha256') }),
          ...(keep ? { kept: [] } : {}),
        };
      }
    }
  }
}

function lstatOrNot(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}
