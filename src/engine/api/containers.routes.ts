import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { onceAny } from '../../common/once-any.js';
import { readBody, readJsonObject } from '../../http/body.js';
import { parseBool, parseFilters, parseIntParam } from '../../http/query.js';
import { sendEmpty, sendJson, sendText } from '../../http/server.js';
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
import type { ContainerService, LogChunk, NetworkingConfig, WaitCondition } from '../containers/types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { parseTimestamp } from './events.routes.js';
import { pipeSession, socketSink, streamType } from './hijack.js';
import { decodeCreateJson, decodeUpdateJson } from './schema/containers.schema.js';
import { gates } from './versions.js';

/** Container endpoints: validate input, call the containers service, shape output per API version. */

function bool(ctx: ApiContext, name: string, fallback = false): boolean {
  return parseBool(ctx.query.get(name), fallback);
}

/**
 * The create body as dockerd decodes it (types, key case, legacy top-level HostConfig fields: see
 * schema/containers.schema.ts), with the fields the request's API version does not have dropped.
 */
export function decodeCreateBody(
  body: Record<string, unknown>,
  version: string,
): { config: ContainerConfig; hostConfig: HostConfig; networkingConfig: NetworkingConfig } {
  const decoded = decodeCreateJson(body);
  if (!decoded.config) throw invalidParameter('Config cannot be empty in order to create a container');
  const config = decoded.config;
  const hostConfig = decoded.hostConfig ?? {};
  const networkingConfig = decoded.networkingConfig ?? {};
  if (!atLeast({ version } as ApiContext, gates.containerAnnotations)) delete hostConfig.Annotations;
  if (!atLeast({ version } as ApiContext, gates.endpointMacAddress) && config.Healthcheck) {
    delete config.Healthcheck.StartInterval;
  }
  return { config, hostConfig, networkingConfig };
}

/**
 * A copy of `obj` that JSON shows without `keys`: a spread copy (V8 keeps the fast object) with
 * those keys set to `undefined`, which JSON.stringify leaves out. Views only ever go to JSON.
 */
function omitKeys(obj: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  const out = { ...obj };
  for (const k of keys) if (k in out) out[k] = undefined;
  return out;
}

/** The Networks map without DNSNames (before 1.44), as a new map of new endpoints. */
function withoutDnsNames(networks: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!networks || typeof networks !== 'object') return out;
  for (const [name, ep] of Object.entries(networks as Record<string, unknown>)) {
    out[name] = ep && typeof ep === 'object' ? omitKeys(ep as Record<string, unknown>, ['DNSNames']) : ep;
  }
  return out;
}

/**
 * NetworkSettings as the request's version shows it: a new object when DNSNames go, else the
 * view's own (shaping never changes the view it is given, so it can be shaped again).
 */
function shapeNetworkSettings(ns: unknown, ctx: Pick<ApiContext, 'version'>): unknown {
  if (atLeast(ctx as ApiContext, gates.endpointDnsNames) || !ns || typeof ns !== 'object') return ns;
  const out = { ...(ns as Record<string, unknown>) };
  out.Networks = withoutDnsNames(out.Networks);
  return out;
}

/**
 * HostConfig as the request's version shows it: Annotations only from 1.43, KernelMemory and
 * KernelMemoryTCP left out when zero from 1.42 (dockerd's omitempty). The view's own when
 * nothing goes.
 */
function shapeHostConfig(
  hc: Record<string, unknown>,
  ctx: Pick<ApiContext, 'version'>,
): Record<string, unknown> {
  const drop: string[] = [];
  if (hc.Annotations !== undefined && !atLeast(ctx as ApiContext, gates.containerAnnotations))
    drop.push('Annotations');
  if (atLeast(ctx as ApiContext, gates.kernelMemoryOmitted)) {
    if (!hc.KernelMemory) drop.push('KernelMemory');
    if (!hc.KernelMemoryTCP) drop.push('KernelMemoryTCP');
  }
  return drop.length ? omitKeys(hc, drop) : hc;
}

/** Inspect as the request's API version shows it. */
export function shapeInspect(
  view: Record<string, unknown>,
  ctx: Pick<ApiContext, 'version'>,
): Record<string, unknown> {
  const v = { ...view };
  v.HostConfig = shapeHostConfig((v.HostConfig ?? {}) as Record<string, unknown>, ctx);
  v.NetworkSettings = shapeNetworkSettings(v.NetworkSettings, ctx);
  return v;
}

