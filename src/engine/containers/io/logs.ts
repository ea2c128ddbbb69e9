import { notImplemented } from '../../../common/errors.js';
import type { LogMessage, ReadLogsOptions } from '../../runtime/index.js';
import type { Container } from '../core/container.js';
import type { LogChunk, LogRecord, LogsOptions } from './io.types.js';

/** docker logs: the json-file log the engine writes (log-copiers.ts), read back in dockerd's forms. */

/** `2026-11-21T07:21:20.374598009Z`: dockerd's fixed-width RFC 3339 nano format. */
export function fixedNano(time: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(time);
  if (!m) return time;
  return `${m[1]}.${(m[2] ?? '').padEnd(9, '0').slice(0, 9)}Z`;
}

/** Go's url.QueryEscape (docker's form of attributes in `logs --details`). */
function queryEscape(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    if (
      (b >= 0x30 && b <= 0x39) ||
      (b >= 0x41 && b <= 0x5a) ||
      (b >= 0x61 && b <= 0x7a) ||
      b === 0x2d ||
      b === 0x2e ||
      b === 0x5f ||
      b === 0x7e
    ) {
      out += String.fromCharCode(b);
    } else if (b === 0x20) out += '+';
    else out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * What `logs --details` puts before each message: its attributes as `k=v,k2=v2` (sorted,
 * query-escaped) and a space, a lone space when it has none (dockerd's attrsByteSlice).
 */
export function detailsPrefix(attrs: Record<string, string> | undefined): string {
  if (!attrs) return ' ';
  const keys = Object.keys(attrs).sort();
  return `${keys.map((k) => `${queryEscape(k)}=${queryEscape(attrs[k] ?? '')}`).join(',')} `;
}

export function checkLogsReadable(c: Container): void {
  if (c.hostConfig.LogConfig?.Type === 'none') {
    throw notImplemented('configured logging driver does not support reading');
  }
}

/** The runtime package's log reader (json-file, rotation-aware), injected for tests. */
export type LogReader = (path: string, opts: ReadLogsOptions) => AsyncIterable<LogMessage>;

/** The same reader in batches (one per chunk read): readLogBatches of the runtime package. */
export type LogBatchReader = (path: string, opts: ReadLogsOptions) => AsyncIterable<LogMessage[]>;

/** Batches of one message each, from a reader that has no batch form (test fakes). */
export function singleBatches(read: LogReader): LogBatchReader {
  return async function* (path, opts) {
    for await (const m of read(path, opts)) yield [m];
  };
}

function nanos(d: Date | bigint | undefined): number | bigint | undefined {
  return d instanceof Date ? d.getTime() * 1_000_000 : d;
}

/**
 * `docker logs`: the log files through the runtime's reader; `follow` ends when the container
 * stops (after what it wrote is read) or the client leaves.
 */
export async function* readContainerLogs(
  c: Container,
  opts: LogsOptions,
  read: LogReader,
): AsyncGenerator<LogChunk> {
  for await (const batch of readContainerLogBatches(c, opts, singleBatches(read))) yield* batch;
}

/**
 * The log's messages as the runtime's reader gives them, in batches (one per chunk of the log
 * read); `follow` ends when the container stops (after what it wrote is read) or the client leaves.
 */
async function* readContainerLogMessages(
  c: Container,
  opts: LogsOptions,
  read: LogBatchReader,
): AsyncGenerator<LogMessage[]> {
  const follow = opts.follow && c.state.Running;
  const stopFollowing = new AbortController();
  const onStop = () => stopFollowing.abort();
  if (follow) {
    c.events.on('exit', onStop);
    c.events.on('removed', onStop);
  }
  try {
    yield* read(c.record.LogPath, {
      since: nanos(opts.since),
      until: nanos(opts.until),
      tail: opts.tail,
      follow,
      stdout: opts.stdout,
      stderr: opts.stderr,
      signal: opts.signal,
      stopFollowing: stopFollowing.signal,
    });
  } finally {
    c.events.off('exit', onStop);
    c.events.off('removed', onStop);
  }
}

/**
 * readContainerLogs in batches, for writers that send many messages at once; the messages, their
 * order and when following ends are the same.
 */
export async function* readContainerLogBatches(
  c: Container,
  opts: LogsOptions,
  read: LogBatchReader,
): AsyncGenerator<LogChunk[]> {
  for await (const batch of readContainerLogMessages(c, opts, read)) {
    const out: LogChunk[] = new Array(batch.length);
    for (let i = 0; i < batch.length; i++) {
      const m = batch[i] as LogMessage;
      let prefix = opts.details ? detailsPrefix(m.attrs) : '';
      if (opts.timestamps) prefix = `${fixedNano(m.time)} ${prefix}`;
      out[i] = { stream: m.stream, data: prefix ? Buffer.concat([Buffer.from(prefix), m.line]) : m.line };
    }
    yield out;
  }
}

/** Go's time.Time in JSON (RFC 3339 with nanoseconds, trailing zeros trimmed). */
function goTimeJson(time: string): string {
  return fixedNano(time).replace(/\.?0+Z$/, 'Z');
}

/**
 * The log as JSON records (API 1.54's experimental format): the line, its stream, its time and,
 * with `details`, its attributes, as moby's logstream.WriteJSON writes them.
 */
export async function* readContainerLogRecords(
  c: Container,
  opts: LogsOptions,
  read: LogBatchReader,
): AsyncGenerator<LogRecord[]> {
  for await (const batch of readContainerLogMessages(c, opts, read)) {
    yield batch.map((m) => {
      const attrs = opts.details && m.attrs ? Object.keys(m.attrs).sort() : [];
      return {
        Line: m.line.toString('utf8'),
        Source: m.stream,
        Timestamp: goTimeJson(m.time),
        Attrs: attrs.length ? attrs.map((Key) => ({ Key, Value: m.attrs?.[Key] ?? '' })) : undefined,
      };
    });
  }
}
