import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorMessage, invalidParameter } from '../../common/errors.js';
import { parseBool, parseFilters, parseIntParam } from '../../http/query.js';
import { requestBody } from '../../http/raw-body.js';
import { sendJson } from '../../http/server.js';
import { type JsonMessageStream, progressBar, startJsonStream } from '../../http/stream.js';
import type { BuildOptions } from '../build/build.options.js';
import type { BuildMessage } from '../build/build-output.js';
import type { Builder } from '../build/builder.js';
import { parseGoDuration, parseGoInt } from '../images/dockerfile/go-text.js';
import { parsePlatform } from '../images/import.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
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

/** A JSON query parameter of a build (buildargs, labels, cachefrom, ulimits); undefined when absent. */
function jsonParam(q: URLSearchParams, name: string): unknown {
  const text = q.get(name);
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalidParameter(`failed to parse ${name}: ${errorMessage(err)}`);
  }
}

function stringMap(value: unknown, name: string, nullable: boolean): Map<string, string | null> {
  const out = new Map<string, string | null>();
  if (value === undefined || value === null) return out;
  if (typeof value !== 'object' || Array.isArray(value))
    throw invalidParameter(`${name} must be a JSON object`);
  for (const [k, v] of Object.entries(value as object)) {
    if (typeof v === 'string' || (nullable && v === null)) out.set(k, v);
    else throw invalidParameter(`${name}: the value of ${k} must be a string`);
  }
  return out;
}

function stringList(value: unknown, name: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    throw invalidParameter(`${name} must be a JSON array of strings`);
  }
  return value as string[];
}

/**
 * X-Registry-Config: base64 JSON of registry → auth config; each entry becomes the
 * X-Registry-Auth a pull of that registry sends (base64url JSON).
 */
export function registryConfig(header: string | string[] | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (typeof header !== 'string' || header === '') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
  } catch {
    // dockerd ignores an X-Registry-Config it cannot read
    return out;
  }
  if (!parsed || typeof parsed !== 'object') return out;
  for (const [registry, auth] of Object.entries(parsed as object)) {
    if (auth && typeof auth === 'object') {
      out.set(registry, Buffer.from(JSON.stringify(auth)).toString('base64url'));
    }
  }
  return out;
}

function intParam(q: URLSearchParams, name: string): number | undefined {
  return parseIntParam(q.get(name), name) || undefined;
}

/** POST /build's parameters (dockerd 20.10's newImageBuildOptions), as plain options. */
export function buildOptions(ctx: ApiContext): BuildOptions {
  const q = ctx.query;
  const version = q.get('version');
  if (version && version !== '1') {
    throw invalidParameter(
      `unsupported builder version ${version}: berth builds with the classic builder (1)`,
    );
  }
  const rm = q.get('rm') === null || q.get('rm') === '' ? true : parseBool(q.get('rm'));
  const forceRm = parseBool(q.get('forcerm'));
  const ulimits = jsonParam(q, 'ulimits');
  const opts: BuildOptions = {
    tags: q.getAll('t').filter((t) => t !== ''),
    quiet: parseBool(q.get('q')),
    noCache: parseBool(q.get('nocache')),
    pull: parseBool(q.get('pull')),
    rm: rm || forceRm,
    forceRm,
    buildArgs: stringMap(jsonParam(q, 'buildargs'), 'buildargs', true),
    labels: Object.fromEntries(stringMap(jsonParam(q, 'labels'), 'labels', false)) as Record<string, string>,
    extraHosts: q
      .getAll('extrahosts')
      .flatMap((h) => h.split(','))
      .filter(Boolean),
    cacheFrom: stringList(jsonParam(q, 'cachefrom'), 'cachefrom'),
    squash: parseBool(q.get('squash')),
    registryAuth: registryConfig(ctx.req.headers['x-registry-config']),
  };
  const str = (name: string) => q.get(name) || undefined;
  const set = <K extends keyof BuildOptions>(k: K, v: BuildOptions[K] | undefined) => {
    if (v !== undefined) opts[k] = v;
  };
  set('dockerfile', str('dockerfile'));
  set('remote', str('remote'));
  set('target', str('target'));
  set('networkMode', str('networkmode'));
  set('cpuSetCpus', str('cpusetcpus'));
  set('cpuSetMems', str('cpusetmems'));
  set('cgroupParent', str('cgroupparent'));
  set('isolation', str('isolation'));
  set('shmSize', intParam(q, 'shmsize'));
  set('memory', intParam(q, 'memory'));
  set('memorySwap', intParam(q, 'memswap'));
  set('cpuShares', intParam(q, 'cpushares'));
  set('cpuPeriod', intParam(q, 'cpuperiod'));
  set('cpuQuota', intParam(q, 'cpuquota'));
  if (atLeast(ctx, gates.buildPlatform)) {
    const platform = str('platform');
    // refused before the build starts, in dockerd's words (`"foobar": unknown operating system…`)
    if (platform) parsePlatform(platform);
    set('platform', platform);
  }
  if (Array.isArray(ulimits)) opts.ulimits = ulimits as BuildOptions['ulimits'];
  if (opts.isolation && opts.isolation !== 'default') {
    throw invalidParameter(`Unsupported isolation: "${opts.isolation}"`);
  }
  return opts;
}

