import type { Access } from './auth/authorizer.js';
import type { RequestContext } from './context.js';
import * as blobs from './handlers/blobs.js';
import * as lists from './handlers/lists.js';
import * as manifests from './handlers/manifests.js';
import * as uploads from './handlers/uploads.js';

export type Handler = (ctx: RequestContext) => Promise<void>;

export type RouteName =
  | 'base'
  | 'catalog'
  | 'manifest'
  | 'blob'
  | 'uploads'
  | 'upload'
  | 'tags'
  | 'referrers';

export interface Route {
  name: RouteName;
  /** Handlers by method; HEAD is listed explicitly where it is served. */
  methods: Partial<Record<string, Handler>>;
  /** The path's repository name (undefined for /v2/ and /v2/_catalog). */
  repo?: string;
  /** Reference, digest or upload id. */
  param: string;
}

const base: Handler = async (ctx) => {
  const text = '{}';
  ctx.res.statusCode = 200;
  ctx.res.setHeader('Content-Type', 'application/json; charset=utf-8');
  ctx.res.setHeader('Content-Length', 2);
  ctx.res.end(ctx.req.method === 'HEAD' ? undefined : text);
};

const TABLE: Record<RouteName, Partial<Record<string, Handler>>> = {
  base: { GET: base, HEAD: base },
  catalog: { GET: lists.catalog },
  manifest: {
    GET: manifests.getManifest,
    HEAD: manifests.getManifest,
    PUT: manifests.putManifest,
    DELETE: manifests.deleteManifest,
  },
  blob: { GET: blobs.getBlob, HEAD: blobs.getBlob, DELETE: blobs.deleteBlob },
  uploads: { POST: uploads.startUpload },
  upload: {
    GET: uploads.uploadStatus,
    PATCH: uploads.patchUpload,
    PUT: uploads.completeUpload,
    DELETE: uploads.cancelUpload,
  },
  tags: { GET: lists.listTags },
  referrers: { GET: lists.referrers },
};

const PATTERNS: Array<[RegExp, RouteName]> = [
  [/^\/v2\/(.+)\/manifests\/([^/]+)$/, 'manifest'],
  [/^\/v2\/(.+)\/blobs\/uploads\/?$/, 'uploads'],
  [/^\/v2\/(.+)\/blobs\/uploads\/([^/]+)$/, 'upload'],
  [/^\/v2\/(.+)\/blobs\/([^/]+)$/, 'blob'],
  [/^\/v2\/(.+)\/tags\/list$/, 'tags'],
  [/^\/v2\/(.+)\/referrers\/([^/]+)$/, 'referrers'],
];

/** Match a decoded path to a registry route. */
export function matchRoute(path: string): Route | undefined {
  if (path === '/v2/' || path === '/v2') return { name: 'base', methods: TABLE.base, param: '' };
  if (path === '/v2/_catalog') return { name: 'catalog', methods: TABLE.catalog, param: '' };
  if (!path.startsWith('/v2/')) return undefined;
  for (const [re, name] of PATTERNS) {
    const m = re.exec(path);
    if (m) return { name, methods: TABLE[name], repo: m[1], param: m[2] ?? '' };
  }
  return undefined;
}

/** What a request needs to be allowed to do, in token-scope terms. */
export function accessesFor(
  route: Route,
  method: string,
  query: URLSearchParams,
  fromName?: string,
): Access[] {
  if (route.name === 'base') return [];
  if (route.name === 'catalog') return [{ type: 'registry', name: 'catalog', actions: ['*'] }];
  const name = route.repo ?? '';
  let actions: string[];
  switch (method) {
    case 'GET':
    case 'HEAD':
      actions = ['pull'];
      break;
    case 'DELETE':
      actions = ['delete'];
      break;
    default:
      actions = ['pull', 'push'];
  }
  const out: Access[] = [{ type: 'repository', name, actions }];
  if (route.name === 'uploads' && method === 'POST' && query.has('mount') && fromName && fromName !== name) {
    out.push({ type: 'repository', name: fromName, actions: ['pull'] });
  }
  return out;
}
