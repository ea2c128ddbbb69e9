import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { type FileHandle, mkdir, open, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import type { ParsedDigest } from '../../common/digest.js';
import { errnoCode } from '../../common/errors.js';
import type { FilesystemDriver } from '../storage/filesystem.driver.js';
import { paths } from '../storage/paths.js';
import { BufferRing, drained, sendFileRange } from '../storage/sendfile.js';

/** Bytes gathered before a write to the cache file (and a wake-up of the readers). */
const BATCH = 1024 * 1024;
/** How long the upstream may send nothing of a blob's body before the fetch fails. */
const BODY_IDLE_MS = 60_000;

/**
 * One blob on its way from the upstream into the blob store: written to a temporary file in the
 * blob's directory while its digest is computed, moved into place once verified. Any number of
 * clients read it meanwhile, each from the bytes already on disk, waiting for more (so a client
 * never waits for the whole blob, and the upstream is asked once).
 */
export class BlobFetch extends EventEmitter {
  /** Bytes on disk (what readers may read). */
  written = 0;
  /** The file readers read: the temporary file, then the blob's data file. */
  file: string;
  private readonly dataFile: string;
  done = false;
  error: Error | undefined;
  /**
   * The last batch written, still in memory: a client that is at its start is sent these very
   * buffers (every caught-up client the same ones), not bytes read back from the file.
   */
  private recent: { start: number; bufs: Buffer[] } | undefined;
  /** Settles when the blob is stored (resolves true) or failed (false). */
  readonly finished: Promise<boolean>;

  constructor(
    readonly digest: ParsedDigest,
    /** The size the upstream announced (Content-Length), when it did. */
    readonly size: number | undefined,
    private readonly driver: FilesystemDriver,
    body: Readable,
    /** After the data file is in place, before readers are told it is done (links). */
    private readonly onStored: () => Promise<void>,
  ) {
    super();
    this.setMaxListeners(0);
    this.file = driver.fullPath(`${paths.blobDir(digest)}/data.${randomBytes(6).toString('hex')}.tmp`);
    this.dataFile = driver.fullPath(paths.blobData(digest));
    this.finished = this.run(body).then(
      () => true,
      (err: unknown) => {
        this.error = err instanceof Error ? err : new Error(String(err));
        this.emit('progress');
        return false;
      },
    );
  }

  private async run(body: Readable): Promise<void> {
    const tmp = this.file;
    await mkdir(dirname(tmp), { recursive: true });
    const handle = await open(tmp, 'w');
    const hash = createHash(this.digest.algorithm);
    let ok = false;
    try {
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      const flush = async () => {
        if (pendingBytes === 0) return;
        const bufs = pending;
        const bytes = pendingBytes;
        pending = [];
        pendingBytes = 0;
        await writeAll(handle, bufs);
        this.recent = { start: this.written, bufs };
        this.written += bytes;
        this.emit('progress');
      };
      // An upstream that stops sending for BODY_IDLE_MS fails the fetch (the clients' answers
      // are cut) rather than holding them forever.
      let idle = setTimeout(stalled, BODY_IDLE_MS);
      function stalled() {
        body.destroy(new Error(`upstream sent nothing for ${BODY_IDLE_MS / 1000} s`));
      }
      try {
        for await (const chunk of body) {
          clearTimeout(idle);
          idle = setTimeout(stalled, BODY_IDLE_MS);
          const buf = chunk as Buffer;
          hash.update(buf);
          pending.push(buf);
          pendingBytes += buf.length;
          if (pendingBytes >= BATCH) await flush();
        }
      } finally {
        clearTimeout(idle);
      }
      await flush();
      if (this.size !== undefined && this.written !== this.size)
        throw new Error(`upstream sent ${this.written} bytes of ${this.size} for ${this.digest.digest}`);
      const actual = `${this.digest.algorithm}:${hash.digest('hex')}`;
      if (actual !== this.digest.digest)
        throw new Error(`upstream content of ${this.digest.digest} has digest ${actual}`);
      await handle.sync();
      ok = true;
    } finally {
      await handle.close().catch(() => undefined);
      if (!ok) await rm(tmp, { force: true });
    }
    await this.driver.move(
      `${paths.blobDir(this.digest)}/${tmp.slice(tmp.lastIndexOf('/') + 1)}`,
      paths.blobData(this.digest),
    );
    this.file = this.dataFile;
    await this.onStored();
    this.done = true;
    this.emit('progress');
  }

  /**
   * Send bytes `start`..`end` (inclusive; end undefined: to the end, whatever the size) to a
   * client as they arrive. Rejects when the fetch fails (the client's answer is then cut). The
   * blob's last byte is held back until its digest is verified: a client is never sent the whole
   * of content that does not match (its answer would look complete).
   */
  async streamTo(res: ServerResponse, start = 0, end?: number): Promise<void> {
    const ring = new BufferRing();
    try {
      await this.sendFrom(res, ring, start, end);
    } finally {
      ring.finish();
    }
  }

  private async sendFrom(res: ServerResponse, ring: BufferRing, start: number, end?: number): Promise<void> {
    let pos = start;
    for (;;) {
      if (res.destroyed) return;
      const sendable = this.done ? this.written : Math.max(0, this.written - 1);
      const stop = end === undefined ? sendable : Math.min(sendable, end + 1);
      if (pos < stop && this.recent?.start === pos) {
        pos = await sendRecentBatch(res, this.recent.bufs, pos, stop);
        continue;
      }
      if (pos < stop) {
        // What is on disk now, through the blob GET's sender; the file may move into place
        // meanwhile: then the open fails (ENOENT, nothing sent yet) and the data file has the
        // same bytes; once open, the sender reads on from that descriptor, whatever is renamed.
        const file = this.file;
        await sendFileRange(res, file, pos, stop - 1, { end: false, ring }).catch((err: unknown) => {
          if (errnoCode(err) !== 'ENOENT' || file === this.dataFile) throw err;
          return sendFileRange(res, this.dataFile, pos, stop - 1, { end: false, ring });
        });
        pos = stop;
        continue;
      }
      if (end !== undefined && pos > end) break;
      if (this.error) throw this.error;
      if (this.done) break;
      await once(this, 'progress');
    }
    res.end();
  }
}

/** Send a batch held in memory from `pos` (its start) up to `stop`; the position reached. */
async function sendRecentBatch(
  res: ServerResponse,
  bufs: Buffer[],
  pos: number,
  stop: number,
): Promise<number> {
  for (const b of bufs) {
    if (pos >= stop || res.destroyed) break;
    const part = pos + b.length <= stop ? b : b.subarray(0, stop - pos);
    pos += part.length;
    if (!res.write(part)) await drained(res);
  }
  return pos;
}

/** Write every buffer, in order, at the end of the file (writev, continued after a short write). */
async function writeAll(handle: FileHandle, bufs: Buffer[]): Promise<void> {
  let rest = bufs;
  while (rest.length > 0) {
    let { bytesWritten } = await handle.writev(rest);
    const next: Buffer[] = [];
    for (const b of rest) {
      if (bytesWritten >= b.length) bytesWritten -= b.length;
      else {
        next.push(bytesWritten > 0 ? b.subarray(bytesWritten) : b);
        bytesWritten = 0;
      }
    }
    rest = next;
  }
}
