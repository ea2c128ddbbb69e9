import { invalidParameter, unavailable } from '../../common/errors.js';
import { Authorizer, TokenCache } from './auth.js';
import type { RegistryClient } from './client.js';
import { type Endpoint, HUB_DOMAIN } from './endpoint.js';
import { errorFromResponse } from './registry-error.js';
import { NetworkError, readBody } from './transport.js';
import type { AuthConfig } from './types.js';

/** One search result, in the field order of dockerd 20.10's registry.SearchResult. */
export interface SearchResult {
  star_count: number;
  is_official: boolean;
  name: string;
  is_trusted: boolean;
  is_automated: boolean;
  description: string;
}

/** Where a term is looked for: a registry host and the part of the term to match. */
export interface SearchPlan {
  /** `host:port` of the registries to ask, with whether they serve docker.io names (mirrors). */
  registries: Array<{ host: string; mirror: boolean; base?: string }>;
  /** The term without its registry part, lowercase. */
  term: string;
}

/** registry.splitReposSearchTerm: `host:port/term` names its registry; a bare term is docker.io's. */
export function splitSearchTerm(term: string): { index: string; remote: string } {
  const i = term.indexOf('/');
  if (i > 0) {
    const first = term.slice(0, i);
    if (first.includes('.') || first.includes(':') || first === 'localhost')
      return { index: first.toLowerCase(), remote: term.slice(i + 1) };
  }
  return { index: HUB_DOMAIN, remote: term };
}

/**
 * Which registries a search asks (there is no Docker Hub, and the V2 protocol has no search:
 * berth lists each registry's `_catalog` and matches the term in repository names).
 * `host:port/term` asks that registry. A bare term (a docker.io search for dockerd) asks the
 * configured registry mirrors (they serve docker.io names: `library/busybox` is answered as the
 * official `busybox`) and every `--insecure-registry` given as a host (not a CIDR).
 */
