import { constants, fstatSync, type Stats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { compressed, compressInBackground } from './compress.js';
import { LogFd } from './log-fd.js';
import { type LogLimits, rotateFiles } from './rotate.js';

/** Which file a path named when it was looked at (inode and birth time: inode numbers come back). */
export interface FileIdentity {
  ino: number;
  birth: number;
}

export function identityOf(st: Stats): FileIdentity {
  return { ino: st.ino, birth: st.birthtimeMs };
}

export function sameFile(a: FileIdentity | undefined | null, b: FileIdentity | undefined | null): boolean {
  return !!a && !!b && a.ino === b.ino && a.birth === b.birth;
}

/**
 * The container's json-file log: appends encoded entries to `path` and rotates it as dockerd's
 * json-file driver does (`path` -> `path.1` ... up to max-file, the rotated ones gzipped in the
 * background with `compress`). The caller decides when to rotate (`needsRotation()` before it
 * writes the entries of a record: dockerd checks before each write) so that it can record where
 * it was first.
 */
export class JsonLogWriter {
  private constructor(
    readonly path: string,
    private readonly limits: LogLimits,
    private handle: LogFd,
    /** The file being written. */
    public identity: FileIdentity,
    /** Its size: where the next entry goes. */
    public size: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Open (create) the log for appending. */
  static async open(
    path: string,
    limits: LogLimits,
    onError: (err: unknown) => void,
  ): Promise<JsonLogWriter> {
    const handle = LogFd.open(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o640);
    const st = fstatSync(handle.fd);
    // a rotated file whose compression an engine stop cut short
    if (limits.compress && limits.maxFiles > 1 && (await stat(`${path}.1`).catch(() => null))) {
      void compressInBackground(`${path}.1`, onError);
    }
    return new JsonLogWriter(path, limits, handle, identityOf(st), st.size, onError);
  }

  /** Cut the file back to `size` (entries written after the last checkpoint, to be written again). */
  async truncate(size: number): Promise<void> {
    await this.handle.truncate(size);
    this.size = size;
  }

  /** Whether the file reached max-size (with `more` bytes about to be added). */
  needsRotation(more = 0): boolean {
    return this.limits.maxSize > 0 && this.size + more >= this.limits.maxSize && this.size + more > 0;
  }

  /**
   * Append `data` (it must not change until this resolves). `size` counts it at once: writes are
   * queued by the caller, one at a time.
   */
  async write(data: Buffer): Promise<void> {
    this.size += data.length;
    let off = 0;
    while (off < data.length) {
      const { bytesWritten } = await this.handle.write(data, off, data.length - off);
      off += bytesWritten;
    }
  }

  /** Rotate now and start a new, empty file at `path`. */
  async rotate(): Promise<void> {
    await this.handle.close();
    // the previous rotation's compression renames files too
    await compressed(`${this.path}.1`);
    try {
      await rotateFiles(this.path, this.limits.maxFiles);
    } catch (err) {
      // as dockerd: log data may be lost, but the log goes on in a new file
      this.onError(err);
    }
    this.handle = LogFd.open(
      this.path,
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_TRUNC,
      0o640,
    );
    this.identity = identityOf(fstatSync(this.handle.fd));
    this.size = 0;
    if (this.limits.compress && this.limits.maxFiles > 1) {
      void compressInBackground(`${this.path}.1`, this.onError);
    }
  }

  /** Close the file (a compression under way goes on by itself). */
  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}
