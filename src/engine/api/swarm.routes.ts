import { BerthError, invalidParameter } from '../../common/errors.js';
import { goParseBool, parseBoolError } from '../../common/go-strconv.js';
import { readJson } from '../../http/body.js';
import { parseBool, parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import { NOT_A_MANAGER, NOT_IN_SWARM } from '../swarm/messages.js';
import type { SwarmService } from '../swarm/swarm.service.js';
import type { ApiContext, ApiRouter } from './context.js';
import {
  decodeInitRequest,
  decodeJoinRequest,
  decodeNodeSpec,
  decodeSwarmSpec,
} from './schema/swarm.schema.js';
import { gates, versionAtLeast, versionBefore } from './versions.js';

/**
 * /swarm (init, leave, update, unlock key) over the swarm service, and the rest of swarm mode's
 * endpoints (nodes, services, tasks, secrets, configs) as dockerd answers them on a node that
 * cannot serve them: 503 with dockerd's words, 406 before API 1.25 (docker 1.12).
 */
export type SwarmBackend = Pick<
  SwarmService,
  | 'inspect'
  | 'initSwarm'
  | 'join'
  | 'leave'
  | 'update'
  | 'unlockKey'
  | 'unlock'
  | 'listNodes'
  | 'inspectNode'
  | 'updateNode'
  | 'removeNode'
  | 'requireManager'
>;

/** The "no swarm here" answers: 503, or 406 on API 1.24, as dockerd's versions gave them. */
function noSwarm(ctx: ApiContext, message: string): BerthError {
  return new BerthError(
    versionAtLeast(ctx.version, gates.swarmUnavailable) ? 'Unavailable' : 'NotAcceptable',
    message,
  );
}

/** A swarm route's handler, its "no swarm here" errors in the request version's status. */
export function swarmRoute(handler: (ctx: ApiContext) => Promise<void>) {
  return async (ctx: ApiContext): Promise<void> => {
    try {
      await handler(ctx);
    } catch (err) {
      throw versioned(ctx, err);
    }
  };
}

/** dockerd's "no swarm here" errors in the request version's status. */
export function versioned(ctx: ApiContext, err: unknown): unknown {
  if (
    err instanceof BerthError &&
    err.kind === 'Unavailable' &&
    (err.message === NOT_IN_SWARM || err.message === NOT_A_MANAGER)
  ) {
    return noSwarm(ctx, err.message);
  }
  return err;
}

/** A boolean query parameter read with strconv.ParseBool (absent: false), as moby's swarm update reads them. */
function strictBool(ctx: ApiContext, name: string): boolean {
  const v = ctx.query.get(name);
  if (v === null || v === '') return false;
  const b = goParseBool(v);
  if (b === undefined) throw invalidParameter(`invalid value for ${name}: ${parseBoolError(v)}`);
  return b;
}

export function registerSwarmRoutes(router: ApiRouter, swarm: SwarmBackend): void {
  const route = swarmRoute;
  router.get(
    '/swarm',
    route(async (ctx) => {
      sendJson(ctx.res, 200, await swarm.inspect());
    }),
  );

  router.post(
    '/swarm/init',
    route(async (ctx) => {
      const req = decodeInitRequest(await readJson(ctx.req));
      if (versionBefore(ctx.version, gates.swarmDefaultAddrPool)) {
        delete req.DefaultAddrPool;
        delete req.SubnetSize;
      }
      if (versionBefore(ctx.version, gates.swarmDataPathPort)) delete req.DataPathPort;
      sendJson(ctx.res, 200, await swarm.initSwarm(req));
    }),
  );

  router.post(
    '/swarm/leave',
    route(async (ctx) => {
      await swarm.leave(parseBool(ctx.query.get('force')));
      ctx.res.writeHead(200).end();
    }),
  );

  router.post(
    '/swarm/update',
    route(async (ctx) => {
      const raw = ctx.query.get('version') ?? '';
      if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
        throw invalidParameter(
          `invalid swarm version '${raw}': strconv.ParseUint: parsing ${JSON.stringify(raw)}: invalid syntax`,
        );
      }
      const flags = {
        rotateWorkerToken: strictBool(ctx, 'rotateWorkerToken'),
        rotateManagerToken: strictBool(ctx, 'rotateManagerToken'),
        rotateManagerUnlockKey: strictBool(ctx, 'rotateManagerUnlockKey'),
      };
      const spec = decodeSwarmSpec(await readJson(ctx.req));
      await swarm.update(Number(raw), spec, flags);
      ctx.res.writeHead(200).end();
    }),
  );

  router.get(
    '/swarm/unlockkey',
    route(async (ctx) => {
      sendJson(ctx.res, 200, await swarm.unlockKey());
    }),
  );

  router.post(
    '/swarm/unlock',
    route(async (ctx) => {
      const body = await readJson(ctx.req);
      const key =
        body &&
        typeof body === 'object' &&
        !Array.isArray(body) &&
        typeof (body as { UnlockKey?: unknown }).UnlockKey === 'string'
          ? (body as { UnlockKey: string }).UnlockKey
          : '';
      await swarm.unlock(key);
      ctx.res.writeHead(200).end();
    }),
  );

  router.post(
    '/swarm/join',
    route(async (ctx) => {
      await swarm.join(decodeJoinRequest(await readJson(ctx.req)));
      ctx.res.writeHead(200).end();
    }),
  );

  router.get(
    '/nodes',
    route(async (ctx) => {
      sendJson(ctx.res, 200, await swarm.listNodes(parseFilters(ctx.query.get('filters'))));
    }),
  );
  router.get(
    '/nodes/{id}',
    route(async (ctx) => {
      sendJson(ctx.res, 200, await swarm.inspectNode(ctx.params.id ?? ''));
    }),
  );

  router.delete(
    '/nodes/{id}',
    route(async (ctx) => {
      await swarm.removeNode(ctx.params.id ?? '', parseBool(ctx.query.get('force')));
      ctx.res.writeHead(200).end();
    }),
  );
  router.post(
    '/nodes/{id}/update',
    route(async (ctx) => {
      const raw = ctx.query.get('version') ?? '';
      if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
        throw invalidParameter(
          `invalid node version '${raw}': strconv.ParseUint: parsing ${JSON.stringify(raw)}: invalid syntax`,
        );
      }
      await swarm.updateNode(ctx.params.id ?? '', Number(raw), decodeNodeSpec(await readJson(ctx.req)));
      ctx.res.writeHead(200).end();
    }),
  );
}