/**
 * A build message as dockerd writes it: Go's JSON (`<`, `>`, `&`, U+2028 and U+2029 escaped as
 * \u sequences, which the build's output is full of: `RUN a > b && c`), a pull's progress with
 * its bar, then CRLF.
 */
export function buildMessageLine(m: BuildMessage): string {
  let out: object = m;
  if ('status' in m && m.progressDetail?.current !== undefined) {
    // dockerd's field order: status, progressDetail, progress, id
    const bar = progressBar(m.progressDetail.current, m.progressDetail.total);
    out = {
      status: m.status,
      progressDetail: m.progressDetail,
      ...(bar ? { progress: bar } : {}),
      ...(m.id !== undefined ? { id: m.id } : {}),
    };
  }
  const json = JSON.stringify(out).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${(c.codePointAt(0) as number).toString(16).padStart(4, '0')}`,
  );
  return `${json}\r\n`;
}

/** Writes build messages on a started JSON stream's response (nothing once it is gone). */
function messageWriter(res: ServerResponse): (m: BuildMessage) => void {
  return (m) => {
    if (!res.destroyed && !res.writableEnded) res.write(buildMessageLine(m));
  };
}

/** `POST /build` (with or without a version prefix), its query aside. */
const BUILD_TARGET = /^(?:\/v[0-9.]+)?\/build(?:\?|$)/;

/**
 * Whether a request's body is read below node's HTTP parser (ExchangeServerOptions.rawBody):
 * a build's context, tens of MiB that node's parser would copy piece by piece.
 */
export function buildBodyBelowParser(req: IncomingMessage): boolean {
  return req.method === 'POST' && BUILD_TARGET.test(req.url ?? '');
}

/**
 * POST /build (the classic builder's protocol: the context as the body) and the build cache's
 * endpoints (POST /build/prune, and the cache in GET /system/df through the builder).
 */
export function registerBuildRoutes(router: ApiRouter, builder: Builder): void {
  router.post('/build', async (ctx) => {
    const opts = buildOptions(ctx);
    const cancel = new AbortController();
    const onClose = () => {
      if (!ctx.res.writableFinished) cancel.abort(new Error('the client went away'));
    };
    ctx.res.on('close', onClose);
    let stream: JsonMessageStream | undefined;
    const write = messageWriter(ctx.res);
    const out = (m: BuildMessage): void => {
      stream ??= startJsonStream(ctx.res);
      write(m);
    };
    try {
      // the context and the Dockerfile first: their errors are the answer's status (unless a
      // remote's download progress has started the answer)
      const build = await builder.prepare(requestBody(ctx.req), opts, cancel.signal, out);
      stream ??= startJsonStream(ctx.res);
      await build.run(write);
      stream.end();
    } catch (err) {
      if (!stream) throw err;
      const message = errorMessage(err);
      write({ errorDetail: { message }, error: message });
      stream.end();
    } finally {
      ctx.res.off('close', onClose);
    }
  });

  router.post('/build/prune', async (ctx) => {
    // dockerd's order: the filters' JSON, the sizes, then (the builder) the filters' names
    const filters = parseFilters(ctx.query.get('filters'));
    const space = pruneSpace(ctx.query, ctx.version);
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
    const report = await builder.prune({
      all: parseBool(ctx.query.get('all')),
      filters,
      reservedSpace: space.reservedSpace,
      maxUsedSpace: space.maxUsedSpace,
    });
    sendJson(ctx.res, 200, report);
  });
}
