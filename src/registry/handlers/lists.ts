import { type RequestContext, sendJsonBody } from '../context.js';
import { RegistryError } from '../errors.js';
import { MediaTypes } from '../manifests/types.js';
import { checkDigest } from '../names.js';

export interface Page {
  entries: string[];
  /** Query of the next page, when more entries remain. */
  next?: { last: string; n: number };
}

/**
 * Paginate a lexically sorted list: the entries after `last`, at most `n` (and at most the
 * server's limit). A bad `n` (negative, not an integer) is PAGINATION_NUMBER_INVALID.
 */
export function paginate(sorted: string[], query: URLSearchParams, maxEntries: number): Page {
  const { n, last } = pageQuery(query, maxEntries);
  if (n === 0) return { entries: [] };
  const start = startAfter(sorted, last);
  const entries = sorted.slice(start, start + n);
  const page: Page = { entries };
  const lastEntry = entries[entries.length - 1];
  if (start + n < sorted.length && lastEntry !== undefined) page.next = { last: lastEntry, n };
  return page;
}

/** How many entries fit in a look-ahead batch of `paginateWhere`. */
const BATCH = 64;

/**
 * `paginate` over the entries that pass `keep` (checked lazily, in batches, from `last` on): a
 * page holds `n` kept entries, and a `next` only when another kept entry follows.
 */
export async function paginateWhere(
  sorted: string[],
  query: URLSearchParams,
  maxEntries: number,
  keep: (entry: string) => Promise<boolean>,
): Promise<Page> {
  const { n, last } = pageQuery(query, maxEntries);
  if (n === 0) return { entries: [] };
  const entries: string[] = [];
  for (let i = startAfter(sorted, last); i < sorted.length; i += BATCH) {
    const batch = sorted.slice(i, i + BATCH);
    const kept = await Promise.all(batch.map(keep));
    for (const [j, entry] of batch.entries()) {
      if (!kept[j]) continue;
      if (entries.length === n) return { entries, next: { last: entries[n - 1] as string, n } };
      entries.push(entry);
    }
  }
  return { entries };
}

function startAfter(sorted: string[], last: string): number {
  if (last === '') return 0;
  const start = sorted.findIndex((e) => e > last);
  return start < 0 ? sorted.length : start;
}

function pageQuery(query: URLSearchParams, maxEntries: number): { n: number; last: string } {
  const nText = query.get('n');
  const last = query.get('last') ?? '';
  let n = maxEntries;
  if (nText !== null && nText !== '') {
    if (!/^\d+$/.test(nText)) {
      throw new RegistryError(
        'PAGINATION_NUMBER_INVALID',
        `invalid number of results requested: ${JSON.stringify(nText)}`,
        {
          n: nText,
        },
      );
    }
    n = Math.min(Number(nText), maxEntries);
  }
  return { n, last };
}

function linkHeader(path: string, next: { last: string; n: number }): string {
  const q = new URLSearchParams({ last: next.last, n: String(next.n) });
  return `<${path}?${q.toString()}>; rel="next"`;
}

/** GET /v2/<name>/tags/list: the tags that resolve (a killed write may leave some that do not). */
export async function listTags(ctx: RequestContext): Promise<void> {
  const { state, name } = ctx;
  // A pull-through cache lists the upstream's tags (as distribution's proxy); the cached ones
  // when the upstream cannot answer.
  const remote = state.proxy ? await state.proxy.tags(name, ctx.query) : undefined;
  if (remote) {
    ctx.res.statusCode = 200;
    ctx.res.setHeader('Content-Type', 'application/json; charset=utf-8');
    ctx.res.setHeader('Content-Length', Buffer.byteLength(remote.body));
    if (remote.link) ctx.res.setHeader('Link', remote.link);
    ctx.res.end(remote.body);
    return;
  }
  const tags = await state.store.listTags(name);
  if (!tags) throw new RegistryError('NAME_UNKNOWN', 'repository name not known to registry', { name });
  const page = await paginateWhere(
    tags,
    ctx.query,
    state.maxEntries,
    async (tag) => (await state.store.tagTarget(name, tag)) !== undefined,
  );
  const headers: Record<string, string> = {};
  if (page.next) headers.Link = linkHeader(`/v2/${name}/tags/list`, page.next);
  sendJsonBody(ctx.res, 200, { name, tags: page.entries }, undefined, headers);
}

/** GET /v2/_catalog. */
export async function catalog(ctx: RequestContext): Promise<void> {
  const { state } = ctx;
  const repos = await state.store.repositories();
  const page = paginate(repos, ctx.query, state.maxEntries);
  const headers: Record<string, string> = {};
  if (page.next) headers.Link = linkHeader('/v2/_catalog', page.next);
  sendJsonBody(ctx.res, 200, { repositories: page.entries }, undefined, headers);
}

/**
 * GET /v2/<name>/referrers/<digest> (OCI 1.1): an index of the manifests whose subject it is,
 * sorted by digest, at most `berth.pagination.referrers` descriptors a page (`n` may ask for
 * fewer); a `Link` header names the next page (`last` is the page's last digest).
 */
export async function referrers(ctx: RequestContext): Promise<void> {
  const { state, name, query } = ctx;
  const subject = checkDigest(ctx.param);
  const filter = query.getAll('artifactType').filter((t) => t !== '');
  let infos = await state.store.referrers(name, subject);
  if (filter.length > 0)
    infos = infos.filter((i) => i.artifactType !== undefined && filter.includes(i.artifactType));
  const page = paginate(
    infos.map((i) => i.digest),
    query,
    state.referrersPageSize,
  );
  const onPage = new Set(page.entries);
  const manifests = infos
    .filter((i) => onPage.has(i.digest))
    .map((i) => {
      const d: Record<string, unknown> = { mediaType: i.mediaType, digest: i.digest, size: i.content.length };
      if (i.artifactType !== undefined) d.artifactType = i.artifactType;
      if (i.annotations !== undefined) d.annotations = i.annotations;
      return d;
    });
  const headers: Record<string, string> = {};
  if (filter.length > 0) headers['OCI-Filters-Applied'] = 'artifactType';
  if (page.next) {
    const q = new URLSearchParams({ last: page.next.last, n: String(page.next.n) });
    for (const t of filter) q.append('artifactType', t);
    headers.Link = `</v2/${name}/referrers/${subject.digest}?${q.toString()}>; rel="next"`;
  }
  sendJsonBody(
    ctx.res,
    200,
    { schemaVersion: 2, mediaType: MediaTypes.ociIndex, manifests },
    MediaTypes.ociIndex,
    headers,
  );
}
