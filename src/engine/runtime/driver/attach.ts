import { EventEmitter } from 'node:events';
import { closeSync, constants, openSync } from 'node:fs';
import { SeqpacketSocket } from 'node-unix-socket';
import { conflict, errnoCode, notFound } from '../../../common/errors.js';
import type { AttachConnection } from '../runtime.types.js';

/** conmon's pipe-type byte at the start of every attach packet (its stdpipe_t). */
const STDOUT_PIPE = 2;
const STDERR_PIPE = 3;
/** conmon reads at most 32 KiB - 1 per packet from the attach socket; stay well below. */
const maxPacket = 16 * 1024;
/** sockaddr_un.sun_path holds 108 bytes with the NUL. */
const maxSocketPath = 107;

/**
 * One client of conmon's attach socket (SOCK_SEQPACKET). Every packet conmon sends starts with
 * a byte naming the pipe (2 stdout, 3 stderr; a TTY's output is all "stdout"); what we send is
 * the container's stdin. Shutting down our write side makes conmon close the container's stdin,
 * unless conmon runs with --leave-stdin-open (containers without StdinOnce).
 */
export class ConmonAttach extends EventEmitter implements AttachConnection {
  private closed = false;

  private constructor(private readonly sock: SeqpacketSocket) {
    super();
    sock.on('data', (buf: Buffer) => {
      if (buf.length < 1) return;
      const data = buf.subarray(1);
      if (buf[0] === STDERR_PIPE) this.emit('stderr', data);
      else if (buf[0] === STDOUT_PIPE) this.emit('stdout', data);
    });
    sock.on('error', (err: Error) => {
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
    sock.on('close', () => this.finish());
    sock.on('end', () => {
      // conmon closed the connection: the container exited
      this.sock.destroy();
      this.finish();
    });
  }

  /** Connect to `<bundleDir>/attach`; long paths go through /proc/self/fd (sun_path is short). */
  static connect(bundleDir: string, id: string): Promise<ConmonAttach> {
    return new Promise((resolve, reject) => {
      let dirFd: number | null = null;
      let path = `${bundleDir}/attach`;
      if (Buffer.byteLength(path) > maxSocketPath) {
        try {
          dirFd = openSync(bundleDir, constants.O_RDONLY | constants.O_DIRECTORY);
        } catch (err) {
          reject(errnoCode(err) === 'ENOENT' ? notFound(`No such container: ${id}`) : err);
          return;
        }
        path = `/proc/self/fd/${dirFd}/attach`;
      }
      const done = () => {
        if (dirFd !== null) closeSync(dirFd);
        dirFd = null;
      };
      const sock = new SeqpacketSocket();
      sock.setInternalReadBufferSize(64 * 1024);
      const onError = (err: Error) => {
        done();
        sock.destroy();
        reject(conflict(`container ${id} is not running: ${err.message}`));
      };
      sock.once('error', onError);
      try {
        sock.connect(path, () => {
          done();
          sock.off('error', onError);
          resolve(new ConmonAttach(sock));
        });
      } catch (err) {
        onError(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  writeStdin(chunk: Buffer): void {
    if (this.closed) return;
    for (let off = 0; off < chunk.length; off += maxPacket) {
      this.sock.write(chunk.subarray(off, Math.min(chunk.length, off + maxPacket)));
    }
  }

  closeStdin(): void {
    if (this.closed) return;
    this.sock.end();
  }

  close(): void {
    if (this.closed) return;
    this.sock.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.emit('close');
  }
}
