import { invalidParameter } from '../../common/errors.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import { parseGoDuration, parseGoInt } from '../images/dockerfile/go-text.js';
import type { ApiRouter } from './context.js';

/** The filters dockerd's build cache prune knows (BuildKit's). */
const PRUNE_FILTERS = new Set([
  'until',
  'unused-for',
  'id',
  'parent',
  'type',
  'description',
  'inuse',
  'shared',
  'private',
]);

/**
 * The builder's endpoints that stand without a builder. berth keeps no build cache (builds are
 * their own piece of work), so a prune checks its parameters as dockerd does and finds nothing to
 * delete: `docker builder prune` and `docker system prune` work.
 */
export function registerBuildRoutes(router: ApiRouter): void {
  router.post('/build/prune', async (ctx) => {
    const keep = ctx.query.get('keep-storage');
    if (keep) {
      try {
        parseGoInt(keep, 64);
      } catch (err) {
        const why = (err as Error).message.replace('strconv.ParseInt', 'strconv.Atoi');
        throw invalidParameter(`keep-storage is in bytes and expects an integer, got ${keep}: ${why}`);
      }
    }
    const filters = parseFilters(ctx.query.get('filters'));
    for (const [name, values] of filters) {
      if (!PRUNE_FILTERS.has(name))
        throw invalidParameter(`failed to prune build cache: Invalid filter '${name}'`);
      if (name !== 'until' && name !== 'unused-for') continue;
      for (const v of values) {
        try {
          parseGoDuration(v);
        } catch (err) {
          throw invalidParameter(
            `failed to prune build cache: "${name}" filter expects a duration (e.g., '24h'): ${(err as Error).message}`,
          );
        }
      }
    }
    sendJson(ctx.res, 200, { CachesDeleted: null, SpaceReclaimed: 0 });
  });
}
