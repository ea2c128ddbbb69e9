import { invalidParameter } from '../../common/errors.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import { parseGoDuration, parseGoInt } from '../images/dockerfile/go-text.js';
import type { ApiRouter } from './context.js';
import { gates, versionBefore } from './versions.js';

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
 * A size parameter of the build cache prune, as dockerd reads it (strconv.Atoi); 0 when absent.
 */
function bytesParam(query: URLSearchParams, name: string): number {
  const text = query.get(name);
  if (!text) return 0;
  try {
    return parseGoInt(text, 64);
  } catch (err) {
    const why = (err as Error).message.replace('strconv.ParseInt', 'strconv.Atoi');
    throw invalidParameter(`${name} is in bytes and expects an integer, got ${text}: ${why}`);
  }
}

/**
 * The space limits of a build cache prune by version: from 1.48 `reserved-space` (with the older
 * `keep-storage` read when it is 0 or absent), `max-used-space` and `min-free-space`; before, only
 * `keep-storage` (as the reserved space).
 */
export function pruneSpace(
  query: URLSearchParams,
  version: string,
): { reservedSpace: number; maxUsedSpace: number; minFreeSpace: number } {
  if (versionBefore(version, gates.buildPruneSpace)) {
    return { reservedSpace: bytesParam(query, 'keep-storage'), maxUsedSpace: 0, minFreeSpace: 0 };
  }
  let reservedSpace = bytesParam(query, 'reserved-space');
  if (reservedSpace === 0) reservedSpace = bytesParam(query, 'keep-storage');
  return {
    reservedSpace,
    maxUsedSpace: bytesParam(query, 'max-used-space'),
    minFreeSpace: bytesParam(query, 'min-free-space'),
  };
}

/**
 * The builder's endpoints that stand without a builder. berth keeps no build cache (builds are
 * their own piece of work), so a prune checks its parameters as dockerd does and finds nothing to
 * delete: `docker builder prune` and `docker system prune` work.
 */
export function registerBuildRoutes(router: ApiRouter): void {
  router.post('/build/prune', async (ctx) => {
    // dockerd's order: the filters' JSON, the sizes, then (the builder) the filters' names
    const filters = parseFilters(ctx.query.get('filters'));
    // the limits (and `all`) would choose what goes: with no cache, nothing does
    pruneSpace(ctx.query, ctx.version);
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