export function shapeListItem(
  item: Record<string, unknown>,
  ctx: Pick<ApiContext, 'version'>,
): Record<string, unknown> {
  const v = { ...item };
  v.NetworkSettings = shapeNetworkSettings(v.NetworkSettings, ctx);
  if (!atLeast(ctx as ApiContext, gates.containerAnnotations)) {
    const hc = (v.HostConfig ?? {}) as Record<string, unknown>;
    v.HostConfig = hc.Annotations !== undefined ? omitKeys(hc, ['Annotations']) : hc;
  }
  return v;
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

/** Seconds (`t`) of stop/restart: an integer, -1 waits forever. */
function stopTimeout(ctx: ApiContext): number | undefined {
  return parseIntParam(ctx.query.get('t'), 't');
}

function stopSignal(ctx: ApiContext): string | undefined {
  if (!atLeast(ctx, gates.stopSignalParam)) return undefined;
  return ctx.query.get('signal') || undefined;
}

/**
 * Send a tar made as it goes (export, archive): the client leaving stops it, and a tar that failed
 * half-way must not look complete, so the connection is cut instead of ended.
 */
async function sendTar(
  ctx: ApiContext,
  contentType: string,
  tar: { stream: Readable; done: Promise<void>; cancel(): void },
): Promise<void> {
  ctx.res.statusCode = 200;
  ctx.res.setHeader('Content-Type', contentType);
  ctx.res.on('close', () => {
    if (!ctx.res.writableFinished) tar.cancel();
  });
  await Promise.all([pipeline(tar.stream, ctx.res, { end: false }), tar.done])
    .then(() => ctx.res.end())
    .catch(() => {
      tar.cancel();
      ctx.res.destroy();
    });
}

export function registerContainerRoutes(router: ApiRouter, containers: ContainerService): void {
  router.post('/containers/create', async (ctx) => {
    const name = ctx.query.get('name') ?? undefined;
    const platform = atLeast(ctx, gates.containerCreatePlatform)
      ? ctx.query.get('platform') || undefined
      : undefined;
    const body = await readJsonObject(ctx.req);
    const { config, hostConfig, networkingConfig } = decodeCreateBody(body, ctx.version);
    const result = await containers.create({
      name: name || undefined,
      platform,
      config,
      hostConfig,
      networkingConfig,
      options: {
        defaultIpcMode: atLeast(ctx, gates.ipcPrivateDefault) ? 'private' : 'shareable',
        kernelMemory: !atLeast(ctx, gates.kernelMemoryOmitted),
      },
    });
    sendJson(ctx.res, 201, { Id: result.Id, Warnings: result.Warnings });
  });

  router.post('/containers/prune', async (ctx) => {
    sendJson(ctx.res, 200, await containers.prune(parseFilters(ctx.query.get('filters'))));
  });

  router.get('/containers/json', async (ctx) => {
    const limit = parseIntParam(ctx.query.get('limit'), 'limit', 0) ?? 0;
    const list = await containers.list({
      all: bool(ctx, 'all'),
      limit: Math.max(limit, 0),
      since: ctx.query.get('since') || undefined,
      before: ctx.query.get('before') || undefined,
      size: bool(ctx, 'size'),
      filters: parseFilters(ctx.query.get('filters')),
    });
    sendJson(
      ctx.res,
      200,
      list.map((item) => shapeListItem(item, ctx)),
    );
  });

  // {name*}: a legacy link's name (`/parent/alias`) names its target too, as in dockerd
  router.get('/containers/{name*}/json', async (ctx) => {
    const view = await containers.inspect(ctx.params.name ?? '', { size: bool(ctx, 'size') });
    sendJson(ctx.res, 200, shapeInspect(view, ctx));
  });

  router.post('/containers/{name}/start', async (ctx) => {
    const body = (await readBody(ctx.req, 1024 * 1024)).toString('utf8').trim();
    if (atLeast(ctx, gates.startNoBody) && body !== '' && body !== '{}' && body !== 'null') {
      throw invalidParameter(
        'starting container with non-empty request body was deprecated since API v1.22 and removed in v1.24',
      );
    }
    const detachKeys = ctx.query.get('detachKeys') || undefined;
    await containers.start(ctx.params.name ?? '', { detachKeys });
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/stop', async (ctx) => {
    await containers.stop(ctx.params.name ?? '', { timeout: stopTimeout(ctx), signal: stopSignal(ctx) });
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/restart', async (ctx) => {
    await containers.restart(ctx.params.name ?? '', { timeout: stopTimeout(ctx), signal: stopSignal(ctx) });
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/kill', async (ctx) => {
    await containers.kill(ctx.params.name ?? '', ctx.query.get('signal') || undefined);
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/wait', async (ctx) => {
    let condition: WaitCondition = 'not-running';
    if (atLeast(ctx, gates.waitCondition)) {
      const c = ctx.query.get('condition') || 'not-running';
      if (c === 'not-running' || c === 'next-exit' || c === 'removed') condition = c;
      else if (atLeast(ctx, gates.waitConditionChecked)) throw invalidParameter(`invalid condition: "${c}"`);
    }
    const ac = new AbortController();
    ctx.res.on('close', () => {
      if (!ctx.res.writableFinished) ac.abort();
    });
    const waitFor = await containers.wait(ctx.params.name ?? '', condition, ac.signal);
    if (atLeast(ctx, gates.waitCondition)) {
      // Headers now: the CLI waits for them before it starts the container.
      ctx.res.statusCode = 200;
      ctx.res.setHeader('Content-Type', 'application/json');
      ctx.res.flushHeaders();
    }
    let result: Awaited<ReturnType<typeof waitFor>>;
    try {
      result = await waitFor();
    } catch {
      if (!ctx.res.writableEnded) ctx.res.end();
      return;
    }
    // dockerd 20.10 writes Error (null without one) at every API version
    const body = { Error: result.Error, StatusCode: result.StatusCode };
    if (ctx.res.headersSent) ctx.res.end(`${JSON.stringify(body)}\n`);
    else sendJson(ctx.res, 200, body);
  });

  router.delete('/containers/{name*}', async (ctx) => {
    await containers.remove(ctx.params.name ?? '', {
      force: bool(ctx, 'force'),
      volumes: bool(ctx, 'v'),
      link: bool(ctx, 'link'),
    });
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/rename', async (ctx) => {
    await containers.rename(ctx.params.name ?? '', ctx.query.get('name') ?? '');
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/pause', async (ctx) => {
    await containers.pause(ctx.params.name ?? '');
    sendEmpty(ctx.res, 204);
  });

  router.post('/containers/{name}/unpause', async (ctx) => {
    await containers.unpause(ctx.params.name ?? '');
    sendEmpty(ctx.res, 204);
  });

  router.get('/containers/{name}/top', async (ctx) => {
    const result = await containers.top(ctx.params.name ?? '', ctx.query.get('ps_args') ?? undefined);
    sendJson(ctx.res, 200, result);
  });

  router.post('/containers/{name}/resize', async (ctx) => {
    const h = parseIntParam(ctx.query.get('h'), 'h');
    const w = parseIntParam(ctx.query.get('w'), 'w');
    if (h === undefined || w === undefined || h < 0 || w < 0) {
      throw invalidParameter('resize requires non-negative integers h and w');
    }
    await containers.resize(ctx.params.name ?? '', h, w);
    sendText(ctx.res, 200, '');
  });

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
    const ac = new AbortController();
    ctx.res.on('close', () => ac.abort());
    const { tty, batches } = await containers.logs(ctx.params.name ?? '', {
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
    ctx.res.setHeader('Content-Type', streamType(ctx, tty));
    ctx.res.flushHeaders();
    await writeLogBatches(ctx.res, batches, tty);
    if (!ctx.res.writableEnded) ctx.res.end();
  });

  const PATH_STAT = 'X-Docker-Container-Path-Stat';
  const statHeader = (stat: unknown) => Buffer.from(JSON.stringify(stat)).toString('base64');

  router.head('/containers/{name}/archive', async (ctx) => {
    const stat = await containers.statPath(ctx.params.name ?? '', ctx.query.get('path') ?? '');
    ctx.res.statusCode = 200;
    ctx.res.setHeader(PATH_STAT, statHeader(stat));
    ctx.res.setHeader('Content-Length', '0');
    ctx.res.end();
  });

  router.get('/containers/{name}/archive', async (ctx) => {
    const { stat, stream, done, cancel } = await containers.archivePath(
      ctx.params.name ?? '',
      ctx.query.get('path') ?? '',
    );
    ctx.res.setHeader(PATH_STAT, statHeader(stat));
    await sendTar(ctx, 'application/x-tar', { stream, done, cancel });
  });

  router.put('/containers/{name}/archive', async (ctx) => {
    await containers.extractTo(ctx.params.name ?? '', ctx.query.get('path') ?? '', ctx.req, {
      noOverwriteDirNonDir: bool(ctx, 'noOverwriteDirNonDir'),
      copyUIDGID: bool(ctx, 'copyUIDGID'),
    });
    ctx.res.statusCode = 200;
    ctx.res.setHeader('Content-Length', '0');
    ctx.res.end();
  });

  router.get('/containers/{name}/changes', async (ctx) => {
    sendJson(ctx.res, 200, await containers.changes(ctx.params.name ?? ''));
  });

  router.get('/containers/{name}/export', async (ctx) => {
    await sendTar(ctx, 'application/octet-stream', await containers.export(ctx.params.name ?? ''));
  });

  router.post('/containers/{name}/update', async (ctx) => {
    const settings = decodeUpdateJson(await readJsonObject(ctx.req));
    const warnings = await containers.update(ctx.params.name ?? '', settings, {
      kernelMemory: !atLeast(ctx, gates.kernelMemoryOmitted),
    });
    sendJson(ctx.res, 200, { Warnings: warnings.length ? warnings : null });
  });

  router.get('/containers/{name}/stats', async (ctx) => {
    const stream = bool(ctx, 'stream', true);
    const abort = new AbortController();
    const objects = await containers.stats(ctx.params.name ?? '', {
      stream,
      oneShot: atLeast(ctx, gates.statsOneShot) && bool(ctx, 'one-shot'),
      signal: abort.signal,
    });
    ctx.res.statusCode = 200;
    ctx.res.setHeader('Content-Type', 'application/json');
    ctx.res.on('close', () => abort.abort());
    if (stream) ctx.res.flushHeaders();
    for await (const o of objects) {
      if (ctx.res.destroyed) break;
      ctx.res.write(`${JSON.stringify(o)}\n`);
    }
    abort.abort();
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
