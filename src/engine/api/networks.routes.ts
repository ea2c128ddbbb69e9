import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { ApiRouter } from './context.js';

/** What the routes need from the network layer (src/engine/network). */
export interface NetworkBackend {
  list(filters: Map<string, string[]>): Array<Record<string, unknown>>;
  inspect(idOrName: string): Record<string, unknown>;
}

/** GET /networks and /networks/{id}: the predefined networks (bridge, host, none). */
export function registerNetworkRoutes(router: ApiRouter, networks: NetworkBackend): void {
  router.get('/networks', async (ctx) => {
    sendJson(ctx.res, 200, networks.list(parseFilters(ctx.query.get('filters'))));
  });

  router.get('/networks/{id}', async (ctx) => {
    sendJson(ctx.res, 200, networks.inspect(ctx.params.id ?? ''));
  });
}
