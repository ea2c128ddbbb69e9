import { conflict, notImplemented } from '../../common/errors.js';
import type { Container } from './container.js';
import { DEFAULT_DETACH_KEYS, parseDetachKeys } from './detachkeys.js';
import { fileSize, type LogRecord, LogTailer, logFiles, readRecords } from './logfile.js';
import { Session } from './streams.js';
import type { AttachOptions, AttachSession, AttachSink, LogChunk, LogsOptions } from './types.js';

/** Logs (from the monitor's log file) and attach (through the engine's stdio hub). */

/** `2026-11-21T07:21:20.374598009Z`: dockerd's fixed-width RFC 3339 nano format. */
export function fixedNano(time: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(time);
  if (!m) return time;
  return `${m[1]}.${(m[2] ?? '').padEnd(9, '0').slice(0, 9)}Z`;
}

function wanted(rec: LogRecord, opts: LogsOptions): boolean {
  if (rec.stream === 'stdout' ? !opts.stdout : !opts.stderr) return false;
  if (opts.since && rec.timeMs < opts.since.getTime()) return false;
  return true;
}

function toChunk(rec: LogRecord, opts: LogsOptions): LogChunk {
  const data = opts.timestamps ? Buffer.concat([Buffer.from(`${fixedNano(rec.time)} `), rec.data]) : rec.data;
  return { stream: rec.stream, data };
}

/** Records of the log files (rotated ones first), up to `endOffset` in the current file. */
async function* history(path: string, endOffset: number): AsyncGenerator<LogRecord> {
  for (const file of await logFiles(path)) {
    yield* readRecords(file, 0, file === path ? endOffset : Number.POSITIVE_INFINITY);
  }
}

export function checkLogsReadable(c: Container): void {
  if (c.hostConfig.LogConfig?.Type === 'none') {
    throw notImplemented('configured logging driver does not support reading');
  }
}

export async function* readLogs(c: Container, opts: LogsOptions): AsyncGenerator<LogChunk> {
  const path = c.record.LogPath;
  const follow = opts.follow && c.state.Running;
  const end = await fileSize(path);
  const untilMs = opts.until ? opts.until.getTime() : Number.POSITIVE_INFINITY;

  // History, with `tail` counted in lines (a partial record belongs to the line it ends in).
  const tail = opts.tail;
  if (tail === undefined || tail < 0) {
    for await (const rec of history(path, end)) {
      if (rec.timeMs > untilMs) return;
      if (wanted(rec, opts)) yield toChunk(rec, opts);
    }
  } else if (tail > 0) {
    const lines: LogRecord[][] = [];
    let current: LogRecord[] = [];
    for await (const rec of history(path, end)) {
      if (rec.timeMs > untilMs) break;
      if (!wanted(rec, opts)) continue;
      current.push(rec);
      if (rec.full) {
        lines.push(current);
        current = [];
        if (lines.length > tail) lines.shift();
      }
    }
    if (current.length) {
      lines.push(current);
      if (lines.length > tail) lines.shift();
    }
    for (const line of lines) for (const rec of line) yield toChunk(rec, opts);
  }
  if (!follow || untilMs < Date.now()) return;

  // Follow: new records until the container exits, the client leaves or `until` passes.
  const queue: LogRecord[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const tailer = new LogTailer(path, end, (rec) => {
    queue.push(rec);
    notify();
  });
  const onExit = () => {
    void tailer.drain().finally(() => {
      done = true;
      notify();
    });
  };
  c.events.on('exit', onExit);
  c.events.on('removed', onExit);
  const onAbort = () => {
    done = true;
    notify();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const untilTimer = Number.isFinite(untilMs)
    ? setTimeout(onAbort, Math.max(0, untilMs - Date.now()))
    : undefined;
  tailer.start();
  try {
    for (;;) {
      while (queue.length) {
        const rec = queue.shift() as LogRecord;
        if (rec.timeMs > untilMs) return;
        if (wanted(rec, opts)) yield toChunk(rec, opts);
      }
      if (done || opts.signal?.aborted) return;
      await new Promise<void>((r) => {
        wake = r;
      });
    }
  } finally {
    if (untilTimer) clearTimeout(untilTimer);
    c.events.off('exit', onExit);
    c.events.off('removed', onExit);
    opts.signal?.removeEventListener('abort', onAbort);
    await tailer.stop();
  }
}

export function checkAttachable(c: Container, opts: AttachOptions): Buffer {
  if (c.state.Paused) throw conflict('You cannot attach to a paused container, unpause it first');
  return parseDetachKeys(opts.detachKeys || DEFAULT_DETACH_KEYS);
}

/**
 * Begin an attach: replay the log when asked (`logs`), then join the live stream (`stream`).
 * Without `stream` the session ends after the replay.
 */
export async function beginAttach(
  c: Container,
  opts: AttachOptions,
  detachKeys: Buffer,
  sink: AttachSink,
): Promise<AttachSession> {
  const tty = c.record.Config.Tty === true;
  const session = new Session(
    tty,
    { stdin: opts.stdin, stdout: opts.stdout, stderr: opts.stderr },
    sink,
    c.hub,
    detachKeys,
  );
  if (opts.stream) c.hub.add(session);
  if (opts.logs && c.hostConfig.LogConfig?.Type !== 'none') {
    for await (const chunk of readLogs(c, {
      stdout: opts.stdout,
      stderr: opts.stderr,
      timestamps: false,
      follow: false,
      details: false,
    })) {
      sink.output(chunk.stream, chunk.data);
    }
  }
  if (!opts.stream) session.finish('closed');
  return session;
}
