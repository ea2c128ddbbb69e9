import { conflict } from '../../../common/errors.js';
import type { Container } from '../core/container.js';
import { DEFAULT_DETACH_KEYS, parseDetachKeys } from './detachkeys.js';
import type { AttachOptions, AttachSession, AttachSink } from './io.types.js';
import { type LogReader, readContainerLogs } from './logs.js';
import { Session, type StdioHub } from './streams.js';

/** docker attach: a session on the container's stdio hub, after a replay of its log when asked. */

export function checkAttachable(c: Container, opts: AttachOptions): Buffer {
  if (c.state.Paused)
    throw conflict(`container ${c.name.replace(/^\//, '')} is paused, unpause the container before attach`);
  return parseDetachKeys(opts.detachKeys || DEFAULT_DETACH_KEYS);
}

/**
 * Begin an attach: replay the log when asked (`logs`), then join the live stream (`stream`).
 * Without `stream` the session ends after the replay.
 */
export async function beginAttach(
  c: Container,
  hub: StdioHub,
  opts: AttachOptions,
  detachKeys: Buffer,
  sink: AttachSink,
  read: LogReader,
): Promise<AttachSession> {
  const tty = c.record.Config.Tty === true;
  const session = new Session(
    tty,
    { stdin: opts.stdin, stdout: opts.stdout, stderr: opts.stderr },
    sink,
    hub,
    detachKeys,
  );
  if (opts.stream) {
    hub.add(session);
    // a running process's output reaches the session from here on (the connection was not open
    // while nobody was attached)
    await hub.ensureConnected().catch(() => undefined);
  }
  if (opts.logs && c.hostConfig.LogConfig?.Type !== 'none') {
    const replay = readContainerLogs(
      c,
      { stdout: opts.stdout, stderr: opts.stderr, timestamps: false, follow: false, details: false },
      read,
    );
    for await (const chunk of replay) {
      sink.output(chunk.stream, chunk.data);
    }
  }
  // as dockerd: a stream with nothing to carry (no output asked for, no stdin to take) ends at once
  const carries = opts.stdout || opts.stderr || (opts.stdin && c.record.Config.OpenStdin === true);
  if (!opts.stream || !carries) session.finish('closed');
  return session;
}