export function searchPlan(
  term: string,
  opts: { mirrors: string[]; insecureRegistries: string[] },
): SearchPlan {
  const { index, remote } = splitSearchTerm(term);
  if (index !== HUB_DOMAIN)
    return { registries: [{ host: index, mirror: false }], term: remote.toLowerCase() };
  const registries: SearchPlan['registries'] = [];
  for (const m of opts.mirrors) {
    try {
      const u = new URL(m);
      registries.push({
        host: u.host,
        mirror: true,
        base: `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`,
      });
    } catch {
      // a bad mirror was refused at start
    }
  }
  for (const r of opts.insecureRegistries) {
    if (/\/\d+$/.test(r)) continue; // a CIDR names no registry
    const host = r
      .replace(/^[a-z]+:\/\//, '')
      .replace(/\/+$/, '')
      .toLowerCase();
    if (!registries.some((x) => x.host === host)) registries.push({ host, mirror: false });
  }
  return { registries, term: remote.toLowerCase() };
}

/** Parsed search filters (is-official, is-automated, stars), as moby validates them. */
export interface SearchFilters {
  isOfficial?: boolean;
  isAutomated?: boolean;
  stars?: number;
}

export function searchFilters(filters: Map<string, string[]>): SearchFilters {
  const out: SearchFilters = {};
  for (const key of filters.keys()) {
    if (!['is-automated', 'is-official', 'stars'].includes(key))
      throw invalidParameter(`invalid filter '${key}'`);
  }
  for (const [key, field] of [
    ['is-automated', 'isAutomated'],
    ['is-official', 'isOfficial'],
  ] as const) {
    const values = filters.get(key);
    if (!values) continue;
    if (values.length === 1 && (values[0] === 'true' || values[0] === 'false'))
      out[field] = values[0] === 'true';
    else throw invalidParameter(`Invalid filter '${key}=[${values.join(' ')}]'`);
  }
  const stars = filters.get('stars');
  if (stars) {
    let max = 0;
    for (const s of stars) {
      if (!/^[+-]?\d+$/.test(s)) throw invalidParameter(`Invalid filter 'stars=${s}'`);
      max = Math.max(max, Number(s));
    }
    out.stars = max;
  }
  return out;
}

/** Every repository in one registry's catalog (paged), authorised with `creds` when it asks. */
async function catalog(
  client: RegistryClient,
  endpoints: Endpoint[],
  creds: AuthConfig,
  signal?: AbortSignal,
): Promise<string[]> {
  let last: unknown;
  for (const ep of endpoints) {
    try {
      const pinged = await client.ping(ep, signal);
      const auth = new Authorizer(client.transport, ep, creds, pinged.challenges, new TokenCache());
      const out: string[] = [];
      let next: string | undefined = `${ep.base}/v2/_catalog?n=1000`;
      for (let page = 0; next && page < 100; page++) {
        const headers: Record<string, string> = {};
        const authz = await auth.header(['registry:catalog:*'], signal);
        if (authz) headers.Authorization = authz;
        const res = await client.transport.send(ep, { method: 'GET', url: next, headers, signal });
        if (res.statusCode !== 200) throw await errorFromResponse(res);
        const body = JSON.parse((await readBody(res)).toString('utf8')) as { repositories?: unknown };
        if (Array.isArray(body.repositories))
          out.push(...body.repositories.filter((r): r is string => typeof r === 'string'));
        const link = /<([^>]+)>;\s*rel="?next"?/.exec(String(res.headers.link ?? ''));
        next = link ? new URL(link[1] as string, ep.base).href : undefined;
      }
      return out;
    } catch (err) {
      last = err;
      if (!(err instanceof NetworkError) || signal?.aborted) throw err;
    }
  }
  if (last instanceof NetworkError) throw unavailable(last.message);
  throw last ?? unavailable('no endpoint to reach the registry');
}

/**
 * GET /images/search: the repositories of the planned registries whose names contain the term,
 * filtered, sorted by name, at most `limit` (1..100, as dockerd checks it).
 */
export async function searchRegistries(
  client: RegistryClient,
  opts: {
    term: string;
    limit: number;
    filters: SearchFilters;
    creds: AuthConfig;
    mirrors: string[];
    insecureRegistries: string[];
    signal?: AbortSignal;
  },
): Promise<SearchResult[]> {
  if (!Number.isInteger(opts.limit) || opts.limit < 1 || opts.limit > 100)
    throw invalidParameter(`Limit ${opts.limit} is outside the range of [1, 100]`);
  const plan = searchPlan(opts.term, opts);
  if (!plan.registries.length)
    throw unavailable(
      'there is no Docker Hub here to search: search a registry with <host:port>/<term>, or configure registry mirrors or insecure registries by host',
    );
  const results = new Map<string, SearchResult>();
  for (const r of plan.registries) {
    const endpoints = r.base
      ? [{ ...(await client.resolver.endpoints(r.host, r.host))[0], base: r.base } as Endpoint]
      : await client.resolver.endpoints(r.host, r.host);
    const repos = await catalog(client, endpoints, opts.creds, opts.signal);
    for (const repo of repos) {
      if (!repo.toLowerCase().includes(plan.term)) continue;
      const official = r.mirror && /^library\/[^/]+$/.test(repo);
      const name = r.mirror ? (official ? repo.slice('library/'.length) : repo) : `${r.host}/${repo}`;
      if (results.has(name)) continue;
      results.set(name, {
        star_count: 0,
        is_official: official,
        name,
        is_trusted: false,
        is_automated: false,
        description: '',
      });
    }
  }
  const f = opts.filters;
  return [...results.values()]
    .filter((x) => f.isOfficial === undefined || x.is_official === f.isOfficial)
    .filter((x) => f.isAutomated === undefined || x.is_automated === f.isAutomated)
    .filter((x) => f.stars === undefined || x.star_count >= f.stars)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .slice(0, opts.limit);
}
