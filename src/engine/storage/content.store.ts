import { createHash, type Hash, randomBytes } from 'node:crypto';
import { closeSync, createReadStream, fsyncSync, openSync, write, writeSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { invalidParameter, notFound, systemError } from '../../common/errors.js';
import { fsyncDir } from '../../common/fs/atomic.js';

/** `sha256:<hex>` with 64 lowercase hex digits. */
const SHA256 = /^sha256:([a-f0-9]{64})$/;

function hexOf(digest: string): string {
  const m = SHA256.exec(digest);
  if (!m) throw invalidParameter(`invalid digest ${JSON.stringify(digest)}: only sha256 is supported`);
  return m[1] as string;
}

/**
 * An open ingest: bytes go to `content/ingest/<random>` while they are hashed; commit verifies
 * the digest (when one is expected), fsyncs and renames the file to `content/blobs/sha256/<hex>`.
 * A crash leaves only an ingest file, which the next start deletes.
 */
export class BlobWriter {
  /** Absent when the caller vouches for the digest (it verified the bytes itself). */
  private readonly hash: Hash | undefined;
  private fd: number | undefined;
  private written = 0;
  private done = false;
  /** append(): writes in flight, in order, and the bytes they hold. */
  private queue: Promise<void> = Promise.resolve();
  private backlog = 0;
  private failed: unknown;

  constructor(
    private readonly store: ContentStore,
    private readonly path: string,
    private readonly verifiedDigest?: string,
  ) {
    this.fd = openSync(path, 'w', 0o644);
    if (!verifiedDigest) this.hash = createHash('sha256');
  }

  get size(): number {
    return this.written;
  }

  /** Append a chunk (synchronous: the ingest file is local). */
  write(chunk: Uint8Array): void {
    if (this.fd === undefined) throw systemError('write to a closed blob writer');
    let off = 0;
    while (off < chunk.length) off += writeSync(this.fd, chunk, off, chunk.length - off);
    this.hash?.update(chunk);
    this.written += chunk.length;
  }

  /**
   * Append a chunk without blocking the event loop: the writes go to the thread pool, in order;
   * resolves at once unless 16 MiB are still unwritten (then once they are). A failed write
   * fails commit().
   */
  async append(chunk: Uint8Array): Promise<void> {
    const fd = this.fd;
    if (fd === undefined) throw systemError('write to a closed blob writer');
    this.hash?.update(chunk);
    this.written += chunk.length;
    this.backlog += chunk.length;
    this.queue = this.queue.then(async () => {
      if (this.failed !== undefined) return;
      try {
        let off = 0;
        while (off < chunk.length) off += await writeAsync(fd, chunk, off, chunk.length - off);
      } catch (err) {
        this.failed = err;
      } finally {
        this.backlog -= chunk.length;
      }
    });
    if (this.backlog > 16 * 1024 * 1024) await this.queue;
  }

  /** The digest of what was written so far; call once, at the end. */
  digest(): string {
    if (!this.hash) return this.verifiedDigest as string;
    return `sha256:${this.hash.copy().digest('hex')}`;
  }

  /** Verify, fsync and move into place. Returns the digest. */
  async commit(expected?: string): Promise<string> {
    if (this.done) throw systemError('blob writer already finished');
    await this.queue;
    if (this.failed !== undefined) {
      await this.abort();
      throw this.failed;
    }
    const digest = this.digest();
    if (this.fd !== undefined) {
      // a pulled layer's blob (verifiedDigest) is not fsynced, like the layer's unpacked files:
      // a killed engine keeps it, a power cut may not (the next push of it then fails its digest)
      if (!this.verifiedDigest) fsyncSync(this.fd);
      closeSync(this.fd);
      this.fd = undefined;
    }
    this.done = true;
    if (expected !== undefined && expected !== digest) {
      await rm(this.path, { force: true });
      throw invalidParameter(`digest mismatch: expected ${expected}, got ${digest}`);
    }
    await this.store.adopt(this.path, digest);
    return digest;
  }

  async abort(): Promise<void> {
    await this.queue;
    if (this.fd !== undefined) {
      closeSync(this.fd);
      this.fd = undefined;
    }
    this.done = true;
    await rm(this.path, { force: true });
  }
}

function writeAsync(fd: number, buf: Uint8Array, off: number, len: number): Promise<number> {
  return new Promise((resolve, reject) => {
    write(fd, buf, off, len, null, (err, n) => (err ? reject(err) : resolve(n)));
  });
}

/** Content-addressed blobs under `<root>/blobs/sha256/<hex>`, written atomically and verified. */
export class ContentStore {
  readonly blobsDir: string;
  readonly ingestDir: string;

  constructor(readonly root: string) {
    this.blobsDir = join(root, 'blobs', 'sha256');
    this.ingestDir = join(root, 'ingest');
  }

  /** Create the directories and drop ingests a crash left behind. */
  async init(): Promise<void> {
    await mkdir(this.blobsDir, { recursive: true });
    await rm(this.ingestDir, { recursive: true, force: true });
    await mkdir(this.ingestDir, { recursive: true });
    // Temp files of interrupted atomic renames.
    for (const name of await readdir(this.blobsDir)) {
      if (!/^[a-f0-9]{64}$/.test(name)) await rm(join(this.blobsDir, name), { force: true, recursive: true });
    }
  }

  path(digest: string): string {
    return join(this.blobsDir, hexOf(digest));
  }

  /**
   * An ingest. `verifiedDigest`: the digest of the bytes to come, which the caller checks itself
   * (a pull verifies a layer as it streams): the writer does not hash them again, nor fsync
   * them (they are as durable as the layer's unpacked files).
   */
  writer(verifiedDigest?: string): BlobWriter {
    return new BlobWriter(this, join(this.ingestDir, randomBytes(12).toString('hex')), verifiedDigest);
  }

  /** Store a buffer; returns its digest. Idempotent. */
  async put(data: Uint8Array | string, expected?: string): Promise<string> {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    const w = this.writer();
    try {
      w.write(bytes);
    } catch (err) {
      await w.abort();
      throw err;
    }
    return w.commit(expected);
  }

  /** Move a finished ingest file into place under its digest. */
  async adopt(tmpPath: string, digest: string): Promise<void> {
    const target = this.path(digest);
    if (await this.has(digest)) {
      await rm(tmpPath, { force: true });
      return;
    }
    await rename(tmpPath, target);
    await fsyncDir(this.blobsDir);
  }

  async has(digest: string): Promise<boolean> {
    try {
      return (await stat(this.path(digest))).isFile();
    } catch {
      return false;
    }
  }

  async size(digest: string): Promise<number> {
    try {
      return (await stat(this.path(digest))).size;
    } catch {
      throw notFound(`blob ${digest} not found`);
    }
  }

  /** Read a whole (small) blob, verifying it. */
  async get(digest: string): Promise<Buffer> {
    let data: Buffer;
    try {
      data = await readFile(this.path(digest));
    } catch {
      throw notFound(`blob ${digest} not found`);
    }
    const actual = `sha256:${createHash('sha256').update(data).digest('hex')}`;
    if (actual !== digest) throw systemError(`blob ${digest} is corrupt (content hashes to ${actual})`);
    return data;
  }

  /** A read stream of a blob (callers verify when they need to: the hash is over the whole stream). */
  open(digest: string): NodeJS.ReadableStream {
    return createReadStream(this.path(digest));
  }

  /** Re-hash a blob; false when it is missing or corrupt. */
  async verify(digest: string): Promise<boolean> {
    const hash = createHash('sha256');
    try {
      for await (const chunk of createReadStream(this.path(digest))) hash.update(chunk as Buffer);
    } catch {
      return false;
    }
    return `sha256:${hash.digest('hex')}` === digest;
  }

  async delete(digest: string): Promise<void> {
    await rm(this.path(digest), { force: true });
  }

  async list(): Promise<string[]> {
    const names = await readdir(this.blobsDir).catch(() => [] as string[]);
    return names.filter((n) => /^[a-f0-9]{64}$/.test(n)).map((n) => `sha256:${n}`);
  }
}
