import { closeSync, ftruncate, openSync, read, write } from 'node:fs';

/**
 * An open file of a container's log (the monitor's output, the json-file log): opened and closed
 * with one system call at once, where a FileHandle takes a thread-pool round trip for each (about
 * 60 µs of CPU against 3, and more after the machine was idle: four per container cycle); read
 * and written in the thread pool, as its content can be large. As a FileHandle's, `close` waits
 * for the reads and writes under way: a descriptor closed under them could be given to another
 * file before they run.
 */
export class LogFd {
  private pending = 0;
  private readonly whenIdle: Array<() => void> = [];
  private closed = false;

  private constructor(readonly fd: number) {}

  /** Open `path` (flags and mode as fs.openSync takes them); throws as openSync does (ENOENT...). */
  static open(path: string, flags: number | string, mode?: number): LogFd {
    return new LogFd(openSync(path, flags, mode));
  }

  private op<T>(run: (done: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> {
    if (this.closed) {
      return Promise.reject(Object.assign(new Error('log file already closed'), { code: 'EBADF' }));
    }
    this.pending++;
    return new Promise<T>((resolve, reject) => {
      run((err, value) => {
        this.pending--;
        if (this.pending === 0) for (const f of this.whenIdle.splice(0)) f();
        if (err) reject(err);
        else resolve(value);
      });
    });
  }

  read(buf: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> {
    return this.op<number>((done) => read(this.fd, buf, offset, length, position, done)).then((n) => ({
      bytesRead: n,
    }));
  }

  /** Write at the file's position (the end, for a file opened with O_APPEND). */
  write(buf: Buffer, offset: number, length: number): Promise<{ bytesWritten: number }> {
    return this.op<number>((done) => write(this.fd, buf, offset, length, null, done)).then((n) => ({
      bytesWritten: n,
    }));
  }

  truncate(size: number): Promise<void> {
    return this.op<undefined>((done) => ftruncate(this.fd, size, (err) => done(err, undefined)));
  }

  /** Close, once the reads and writes under way are done; a second close does nothing. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.pending > 0) await new Promise<void>((resolve) => this.whenIdle.push(resolve));
    closeSync(this.fd);
  }
}
