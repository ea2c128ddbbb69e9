import { sendJson } from '../../http/server.js';
import type { SystemService } from '../system/system.service.js';
import type { ApiRouter } from './context.js';
import { shapeInfo } from './system.versions.js';
import { MAX_API_VERSION } from './versions.js';

/** /_ping, /version, /info. */
export type SystemBackend = Pick<SystemService, 'version' | 'info'>;

/**
 * `swarmState` gives /_ping's Swarm header: `inactive`, `pending`, `error`, `locked`,
 * `active/worker` or `active/manager` (the swarm service's).
 */
export function registerSystemRoutes(
  router: ApiRouter,
  system: SystemBackend,
  experimental: boolean,
  swarmState: () => string = () => 'inactive',
): void {
  const ping = (method: 'GET' | 'HEAD') => (ctx: Parameters<Parameters<ApiRouter['get']>[1]>[0]) => {
    const { res } = ctx;
    res.statusCode = 200;
    res.setHeader('Api-Version', MAX_API_VERSION);
    res.setHeader('Builder-Version', '1');
    res.setHeader('Docker-Experimental', String(experimental));
    res.setHeader('Swarm', swarmState());
    res.setHeader('Cache-Control', 'no-cache, no-store, must-revalidate');
    res.setHeader('Pragma', 'no-cache');
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    if (method === 'HEAD') {
      res.setHeader('Content-Length', '0');
      res.end();
      return;
    }
    res.setHeader('Content-Length', '2');
    res.end('OK');
  };
  router.get('/_ping', ping('GET'));
  router.head('/_ping', ping('HEAD'));

  // dockerd answers the same /version at every API version
  router.get('/version', async (ctx) => {
    sendJson(ctx.res, 200, await system.version());
  });

  router.get('/info', async (ctx) => {
    sendJson(ctx.res, 200, shapeInfo(await system.info(), ctx.version));
  });
}
