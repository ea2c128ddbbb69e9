import { sendJson } from '../../http/server.js';
import type { SystemService } from '../system/system.service.js';
import type { ApiRouter } from './context.js';
import { gates, MAX_API_VERSION, versionBefore } from './versions.js';

export function registerSystemRoutes(router: ApiRouter, system: SystemService, experimental: boolean): void {
  const ping = (method: 'GET' | 'HEAD') => (ctx: Parameters<Parameters<ApiRouter['get']>[1]>[0]) => {
    const { res } = ctx;
    res.statusCode = 200;
    res.setHeader('Api-Version', MAX_API_VERSION);
    res.setHeader('Builder-Version', '1');
    res.setHeader('Docker-Experimental', String(experimental));
    res.setHeader('Swarm', 'inactive');
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

  router.get('/version', async (ctx) => {
    const v = await system.version();
    if (versionBefore(ctx.version, gates.minApiVersionField)) delete v.MinAPIVersion;
    if (versionBefore(ctx.version, gates.logsUntil)) {
      delete v.Platform;
      delete v.Components;
    }
    sendJson(ctx.res, 200, v);
  });

  router.get('/info', async (ctx) => {
    const info = await system.info();
    if (versionBefore(ctx.version, gates.removingState)) {
      // 1.24 still carried ExecutionDriver and plain-string SecurityOptions.
      info.ExecutionDriver = '<not supported>';
      info.SecurityOptions = (info.SecurityOptions as string[]).map((o) => /name=([^,]+)/.exec(o)?.[1] ?? o);
    }
    sendJson(ctx.res, 200, info);
  });
}
