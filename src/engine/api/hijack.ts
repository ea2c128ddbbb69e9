import type { Duplex } from 'node:stream';
import { frame, STDERR, STDOUT } from '../../http/stream.js';
import type { AttachSession, AttachSink } from '../containers/io/io.types.js';
import { type ApiContext, atLeast } from './context.js';
import { gates } from './versions.js';

/** What attach and exec start share once they own the connection. */

const RAW_STREAM = 'application/vnd.docker.raw-stream';
const MUX_STREAM = 'application/vnd.docker.multiplexed-stream';

/** The Content-Type of a stream: multiplexed (framed, no TTY) from API 1.42, raw otherwise. */
export function streamType(ctx: ApiContext, tty: boolean): string {
  return !tty && atLeast(ctx, gates.multiplexedStreamType) ? MUX_STREAM : RAW_STREAM;
}

/** The client's bytes become input; its half-close ends the input, its leaving ends the session. */
export function pipeSession(
  socket: Duplex,
  session: Pick<AttachSession, 'write' | 'endInput' | 'close'>,
): void {
  socket.on('data', (d: Buffer) => session.write(d));
  socket.on('end', () => session.endInput());
  socket.on('close', () => session.close());
  socket.on('error', () => session.close());
}

/** Output to the client: framed by stream unless a TTY; the end ends the connection. */
export function socketSink(socket: Duplex, tty: boolean): AttachSink {
  return {
    output(stream, data) {
      if (socket.destroyed || !socket.writable) return;
      socket.write(tty ? data : frame(stream === 'stdout' ? STDOUT : STDERR, data));
    },
    end() {
      if (!socket.destroyed) socket.end();
    },
  };
}
