import { invalidParameter } from '../../common/errors.js';
import { familiarName, parseAnyReference, tagNameOnly } from '../../common/reference.js';
import { readJsonObject } from '../../http/body.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import { type AuthConfig, decodeAuthHeader } from '../distribution/index.js';
import type { RegistryService } from '../distribution/registry.service.js';
import { searchFilters } from '../distribution/search.js';
import type { ApiContext, ApiRouter } from './context.js';

/** X-Registry-Auth when given (an unreadable one means no credentials, as dockerd reads it). */
function headerAuth(ctx: ApiContext): AuthConfig {
  const h = ctx.req.headers['x-registry-auth'];
  return decodeAuthHeader(Array.isArray(h) ? h[0] : h);
}

/** A request's abort signal: the client went away. */
function clientGone(ctx: ApiContext): AbortSignal {
  const abort = new AbortController();
  ctx.res.on('close', () => {
    if (!ctx.res.writableFinished) abort.abort(new Error('the client went away'));
  });
  return abort.signal;
}

/** POST /auth, GET /images/search, GET /distribution/{name}/json. */
export function registerDistributionRoutes(router: ApiRouter, registry: RegistryService): void {
  router.post('/auth', async (ctx) => {
    const body = await readJsonObject(ctx.req);
    const creds = decodeAuthHeader(Buffer.from(JSON.stringify(body)).toString('base64'));
    const r = await registry.login(creds, clientGone(ctx));
    sendJson(ctx.res, 200, { IdentityToken: r.identityToken, Status: r.status });
  });

  router.get('/images/search', async (ctx) => {
    const q = ctx.query;
    const limitText = q.get('limit');
    let limit = 25;
    if (limitText) {
      if (!/^[+-]?\d+$/.test(limitText))
        throw invalidParameter(`strconv.Atoi: parsing ${JSON.stringify(limitText)}: invalid syntax`);
      limit = Number(limitText);
    }
    const filters = searchFilters(parseFilters(q.get('filters')));
    const results = await registry.search({
      term: q.get('term') ?? '',
      limit,
      filters,
      creds: headerAuth(ctx),
      signal: clientGone(ctx),
    });
    sendJson(ctx.res, 200, results);
  });

  router.get('/distribution/{name*}/json', async (ctx) => {
    const name = ctx.params.name ?? '';
    const any = parseAnyReference(name);
    if (any.kind === 'id') throw invalidParameter('no manifest found for full image ID');
    const ref = tagNameOnly(any.ref);
    const info = await registry.inspect(
      {
        domain: ref.domain,
        path: ref.path,
        familiar: familiarName(ref),
        reference: ref.digest ?? (ref.tag as string),
      },
      headerAuth(ctx),
      clientGone(ctx),
    );
    sendJson(ctx.res, 200, info);
  });
}
