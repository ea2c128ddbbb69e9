import { invalidParameter } from '../../common/errors.js';
import { goJsonText } from '../../common/go-json-text.js';
import { readBody, readJsonObject } from '../../http/body.js';
import { parseBool, parseFilters, parseIntParam } from '../../http/query.js';
import { sendEmpty, sendJson, sendText } from '../../http/server.js';
import type { WaitCondition } from '../containers/core/lifecycle.js';
import type { ContainerService } from '../containers/service.types.js';
import { decodeCreateRequest } from './containers.create.js';
import { shapeInspect, shapeListItem } from './containers.versions.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { decodeUpdateJson } from './schema/containers.schema.js';
import { gates } from './versions.js';

/** Container endpoints: validate input, call the containers service, shape output per API version. */
export type ContainerBackend = Pick<
  ContainerService,
  | 'create'
  | 'list'
  | 'inspect'
  | 'start'
  | 'stop'
  | 'restart'
  | 'kill'
  | 'wait'
  | 'remove'
  | 'rename'
  | 'pause'
  | 'unpause'
  | 'top'
  | 'resize'
  | 'update'
  | 'stats'
  | 'prune'
>;

function bool(ctx: ApiContext, name: string, fallback = false): boolean {
  return parseBool(ctx.query.get(name), fallback);
}

/** Seconds (`t`) of stop/restart: an integer, -1 waits forever. */
function stopTimeout(ctx: ApiContext): number | undefined {
  return parseIntParam(ctx.query.get('t'), 't');
}

function stopSignal(ctx: ApiContext): string | undefined {
  if (!atLeast(ctx, gates.stopSignalParam)) return undefined;
  return ctx.query.get('signal') || undefined;
}

export function registerContainerRoutes(router: ApiRouter, containers: ContainerBackend): void {
  router.post('/containers/create', async (ctx) => {
    const name = ctx.query.get('name') ?? undefined;
    const platform = atLeast(ctx, gates.containerCreatePlatform)
      ? ctx.query.get('platform') || undefined
      : undefined;
    const req = decodeCreateRequest(await readJsonObject(ctx.req), ctx.version);
    const result = await containers.create({
      name: name || undefined,
      platform,
      config: req.config,
      hostConfig: req.hostConfig,
      networkingConfig: req.networkingConfig,
      options: req.options,
    });
    sendJson(ctx.res, 201, { Id: result.Id, Warnings: [...result.Warnings, ...req.warnings] });
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
      list.map((item) => shapeListItem(item, ctx.version)),
    );
  });

  // {name*}: a legacy link's name (`/parent/alias`) names its target too, as in dockerd
  router.get('/containers/{name*}/json', async (ctx) => {
    const view = await containers.inspect(ctx.params.name ?? '', { size: bool(ctx, 'size') });
    // limits at int64's edges as Go writes them (the docker CLI cannot read 9223372036854776000)
    sendText(ctx.res, 200, goJsonText(shapeInspect(view, ctx.version)), 'application/json');
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

  router.post('/containers/{name}/update', async (ctx) => {
    const settings = decodeUpdateJson(await readJsonObject(ctx.req));
    if (!atLeast(ctx, gates.updateBlkioDevices)) {
      // ignored before 1.55, as dockerd did
      delete settings.BlkioWeightDevice;
      delete settings.BlkioDeviceReadBps;
      delete settings.BlkioDeviceWriteBps;
      delete settings.BlkioDeviceReadIOps;
      delete settings.BlkioDeviceWriteIOps;
    }
    if (!atLeast(ctx, gates.updatePidsLimit)) delete settings.PidsLimit;
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
    const osType = atLeast(ctx, gates.statsOsType);
    for await (const o of objects) {
      if (ctx.res.destroyed) break;
      ctx.res.write(`${JSON.stringify(osType ? o : { ...o, os_type: undefined })}\n`);
    }
    abort.abort();
    if (!ctx.res.writableEnded) ctx.res.end();
  });
}
