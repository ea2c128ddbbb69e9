import { invalidParameter } from '../../common/errors.js';
import { goParseBool, parseBoolError } from '../../common/go-strconv.js';
import { readJsonObject } from '../../http/body.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { NetworkService } from '../network/network.service.js';
import type { ApiRouter } from './context.js';
import { gates, versionAtLeast, versionBefore } from './versions.js';

/** What the routes need from the network layer (src/engine/network). */
export type NetworkBackend = Pick<
  NetworkService,
  'list' | 'inspect' | 'create' | 'remove' | 'connect' | 'disconnect' | 'prune'
>;

/**
 * A network of GET /networks as the request's version shows it: EnableIPv4 from 1.48, no
 * `Containers` from 1.52 (docker 29's list items are network summaries).
 */
export function shapeNetworkListItem(n: Record<string, unknown>, version: string): Record<string, unknown> {
  const out = { ...n };
  if (versionBefore(version, gates.networkEnableIPv4)) delete out.EnableIPv4;
  if (versionAtLeast(version, gates.networkStatus)) delete out.Containers;
  return out;
}

/** GET /networks/{id} as the request's version shows it: EnableIPv4 from 1.48, Status from 1.52. */
export function shapeNetworkInspect(n: Record<string, unknown>, version: string): Record<string, unknown> {
  const out = { ...n };
  if (versionBefore(version, gates.networkEnableIPv4)) delete out.EnableIPv4;
  if (versionBefore(version, gates.networkStatus)) delete out.Status;
  return out;
}

/** /networks: the predefined networks (bridge, host, none); the writes refuse as docs/networking.md says. */
export function registerNetworkRoutes(router: ApiRouter, networks: NetworkBackend): void {
  router.get('/networks', async (ctx) => {
    const list = networks.list(parseFilters(ctx.query.get('filters')));
    sendJson(
      ctx.res,
      200,
      list.map((n) => shapeNetworkListItem(n, ctx.version)),
    );
  });

  router.get('/networks/{id}', async (ctx) => {
    // dockerd parses verbose with strconv.ParseBool
    const verbose = ctx.query.get('verbose');
    if (verbose && goParseBool(verbose) === undefined) throw invalidParameter(parseBoolError(verbose));
    const view = networks.inspect(ctx.params.id ?? '', { scope: ctx.query.get('scope') || undefined });
    sendJson(ctx.res, 200, shapeNetworkInspect(view, ctx.version));
  });

  router.post('/networks/create', async (ctx) => {
    const body = await readJsonObject(ctx.req);
    networks.create(typeof body.Name === 'string' ? body.Name : '');
  });

  router.delete('/networks/{id}', async (ctx) => {
    networks.remove(ctx.params.id ?? '');
  });

  router.post('/networks/{id}/connect', async (ctx) => {
    await readJsonObject(ctx.req);
    networks.connect(ctx.params.id ?? '');
  });

  router.post('/networks/{id}/disconnect', async (ctx) => {
    await readJsonObject(ctx.req);
    networks.disconnect(ctx.params.id ?? '');
  });

  router.post('/networks/prune', async (ctx) => {
    sendJson(ctx.res, 200, networks.prune(parseFilters(ctx.query.get('filters'))));
  });
}
