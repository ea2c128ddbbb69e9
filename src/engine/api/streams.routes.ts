import type { Writable } from 'node:stream';
import { invalidParameter } from '../../common/errors.js';
import { onceAny } from '../../common/once-any.js';
import {
  acceptValues,
  frameRecord,
  JSON_RECORD_TYPES,
  matchAcceptStrict,
  NDJSON,
  negotiate,
} from '../../http/json-records.js';
import { parseBool } from '../../http/query.js';
import { hijack, STDERR, STDOUT } from '../../http/stream.js';
import {
  acceptKey,
  encodeFrame,
  FrameReader,
  OP_BINARY,
  OP_CLOSE,
  OP_PING,
  OP_PONG,
  OP_TEXT,
} from '../../http/websocket.js';
import type { LogChunk, LogRecord } from '../containers/io/io.types.js';
import type { ContainerService } from '../containers/service.types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { parseTimestamp } from './events.routes.js';
import { pipeSession, socketSink, streamType } from './hijack.js';
import { gates } from './versions.js';

/** A container's output and input: logs, attach (hijacked), attach over a WebSocket. */
export type StreamsBackend = Pick<ContainerService, 'logs' | 'attach'>;

function bool(ctx: ApiContext, name: string, fallback = false): boolean {
  return parseBool(ctx.query.get(name), fallback);
}

/** Below this a batch waits for more (until the next turn of the event loop) before it is sent. */
const LOG_WRITE_MIN = 64 * 1024;

/**
 * Send log batches: each batch's messages (framed unless TTY) go into one buffer, small batches
 * are gathered into larger writes and flushed at the next turn of the event loop (so a follower
 * sees a new line at once), and a write the socket cannot take yet waits for 'drain'.
 */
export async function writeLogBatches(
  res: Writable,
  batches: AsyncIterable<LogChunk[]>,
  tty: boolean,
): Promise<void> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let scheduled = false;
  const take = (): Buffer => {
    const out = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    return out;
  };
  const flushSoon = () => {
    scheduled = false;
    if (pendingBytes > 0 && !res.destroyed) res.write(take());
  };
  for await (const batch of batches) {
    if (res.destroyed) break;
    const data = tty ? rawBatch(batch) : framedBatch(batch);
    if (data.length === 0 && batch.length === 0) continue;
    pending.push(data);
    pendingBytes += data.length;
    if (pendingBytes >= LOG_WRITE_MIN) {
      if (!res.write(take()) && !res.destroyed) await waitDrain(res);
    } else if (!scheduled) {
      scheduled = true;
      setImmediate(flushSoon);
    }
  }
  if (pendingBytes > 0 && !res.destroyed) res.write(take());
}

/** Log records (format=json), a batch per write, each record framed for the media type. */
async function writeLogRecords(
  res: Writable,
  batches: AsyncIterable<LogRecord[]>,
  type: string,
): Promise<void> {
  for await (const batch of batches) {
    if (res.destroyed) break;
    if (batch.length === 0) continue;
    if (!res.write(batch.map((r) => frameRecord(type, JSON.stringify(r))).join('')) && !res.destroyed)
      await waitDrain(res);
  }
}

/** 'drain', or the stream going away (whichever comes first). */
function waitDrain(res: Writable): Promise<void> {
  return onceAny(res, ['drain', 'close', 'error']);
}

/** The messages of a batch, each in a stdout/stderr frame, in one buffer. */
function framedBatch(batch: LogChunk[]): Buffer {
  let size = 0;
  for (const c of batch) size += 8 + c.data.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const c of batch) {
    out[at] = c.stream === 'stdout' ? STDOUT : STDERR;
    out[at + 1] = 0;
    out[at + 2] = 0;
    out[at + 3] = 0;
    out.writeUInt32BE(c.data.length, at + 4);
    at += 8;
    at += c.data.copy(out, at);
  }
  return out;
}

/** The messages of a batch as they are (TTY), in one buffer. */
function rawBatch(batch: LogChunk[]): Buffer {
  if (batch.length === 1) return (batch[0] as LogChunk).data;
  let size = 0;
  for (const c of batch) size += c.data.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const c of batch) at += c.data.copy(out, at);
  return out;
}

