import { closeSync, constants, openSync, readSync } from 'node:fs';

/** How much of the stored content is read at once. */
const WINDOW = 1024 * 1024;

/**
 * A context member's bytes compared, as they arrive, with a stored content of the same size
 * (LocalSources, read through its own descriptor): each piece against the stored bytes at the
 * same position, read by the MiB from the page cache. Comparing costs a read and a memcmp, where
 * hashing the piece would cost a SHA-256 (several times more); nothing of the piece is kept.
 * Once a piece differs the comparison is over (`equal` false for good): the bytes found equal so
 * far are read back from the stored content (`replay`) so that the member can be hashed and kept
 * as any other, every byte of it the one sent.
 */
export class StoredComparison {
  private fd: number | undefined;
  private win: Buffer;
  private winStart = 0;
  private winLength = 0;
  /** Bytes found equal so far (from the start). */
  private pos = 0;
  private differs = false;

  /** `path`: the stored content (opened now: a later removal of it changes nothing here). */
  constructor(
    path: string,
    readonly size: number,
  ) {
    this.fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    this.win = Buffer.allocUnsafeSlow(Math.min(WINDOW, Math.max(size, 1)));
  }

  /** Whether every byte so far, this piece's too, equals the stored content's at its position. */
  equal(piece: Buffer): boolean {
    if (this.differs || this.fd === undefined) return false;
    let pos = this.pos;
    for (let i = 0; i < piece.length; ) {
      if (pos < this.winStart || pos >= this.winStart + this.winLength) {
        this.winStart = pos;
        this.winLength = readSync(this.fd, this.win, 0, this.win.length, pos);
        if (this.winLength === 0) return this.fail();
      }
      const n = Math.min(piece.length - i, this.winStart + this.winLength - pos);
      const at = pos - this.winStart;
      if (piece.compare(this.win, at, at + n, i, i + n) !== 0) return this.fail();
      i += n;
      pos += n;
    }
    this.pos = pos;
    return true;
  }

  /** Whether the whole content was found equal (every one of its `size` bytes). */
  get whole(): boolean {
    return !this.differs && this.pos === this.size;
  }

  /**
   * The bytes found equal before the first difference, read back from the stored content in new
   * buffers of their own (each given to `sink`, which may keep it); the descriptor is closed.
   */
  replay(sink: (piece: Buffer) => void): void {
    const fd = this.fd;
    if (fd === undefined) throw new Error('a stored content was closed before its bytes were read back');
    try {
      for (let pos = 0; pos < this.pos; ) {
        const b = Buffer.allocUnsafeSlow(Math.min(WINDOW, this.pos - pos));
        const n = readSync(fd, b, 0, b.length, pos);
        if (n === 0) throw new Error('a stored content was cut');
        sink(n === b.length ? b : b.subarray(0, n));
        pos += n;
      }
    } finally {
      this.close();
    }
  }

  close(): void {
    // the window's memory goes with the comparison's end
    this.win = Buffer.alloc(0);
    this.winLength = 0;
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    closeSync(fd);
  }

  private fail(): false {
    this.differs = true;
    return false;
  }
}
