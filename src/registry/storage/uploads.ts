import { type Hash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { type DigestAlgorithm, newHash, type ParsedDigest } from '../../common/digest.js';
import { uuidV4 } from '../../common/ids.js';
import { RegistryError } from '../errors.js';
import { Lru } from '../lru.js';
import { isPathNotFound, type StorageDriver } from './driver.js';
import { FilesystemDriver } from './filesystem.driver.js';
import { tryLease } from './lease.js';
import { paths, REPOSITORIES } from './paths.js';
import type { RegistryStore } from './store.js';

/** Upload ids we generate are UUIDs; accept any short token of safe characters from clients. */
const UPLOAD_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export interface UploadStatus {
  id: string;
  /** Bytes received so far (the size of the data file). */
  size: number;
  startedAt: Date;
}

/** An expected position for a chunk: Content-Range `start-end`, and/or the Content-Length. */
export interface ChunkRange {
  start: number;
  end: number;
}

interface HashState {
  hash: Hash;
  offset: number;
}

/**
 * Upload sessions, kept in storage (`_uploads/<id>/{startedat,data}`) so they survive restarts
 * and any replica over the same storage can continue them. The running sha256 of an upload is
 * kept in memory as an optimisation only; when it is missing or stale (another process appended,
 * or this one restarted) the digest is recomputed from the data on completion.
 */
export class UploadStore {
  private readonly hashes = new Lru<string, HashState>(1024);
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(
    private readonly driver: StorageDriver,
    private readonly store: RegistryStore,
    /** Uploads older than this are unknown (and purged). */
    private readonly maxAgeMs: number,
    /** Bytes of one blob over all its chunks (413 SIZE_INVALID beyond); 0: no limit. */
    private readonly maxBytes = 0,
  ) {}

  private tooLarge(): RegistryError {
    return new RegistryError(
      'SIZE_INVALID',
      `blob exceeds the maximum size of ${this.maxBytes} bytes`,
      { limit: this.maxBytes },
      413,
    );
  }

  private key(name: string, id: string): string {
    return `${name}\0${id}`;
  }

  /** Run `fn` with the upload locked against concurrent requests in this process. */
  private async locked<T>(name: string, id: string, fn: () => Promise<T>): Promise<T> {
    const key = this.key(name, id);
    const previous = this.locks.get(key) ?? Promise.resolve();
    const leased = () => this.leased(name, id, fn);
    const run = previous.then(leased, leased);
    const tail = run.catch(() => {});
    this.locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    }
  }

  /**
   * Run `fn` holding the upload's lease in the storage (`_uploads/<id>/writer`), so that another
   * registry process on the same root cannot write into the upload at the same time: a request
   * there is refused (409 BLOB_UPLOAD_INVALID) rather than interleaved. The lease of a process
   * that died is taken over (storage/lease.ts). Drivers other than the filesystem have none.
   */
  private async leased<T>(name: string, id: string, fn: () => Promise<T>): Promise<T> {
    if (!(this.driver instanceof FilesystemDriver) || !UPLOAD_ID.test(id)) return fn();
    const lease = await tryLease(this.driver.fullPath(`${paths.uploadDir(name, id)}/writer`));
    if (lease === 'missing') return fn(); // no such upload: fn answers BLOB_UPLOAD_UNKNOWN
    if ('busy' in lease) {
      throw new RegistryError(
        'BLOB_UPLOAD_INVALID',
        `the upload is being written by another registry process (pid ${lease.busy.pid} on ${lease.busy.host || 'unknown host'})`,
        { uuid: id },
        409,
      );
    }
    try {
      return await fn();
    } finally {
      await lease.release();
    }
  }

  private unknown(id: string): RegistryError {
    return new RegistryError('BLOB_UPLOAD_UNKNOWN', 'blob upload unknown to registry', { uuid: id });
  }

  async create(name: string): Promise<UploadStatus> {
    const id = uuidV4();
    const startedAt = new Date();
    const writer = await this.driver.writer(paths.uploadData(name, id), false);
    await writer.close();
    await this.driver.putContent(paths.uploadStartedAt(name, id), formatRfc3339(startedAt));
    this.hashes.set(this.key(name, id), { hash: newHash('sha256'), offset: 0 });
    return { id, size: 0, startedAt };
  }

  async status(name: string, id: string): Promise<UploadStatus> {
    if (!UPLOAD_ID.test(id)) throw this.unknown(id);
    let startedAt: Date;
    try {
      const text = (await this.driver.getContent(paths.uploadStartedAt(name, id))).toString('utf8').trim();
      startedAt = new Date(text);
      if (Number.isNaN(startedAt.getTime())) startedAt = new Date(0);
    } catch (err) {
      if (isPathNotFound(err)) throw this.unknown(id);
      throw err;
    }
    if (Date.now() - startedAt.getTime() > this.maxAgeMs) {
      await this.remove(name, id);
      throw this.unknown(id);
    }
    let size = 0;
    try {
      size = (await this.driver.stat(paths.uploadData(name, id))).size;
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    return { id, size, startedAt };
  }

  /**
   * Append a request body. With `range` the chunk must start right after the data received so
   * far (else 416 RANGE_INVALID); `length` is the declared Content-Length, if any.
   */
  async append(
    name: string,
    id: string,
    body: Readable,
    contentRange?: string,
    length?: number,
  ): Promise<UploadStatus> {
    return this.locked(name, id, async () => {
      const status = await this.status(name, id);
      return this.appendLocked(name, status, body, contentRange, length);
    });
  }

  private async appendLocked(
    name: string,
    status: UploadStatus,
    body: Readable,
    contentRange?: string,
    length?: number,
  ): Promise<UploadStatus> {
    if (contentRange !== undefined) {
      const range = parseContentRange(contentRange, status.size);
      const span = range.end - range.start + 1;
      if (range.start !== status.size || span <= 0 || (length !== undefined && length !== span)) {
        throw rangeError(
          status.size,
          `chunk ${range.start}-${range.end} does not follow byte ${status.size}`,
        );
      }
    }
    if (this.maxBytes > 0 && length !== undefined && status.size + length > this.maxBytes)
      throw this.tooLarge();
    const key = this.key(name, status.id);
    let state = this.hashes.get(key);
    if (!state || state.offset !== status.size) {
      this.hashes.delete(key);
      state = status.size === 0 ? { hash: newHash('sha256'), offset: 0 } : undefined;
    }
    const writer = await this.driver.writer(paths.uploadData(name, status.id), true);
    let ok = false;
    try {
      // Stopping early (a limit, a disk error) leaves the request whole: its rest is discarded
      // and the connection kept (src/http/body.ts).
      for await (const chunk of body.iterator({ destroyOnReturn: false })) {
        const buf = chunk as Buffer;
        // Stop where the blob would pass the limit: what was received before it stays.
        if (this.maxBytes > 0 && writer.size + buf.length > this.maxBytes) throw this.tooLarge();
        state?.hash.update(buf);
        await writer.write(buf);
      }
      ok = true;
    } finally {
      await writer.close().catch(() => {});
      if (ok && state) {
        state.offset = writer.size;
        this.hashes.set(key, state);
      } else this.hashes.delete(key);
    }
    return { ...status, size: writer.size };
  }

  /**
   * Finish an upload: append the optional final body, verify every requested digest and move the
   * data to the blob store (unless an identical blob is there already), then link it in the
   * repository. A digest mismatch cancels the upload (DIGEST_INVALID).
   */
  async complete(
    name: string,
    id: string,
    digests: ParsedDigest[],
    body?: Readable,
    contentRange?: string,
    length?: number,
  ): Promise<ParsedDigest> {
    return this.locked(name, id, async () => {
      let status = await this.status(name, id);
      if (body) status = await this.appendLocked(name, status, body, contentRange, length);
      const computed = new Map<DigestAlgorithm, string>();
      const state = this.hashes.get(this.key(name, id));
      if (state && state.offset === status.size) computed.set('sha256', `sha256:${state.hash.digest('hex')}`);
      this.hashes.delete(this.key(name, id));
      for (const d of digests) {
        let actual = computed.get(d.algorithm);
        if (!actual) {
          actual = await this.digestData(name, id, d.algorithm);
          computed.set(d.algorithm, actual);
        }
        if (actual !== d.digest) {
          await this.remove(name, id);
          throw new RegistryError(
            'DIGEST_INVALID',
            `provided digest ${d.digest} did not match uploaded content (${actual})`,
            { digest: d.digest },
          );
        }
      }
      const canonical = digests.find((d) => d.algorithm === 'sha256') ?? digests[0];
      if (!canonical) throw new RegistryError('DIGEST_INVALID', 'digest missing');
      const data = paths.uploadData(name, id);
      const existing = await this.store.blobStat(canonical);
      if (!existing || existing.size !== status.size) {
        const w = await this.driver.writer(data, true);
        await w.commit();
        await this.driver.move(data, paths.blobData(canonical));
      }
      for (const d of digests) {
        if (d.digest !== canonical.digest && !(await this.store.blobStat(d))) {
          await this.copyBlob(canonical, d);
        }
        await this.store.linkLayer(name, d);
      }
      await this.remove(name, id);
      return canonical;
    });
  }

  private async copyBlob(from: ParsedDigest, to: ParsedDigest): Promise<void> {
    const reader = await this.driver.reader(paths.blobData(from));
    const tmp = `${paths.blobDir(to)}/data.${randomBytes(6).toString('hex')}.tmp`;
    const writer = await this.driver.writer(tmp, false);
    for await (const chunk of reader) await writer.write(chunk as Buffer);
    await writer.commit();
    await this.driver.move(tmp, paths.blobData(to));
  }

  private async digestData(name: string, id: string, algorithm: DigestAlgorithm): Promise<string> {
    const hash = newHash(algorithm);
    const reader = await this.driver.reader(paths.uploadData(name, id));
    for await (const chunk of reader) hash.update(chunk as Buffer);
    return `${algorithm}:${hash.digest('hex')}`;
  }

  async cancel(name: string, id: string): Promise<void> {
    await this.locked(name, id, async () => {
      await this.status(name, id);
      await this.remove(name, id);
    });
  }

  private async remove(name: string, id: string): Promise<void> {
    this.hashes.delete(this.key(name, id));
    try {
      await this.driver.delete(paths.uploadDir(name, id));
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
  }

  /**
   * Delete uploads started more than `olderThanMs` ago (or without a readable start time).
   * Returns the storage paths of the purged upload directories.
   */
  async purge(olderThanMs: number, dryRun = false): Promise<string[]> {
    const purged: string[] = [];
    const now = Date.now();
    try {
      await this.driver.walk(REPOSITORIES, async (info) => {
        if (!info.isDir) return;
        const base = info.path.slice(info.path.lastIndexOf('/') + 1);
        if (base === '_uploads') {
          for (const dir of await this.driver.list(info.path).catch(() => [] as string[])) {
            let started = Number.NaN;
            try {
              started = Date.parse(
                (await this.driver.getContent(`${dir}/startedat`)).toString('utf8').trim(),
              );
            } catch {
              const st = await this.driver.stat(dir).catch(() => undefined);
              started = st ? st.modTime.getTime() : Number.NaN;
            }
            if (Number.isNaN(started) || now - started > olderThanMs) {
              purged.push(dir);
              if (!dryRun) await this.driver.delete(dir).catch(() => {});
            }
          }
          return 'skip';
        }
        if (base === '_layers' || base === '_manifests') return 'skip';
      });
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    return purged;
  }
}

/** The upload progress header value: inclusive byte offsets, `0-0` for an empty upload. */
export function rangeHeader(size: number): string {
  return `0-${size > 0 ? size - 1 : 0}`;
}

export function rangeError(size: number, message: string): RegistryError {
  return new RegistryError('RANGE_INVALID', message, { size }, 416).withHeaders({ Range: rangeHeader(size) });
}

/** Parse a chunk's Content-Range: `start-end`, also `bytes start-end/total` and `bytes=start-end`. */
export function parseContentRange(value: string, size: number): ChunkRange {
  const m = /^\s*(?:bytes[ =])?\s*(\d{1,15})-(\d{1,15})(?:\/(?:\d+|\*))?\s*$/.exec(value);
  if (!m) throw rangeError(size, `invalid Content-Range ${JSON.stringify(value)}`);
  const start = Number(m[1]);
  const end = Number(m[2]);
  if (end < start) throw rangeError(size, `invalid Content-Range ${JSON.stringify(value)}`);
  return { start, end };
}

function formatRfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