export function registerStreamRoutes(router: ApiRouter, containers: StreamsBackend): void {
  router.get('/containers/{name}/logs', async (ctx) => {
    const stdout = bool(ctx, 'stdout');
    const stderr = bool(ctx, 'stderr');
    if (!stdout && !stderr) throw invalidParameter('Bad parameters: you must choose at least one stream');
    const sinceRaw = ctx.query.get('since');
    const untilRaw = atLeast(ctx, gates.logsUntil) ? ctx.query.get('until') : null;
    // unix nanoseconds: --until the time of an entry includes that entry
    const since = sinceRaw && sinceRaw !== '0' ? parseTimestamp(sinceRaw, 'since') : undefined;
    const until = untilRaw && untilRaw !== '0' ? parseTimestamp(untilRaw, 'until') : undefined;
    const tailRaw = ctx.query.get('tail') ?? 'all';
    let tail: number | undefined;
    if (tailRaw !== 'all' && tailRaw !== '') {
      // as dockerd (strconv.Atoi): a number of lines; negative or not a number means all of them
      const n = /^[+-]?\d+$/.test(tailRaw) ? Number(tailRaw) : -1;
      tail = n >= 0 ? n : undefined;
    }
    let json = false;
    if (atLeast(ctx, gates.logsJsonFormat)) {
      // experimental in dockerd: `format=json`, or a JSON record stream named in Accept
      const format = ctx.query.get('format') ?? '';
      if (format !== '' && format !== 'json') throw invalidParameter('unsupported log format');
      json = format === 'json' || matchAcceptStrict(acceptValues(ctx.req), JSON_RECORD_TYPES) !== undefined;
    }
    const ac = new AbortController();
    ctx.res.on('close', () => ac.abort());
    const { tty, batches, records } = await containers.logs(ctx.params.name ?? '', {
      stdout,
      stderr,
      since,
      until,
      tail,
      timestamps: bool(ctx, 'timestamps'),
      follow: bool(ctx, 'follow'),
      details: bool(ctx, 'details'),
      signal: ac.signal,
    });
    ctx.res.statusCode = 200;
    if (json) {
      const type = negotiate(acceptValues(ctx.req), JSON_RECORD_TYPES, NDJSON);
      ctx.res.setHeader('Content-Type', type);
      ctx.res.flushHeaders();
      await writeLogRecords(ctx.res, records, type);
    } else {
      ctx.res.setHeader('Content-Type', streamType(ctx, tty));
      ctx.res.flushHeaders();
      await writeLogBatches(ctx.res, batches, tty);
    }
    if (!ctx.res.writableEnded) ctx.res.end();
  });

  router.post('/containers/{name}/attach', async (ctx) => {
    const opts = {
      stdin: bool(ctx, 'stdin'),
      stdout: bool(ctx, 'stdout'),
      stderr: bool(ctx, 'stderr'),
      stream: bool(ctx, 'stream'),
      logs: bool(ctx, 'logs'),
      detachKeys: ctx.query.get('detachKeys') || undefined,
    };
    const { tty, begin } = await containers.attach(ctx.params.name ?? '', opts);
    const socket = await ctx.takeOver();
    hijack(socket, ctx.upgrade !== undefined, {}, streamType(ctx, tty));
    const session = await begin(socketSink(socket, tty));
    pipeSession(socket, session);
    socket.resume();
  });

  router.get('/containers/{name}/attach/ws', async (ctx) => {
    const key = ctx.req.headers['sec-websocket-key'];
    if (
      !ctx.upgrade ||
      typeof key !== 'string' ||
      String(ctx.req.headers.upgrade).toLowerCase() !== 'websocket'
    ) {
      throw invalidParameter(
        'attach/ws requires a WebSocket upgrade (Upgrade: websocket, Sec-WebSocket-Key)',
      );
    }
    const all = !atLeast(ctx, gates.attachWsStreams);
    const opts = {
      stdin: all || bool(ctx, 'stdin'),
      stdout: all || bool(ctx, 'stdout'),
      stderr: all || bool(ctx, 'stderr'),
      stream: bool(ctx, 'stream'),
      logs: bool(ctx, 'logs'),
      detachKeys: ctx.query.get('detachKeys') || undefined,
    };
    const { begin } = await containers.attach(ctx.params.name ?? '', opts);
    const socket = await ctx.takeOver();
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`,
    );
    const opcode = atLeast(ctx, gates.attachWsBinary) ? OP_BINARY : OP_TEXT;
    const session = await begin({
      output(_stream, data) {
        if (!socket.destroyed && socket.writable) socket.write(encodeFrame(opcode, data));
      },
      end() {
        if (!socket.destroyed && socket.writable)
          socket.end(encodeFrame(OP_CLOSE, Buffer.from([0x03, 0xe8])));
      },
    });
    const reader = new FrameReader();
    const onData = (d: Buffer) => {
      for (const f of reader.push(d)) {
        if (f.opcode === OP_TEXT || f.opcode === OP_BINARY || f.opcode === 0) session.write(f.payload);
        else if (f.opcode === OP_PING) socket.write(encodeFrame(OP_PONG, f.payload));
        else if (f.opcode === OP_CLOSE) {
          session.endInput();
          session.close();
        }
      }
    };
    socket.on('data', onData);
    socket.on('end', () => session.endInput());
    socket.on('close', () => session.close());
    socket.on('error', () => session.close());
    socket.resume();
  });
}
