import { invalidParameter } from '../../common/errors.js';
import { readJsonObject } from '../../http/body.js';
import { sendJson } from '../../http/server.js';
import { hijack } from '../../http/stream.js';
import type { ContainerService } from '../containers/service.types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { pipeSession, socketSink, streamType } from './hijack.js';
import { decodeExecCreateJson, decodeExecStartJson } from './schema/exec.schema.js';
import { gates } from './versions.js';

function consoleSize(v: number[] | null | undefined): { height: number; width: number } | undefined {
  const [height = 0, width = 0] = v ?? [];
  return height > 0 && width > 0 ? { height, width } : undefined;
}

/** Go's strconv.Atoi for resize's h and w (dockerd's message on a bad one). */
function atoi(value: string | null): number {
  const v = value ?? '';
  if (!/^[+-]?\d+$/.test(v))
    throw invalidParameter(`strconv.Atoi: parsing ${JSON.stringify(v)}: invalid syntax`);
  return Number.parseInt(v, 10);
}

/**
 * Exec endpoints. Start without `Detach` hijacks the connection as attach does (101 with
 * `Upgrade`, else 200), frames output unless the start asked for a TTY, and (as dockerd) writes a
 * failure after the hijack into the stream as text.
 */
/** Exec instances: create, start (detached or hijacked), resize, inspect. */
export type ExecBackend = Pick<
  ContainerService,
  'execCreate' | 'execCheck' | 'execStart' | 'execInspect' | 'execResize'
>;

export function registerExecRoutes(router: ApiRouter, containers: ExecBackend): void {
  router.post('/containers/{name}/exec', async (ctx) => {
    const req = decodeExecCreateJson(await readJsonObject(ctx.req));
    if (!atLeast(ctx, gates.execConsoleSize)) delete req.ConsoleSize;
    sendJson(ctx.res, 201, await containers.execCreate(ctx.params.name ?? '', req));
  });

  router.post('/exec/{id}/start', async (ctx) => {
    const id = ctx.params.id ?? '';
    const req = decodeExecStartJson(await ctx.readJsonObject());
    containers.execCheck(id);
    // the start's console size: a TTY's only, from API 1.42
    const size = atLeast(ctx, gates.execConsoleSize) && req.Tty ? consoleSize(req.ConsoleSize) : undefined;
    if (req.Detach) {
      await containers.execStart(id, { tty: req.Tty === true, ...(size ? { consoleSize: size } : {}) });
      ctx.res.statusCode = 200;
      ctx.res.setHeader('Content-Length', '0');
      ctx.res.end();
      return;
    }
    await startAttached(ctx, containers, id, req.Tty === true, size);
  });

  router.post('/exec/{id}/resize', async (ctx) => {
    const height = atoi(ctx.query.get('h'));
    const width = atoi(ctx.query.get('w'));
    await containers.execResize(ctx.params.id ?? '', height, width);
    ctx.res.statusCode = 200;
    ctx.res.setHeader('Content-Length', '0');
    ctx.res.end();
  });

  router.get('/exec/{id}/json', async (ctx) => {
    sendJson(ctx.res, 200, containers.execInspect(ctx.params.id ?? ''));
  });
}

async function startAttached(
  ctx: ApiContext,
  containers: ExecBackend,
  id: string,
  tty: boolean,
  size: { height: number; width: number } | undefined,
): Promise<void> {
  const socket = await ctx.takeOver();
  hijack(socket, ctx.upgrade !== undefined, {}, streamType(ctx, tty));
  const sink = socketSink(socket, tty);
  try {
    const session = await containers.execStart(id, { tty, ...(size ? { consoleSize: size } : {}), sink });
    if (session) pipeSession(socket, session);
    socket.resume();
  } catch (err) {
    // the client already has its 101/200: the error goes to its stdout, as dockerd writes it
    sink.output('stdout', Buffer.from(`${(err as Error).message}\r\n`));
    sink.end('closed');
  }
}
