import { updateConfigFields, wrapperFields } from '../../../src/engine/api/schema/containers.schema.js';
import { execConfigFields, execStartFields } from '../../../src/engine/api/schema/exec.schema.js';
import type { Fields } from '../../../src/engine/api/schema/go-json.js';
import { volumeCreateFields } from '../../../src/engine/api/schema/volumes.schema.js';
import { MAX_API_VERSION, MIN_API_VERSION } from '../../../src/engine/api/versions.js';
import type { ExchangeResult } from '../lib/exchange.js';
import { anyJson, type GenOptions, genStruct, type Hint, jsonBytes } from '../lib/json-gen.js';
import type { ParsedResponse } from '../lib/response-parser.js';
import type { Rng } from '../lib/rng.js';
import type { Fuzzer } from '../lib/runner.js';
import { buildContextTar, fuzzTar, smallTar } from '../lib/tar.js';
import {
  anyString,
  badSegment,
  boolText,
  filtersValue,
  numberText,
  pct,
  pctPath,
  queryValue,
  timeText,
  word,
} from '../lib/values.js';
import {
  otherMethod,
  type RequestSpec,
  serialize,
  targetBreaksRequestLine,
  type WireRequest,
} from '../lib/wire.js';
import { type EngineRoute, readsBody } from './routes.js';
import {
  createBodyProblem,
  execBodyProblem,
  remoteRegistryProblem,
  updateBodyProblem,
  volumeBodyProblem,
} from './safety.js';
import type { EngineWorld } from './world.js';

/**
 * Engine requests: a route of the engine's tables (routes.ts) with its parameters drawn from the
 * fixtures or mutated, an API version prefix (valid, too old, too new, garbage), query parameters
 * the route's file reads (and others, repeated, huge, badly encoded), a body drawn from the
 * route's request schema (src/engine/api/schema) and framing and headers mutated (lib/wire.ts).
 * Bodies that could reach the host are never sent (safety.ts).
 */

type BodyKind =
  | 'create'
  | 'update'
  | 'exec'
  | 'execStart'
  | 'volume'
  | 'json'
  | 'start'
  | 'import'
  | 'archive'
  | 'commit'
  | 'auth'
  | 'build';

/** The body each route that takes one gets; a route that reads a body and is missing here fails the run. */
export const BODY_KINDS: Record<string, BodyKind> = {
  'POST /containers/create': 'create',
  'POST /containers/{name}/update': 'update',
  'POST /containers/{name}/exec': 'exec',
  'POST /exec/{id}/start': 'execStart',
  'POST /volumes/create': 'volume',
  'POST /networks/create': 'json',
  'POST /networks/{id}/connect': 'json',
  'POST /networks/{id}/disconnect': 'json',
  'POST /containers/{name}/start': 'start',
  'POST /images/create': 'import',
  'PUT /containers/{name}/archive': 'archive',
  // a container Config: it becomes an image's config only (commit never applies a HostConfig)
  'POST /commit': 'commit',
  // docker login: credentials for a registry on loopback (nothing listens there) or for docker.io
  'POST /auth': 'auth',
  // a context with a Dockerfile of local bases and harmless steps (lib/tar.ts), or a broken tar
  'POST /build': 'build',
};

/** Where a login may go: loopback ports nothing listens on, and names that need no network. */
const LOGIN_SERVERS = [
  '127.0.0.1:1',
  'localhost:1',
  'http://127.0.0.1:1/',
  'https://127.0.0.1:1/v1/',
  '[::1]:1',
  'docker.io',
  'https://index.docker.io/v1/',
  '',
];

const ROUTE_WEIGHT: Record<string, number> = {
  'POST /containers/create': 6,
  'POST /containers/{name}/start': 3,
  'POST /containers/{name}/exec': 2,
  'POST /exec/{id}/start': 2,
  'POST /containers/{name}/update': 2,
  'POST /volumes/create': 2,
  // never drawn: a swarm init or join starts an etcd member and listens on the host's fixed ports
  // (2377 on every address, 2380 on the advertise address), which tests running beside the
  // fuzzer use too; their input handling is tested in swarm-cli.test.ts
  'POST /swarm/init': 0,
  'POST /swarm/join': 0,
};

/** Answers that may stream on after their head. */
const STREAMING = [
  /^\/events$/,
  /\/logs$/,
  /\/stats$/,
  /\/attach(\/ws)?$/,
  /^\/exec\/\{id\}\/start$/,
  /\/wait$/,
  /\/export$/,
  /\/archive$/,
  /^\/images\/create$/,
];

/** Answers that may take longer than the timeout: a wait for a container that runs on. */
const MAY_BLOCK = [/\/wait$/];

/** Commands a container or exec may run: harmless, most of them quick. */
const COMMANDS: unknown[] = [
  ['true'],
  ['false'],
  ['echo', 'fz'],
  ['sh', '-c', 'exit 3'],
  ['sh', '-c', 'echo out; echo err >&2'],
  ['sleep', '0.2'],
  ['sleep', '100000'],
  ['cat'],
  ['/nonexistent'],
  ['ls', '/'],
  ['id'],
  [],
  [''],
  'true',
  '',
];

const SIGNALS = [
  'KILL',
  'SIGKILL',
  '9',
  'TERM',
  'SIGTERM',
  'HUP',
  '0',
  '-1',
  '65',
  '999',
  'SIGFOO',
  'sigkill',
  'SIGRTMIN+3',
  'SIGRTMAX-1',
  'x',
  '',
];
const STOP_TIMES = [
  '0',
  '1',
  '-0',
  '+1',
  ' 1',
  'abc',
  '1.5',
  '1e3',
  '0x10',
  '',
  '99999999999999999999',
  '-99999999999999999999',
  '18446744073709551616',
  '9007199254740993',
];
const ARCHIVE_PATHS = [
  '/',
  '/tmp',
  '/root',
  '/etc',
  '/nonexistent',
  '/etc/hostname',
  'tmp',
  '',
  '/tmp/',
  '/tmp/./x',
  '/bin/sh',
];
/** docker import's sources: the body, or URLs on loopback ports nothing listens on (never a lookup). */
const IMPORT_SOURCES = [
  '-',
  '-',
  '-',
  '',
  'http://127.0.0.1:1/x.tar',
  'http://[::1]:1/',
  'http://',
  '://',
  'http://127.0.0.1:99999/',
];
const CHANGES = [
  'CMD ["sh"]',
  'ENV A=b',
  'ENV',
  'FROM busybox',
  'RUN true',
  'EXPOSE 80',
  'EXPOSE x',
  'USER 0',
  'LABEL a=b',
  'VOLUME /data',
  'WORKDIR /x',
  'ENTRYPOINT ["true"]',
  'ONBUILD RUN true',
  'HEALTHCHECK --interval=1s CMD true',
  'STOPSIGNAL 9',
  'SHELL ["sh"]',
  'CMD [',
  '',
  '#',
];
const PLATFORMS = [
  'linux/amd64',
  'linux',
  'windows/amd64',
  'linux/arm64/v8',
  '',
  '/',
  'a/b/c/d',
  '{"os":"linux"}',
  '{"os":1}',
  'null',
  '[',
  '{}',
];
const REFS = [
  'fz/imp',
  'fz/imp:1',
  'FZ',
  'a:b:c',
  'x@sha256:abc',
  'busybox',
  'busybox:fz',
  '',
  'localhost:5000/fz',
  `${'a'.repeat(300)}`,
  'a//b',
  '-x',
];

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

export interface EngineFuzzerOptions {
  /** Mutation rate of framing and headers. */
  mutateRate?: number;
}

interface Meta {
  route?: EngineRoute;
}

export class EngineFuzzer implements Fuzzer {
  readonly avoided = new Map<string, number>();
  private readonly meta = new WeakMap<WireRequest, Meta>();
  private readonly weights: Array<readonly [EngineRoute, number]>;
  /**
   * This request is a clean one (a third of them): a valid version, the route's method, the
   * fixtures' names, a sparse body of the right types, no framing mutations. Those make and run
   * containers, which the others then have to deal with.
   */
  private clean = false;

  constructor(
    routes: EngineRoute[],
    private readonly world: EngineWorld,
    private readonly opts: EngineFuzzerOptions = {},
  ) {
    const missing = routes.filter((r) => readsBody(r) && !BODY_KINDS[`${r.method} ${r.template}`]);
    if (missing.length)
      throw new Error(
        `routes that read a body have no body kind in BODY_KINDS: ${missing.map((r) => `${r.method} ${r.template}`).join(', ')}`,
      );
    const known = new Set(routes.map((r) => `${r.method} ${r.template}`));
    const stale = Object.keys(BODY_KINDS).filter((k) => !known.has(k));
    if (stale.length)
      throw new Error(`BODY_KINDS names routes the engine does not have: ${stale.join(', ')}`);
    // swarm's many routes all answer the same: they get less of the run; the routes that make
    // and run containers (what most others need to do anything) get more
    this.weights = routes.map(
      (r) =>
        [r, ROUTE_WEIGHT[`${r.method} ${r.template}`] ?? (r.file === 'swarm.routes.ts' ? 0.15 : 1)] as const,
    );
  }

  maintain(index: number): Promise<void> {
    return this.world.maintain(index);
  }

  /**
   * 501 (not implemented) anywhere; 503 as swarm's "not a swarm manager" answers, and as the
   * answer of a login to a registry that cannot be reached (`Get "<registry>/v2/": …`, as dockerd
   * words it; the fuzzer logs in to loopback ports nothing listens on, or to docker.io, which
   * has no Hub here), and of a search with no registry to ask.
   */
  deliberate = (res: ParsedResponse): boolean => {
    if (res.status === 501) return true;
    if (res.status !== 503) return false;
    const text = res.body.toString('utf8');
    if (/not a swarm manager|not part of a swarm/.test(text)) return true;
    try {
      const message = (JSON.parse(text) as { message?: string }).message ?? '';
      return (
        /^Get "https?:\/\/[^"\s]+\/v2\/": /.test(message) || /^there is no Docker Hub here\b/.test(message)
      );
    } catch {
      return false;
    }
  };

  observe(req: WireRequest, result: ExchangeResult): void {
    const route = this.meta.get(req)?.route;
    const res = result.responses.find((r) => r.status === 201 && r.complete);
    if (!route || !res) return;
    let id: string | undefined;
    try {
      id = (JSON.parse(res.body.toString('utf8')) as { Id?: string }).Id;
    } catch {
      return;
    }
    if (typeof id !== 'string') return;
    if (route.template === '/containers/create') this.world.learnContainer(id);
    if (route.template === '/containers/{name}/exec') this.world.learnExec(id);
  }

  generate(rng: Rng, index: number): WireRequest {
    const r = rng.float();
    if (r < 0.05) return this.randomPath(rng);
    this.clean = rng.chance(0.35);
    const route = rng.weighted(this.weights);
    const version = this.version(rng);
    const method = this.clean || rng.chance(0.93) ? route.method : otherMethod(rng);
    let path = this.fillTemplate(rng, route);
    if (!this.clean && rng.chance(0.06)) path = this.mutatePath(rng, path);
    const query = this.query(rng, route, index);
    // requests that would reach a registry off this machine: aimed at a local name instead
    for (const key of ['fromImage', 'term'] as const) {
      if (query[key] !== undefined && remoteRegistryProblem(safeDecode(query[key]))) query[key] = 'fz/imp';
    }
    // a build's remote context only from loopback (nothing listens on port 1); no cgroup of the host's
    const remote = query.remote === undefined ? undefined : safeDecode(query.remote);
    const loopbackUrl = /^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?\//i;
    if (remote !== undefined && !loopbackUrl.test(remote) && /[.:/@]/.test(remote)) {
      query.remote = 'http://127.0.0.1:1/ctx.tar';
    }
    delete query.cgroupparent;
    const named = /^\/(?:images\/(.+)\/push|distribution\/(.+)\/json)$/.exec(path);
    if (named && remoteRegistryProblem(safeDecode(named[1] ?? named[2] ?? ''))) {
      path = path.startsWith('/images/') ? '/images/fz/imp/push' : '/distribution/fz/imp/json';
    }
    const kind = BODY_KINDS[`${route.method} ${route.template}`];
    const headers: Array<[string, string]> = [['User-Agent', 'berth-fuzz']];
    let body: Buffer | undefined;
    if (kind) {
      body = this.body(rng, kind, version.version ?? MAX_API_VERSION, index);
      if (kind === 'import' || kind === 'archive' || kind === 'build') {
        headers.push([
          'Content-Type',
          rng.pick(['application/x-tar', 'application/octet-stream', 'text/plain']),
        ]);
        // archive bodies: a tar only into a plain path; anything else gets no tar
        if (kind === 'archive') query.path = this.archivePath(rng, body, query);
      } else if (rng.chance(0.9)) headers.push(['Content-Type', 'application/json']);
    } else if (rng.chance(0.05)) {
      body = jsonBytes(rng, anyJson(rng));
    }
    const target = this.target(rng, version.prefix + path, query);
    const spec: RequestSpec = { method, target, headers, body };
    return this.finish(rng, spec, route, `${method} ${version.prefix}${route.template}`);
  }

  private finish(rng: Rng, spec: RequestSpec, route: EngineRoute | undefined, label: string): WireRequest {
    const wire = serialize(rng, spec, {
      host: 'localhost',
      mutateRate: this.clean ? 0 : this.opts.mutateRate,
    });
    let data = wire.data;
    const methods = [spec.method];
    // now and then a second request on the same connection (pipelined)
    if (!this.clean && rng.chance(0.03) && !wire.halfClose) {
      data = Buffer.concat([data, Buffer.from('GET /_ping HTTP/1.1\r\nHost: localhost\r\n\r\n')]);
      methods.push('GET');
    }
    const template = route?.template ?? '';
    const req: WireRequest = {
      data,
      methods,
      halfClose: wire.halfClose,
      mayClose: wire.mayClose || targetBreaksRequestLine(spec.target) || !/^[A-Z]+$/.test(spec.method),
      streaming: STREAMING.some((re) => re.test(template)),
      mayBlock: MAY_BLOCK.some((re) => re.test(template)),
      label: `${label}${wire.mutated.length ? ` [${wire.mutated.join(', ')}]` : ''}`,
    };
    this.meta.set(req, { route });
    return req;
  }

  /** A request to a path of no route, or to a route's path gone wrong. */
  private randomPath(rng: Rng): WireRequest {
    this.clean = false;
    const segments = Array.from({ length: rng.int(0, 6) }, () =>
      rng.chance(0.5) ? word(rng) : badSegment(rng),
    );
    let target = `/${segments.join('/')}`;
    if (rng.chance(0.2))
      target = rng.pick([
        '*',
        'http://localhost/_ping',
        'http://localhost:2375/v1.41/version',
        '//_ping',
        'localhost:80',
        '',
        '/?',
        '/#x',
        `/${'a/'.repeat(5000)}`,
      ]);
    if (rng.chance(0.3)) target += `?${this.rawQuery(rng)}`;
    const body = rng.chance(0.2) ? jsonBytes(rng, anyJson(rng)) : undefined;
    const spec: RequestSpec = { method: otherMethod(rng), target, headers: [], body };
    return this.finish(rng, spec, undefined, `${spec.method} (random path)`);
  }

  private version(rng: Rng): { prefix: string; version?: string } {
    const r = rng.float();
    if (r < 0.5) return { prefix: '' };
    if (this.clean) return { prefix: `/v${MAX_API_VERSION}`, version: MAX_API_VERSION };
    const [, minMinor = 24] = MIN_API_VERSION.split('.').map(Number);
    const [, maxMinor = 56] = MAX_API_VERSION.split('.').map(Number);
    if (r < 0.85) {
      const v = `1.${rng.int(minMinor, maxMinor)}`;
      return { prefix: `/v${v}`, version: v };
    }
    return {
      prefix: rng.pick([
        '/v1.12',
        '/v1.23',
        `/v1.${maxMinor + 1}`,
        '/v1.99',
        '/v2',
        '/v1',
        '/v1.41.0',
        '/v1.41.99999999999999999999',
        '/v',
        '/v.',
        '/v1..41',
        '/v01.041',
        '/v1.4a',
        '/V1.41',
        '/v9999999999999999999999.1',
        '/v-1.41',
        '/v1.-1',
        '/v0.0',
        '/v1.41/v1.41',
        '/v1e1',
        `/v${'1.'.repeat(2000)}1`,
      ]),
    };
  }

  private refFor(rng: Rng, route: EngineRoute, key: string): string {
    const r = this.clean ? 1 : rng.float();
    if (r < 0.15) return badSegment(rng);
    if (r < 0.2) return pct(anyString(rng, 60));
    if (route.template.startsWith('/exec/')) {
      const pool = [...this.world.execs, ...this.world.learnedExecs];
      return rng.pick(pool.length ? pool : ['none']);
    }
    if (route.template.startsWith('/images/')) return pctPath(rng.pick([...this.world.images, ...REFS]));
    if (route.template.startsWith('/volumes/')) return rng.pick([...this.world.volumes, 'fz-missing', 'a']);
    if (route.template.startsWith('/networks/'))
      return rng.pick(['bridge', 'host', 'none', 'default', 'fz-net', 'BRIDGE']);
    if (route.template.startsWith('/containers/')) {
      const pool =
        rng.chance(0.2) && this.world.learnedContainers.length
          ? this.world.learnedContainers
          : this.world.containers;
      const name = rng.pick(pool);
      if (key.endsWith('*') && rng.chance(0.1))
        return rng.pick([`/${name}`, `${name}/alias`, `/${name}/alias`]);
      return name;
    }
    return rng.pick(['x', 'fz', '0', badSegment(rng)]);
  }

  private fillTemplate(rng: Rng, route: EngineRoute): string {
    return route.template.replace(/\{([^}]+)\}/g, (_, key: string) => this.refFor(rng, route, key));
  }

  private mutatePath(rng: Rng, path: string): string {
    switch (rng.int(0, 9)) {
      case 0:
        return `${path}/`;
      case 1:
        return path.replace('/', '//');
      case 2:
        return `${path}/..`;
      case 3:
        return `/x/..${path}`;
      case 4:
        return path.toUpperCase();
      case 5:
        return `${path}%2F`;
      case 6:
        return `${path};x=1`;
      case 7:
        return `${path}#frag`;
      case 8:
        return `${path}/${'a'.repeat(rng.pick([1000, 70_000]))}`;
      default:
        return path.replace(
          /\/([^/]+)$/,
          (_, s: string) => `/${pct(s).replace(/[a-z]/g, (c) => `%${c.charCodeAt(0).toString(16)}`)}`,
        );
    }
  }

  private paramValue(rng: Rng, name: string, route: EngineRoute, index: number): string {
    const t = route.template;
    if (rng.chance(0.1)) return queryValue(rng);
    switch (name) {
      case 't':
        return pct(rng.pick(STOP_TIMES));
      case 'filters':
        return pct(filtersValue(rng));
      case 'since':
      case 'until':
      case 'before':
        return t === '/containers/json' ? pct(rng.pick([...this.world.containers, 'x'])) : pct(timeText(rng));
      case 'signal':
        return rng.pick(SIGNALS);
      case 'condition':
        return rng.pick(['not-running', 'next-exit', 'removed', '', 'x', 'NOT-RUNNING']);
      case 'fromSrc':
        return pct(rng.pick(IMPORT_SOURCES));
      case 'fromImage':
        return pct(rng.pick(['', 'busybox', 'fz/x:1', 'a:b:c', 'UPPER', 'x@sha256:1', ...REFS]));
      case 'changes':
        return pct(rng.pick(CHANGES));
      case 'platform':
      case 'platforms':
        return pct(rng.pick(PLATFORMS));
      case 'repo':
      case 'tag':
      case 'reference':
      case 'filter':
        return pct(rng.pick(REFS));
      case 'name':
        return t === '/containers/create' && rng.chance(0.6)
          ? `fz-c${index}`
          : pct(rng.pick(['', 'fz-renamed', '/x', 'a b', 'x'.repeat(300), '.x', 'fz-running', ...REFS]));
      case 'ps_args':
        return pct(
          rng.pick([
            '-ef',
            'aux',
            '-o pid',
            '--help',
            '-X',
            'x'.repeat(5000),
            '',
            '-p 1',
            '--sort=-pid',
            '-o %z',
            anyString(rng, 30),
          ]),
        );
      case 'h':
      case 'w':
      case 'limit':
      case 'tail':
      case 'keep-storage':
      case 'reserved-space':
      case 'max-used-space':
      case 'min-free-space':
        return pct(rng.chance(0.2) ? 'all' : numberText(rng));
      case 'type':
        return rng.pick(['container', 'image', 'volume', 'build-cache', 'x', '']);
      case 'format':
        return rng.pick(['json', '', 'x']);
      case 'detachKeys':
        return pct(rng.pick(['ctrl-p,ctrl-q', 'ctrl-x', 'a', ',', 'ctrl-', '']));
      case 'scope':
        return rng.pick(['local', 'swarm', 'global', 'x']);
      case 'message':
        return pct(anyString(rng, 100));
      case 'path':
        return pct(
          rng.pick([
            ...ARCHIVE_PATHS,
            '/..',
            '/../../..',
            '/etc/../..',
            'x'.repeat(5000),
            '/proc/self',
            '/dev/null',
            anyString(rng, 40),
          ]),
        );
      default:
        return pct(boolText(rng));
    }
  }

  private query(rng: Rng, route: EngineRoute, index: number): Record<string, string> & { __extra?: string } {
    const out: Record<string, string> = {};
    if (this.clean) {
      if (route.template === '/containers/create') out.name = `fz-c${index}`;
      if (route.template.endsWith('/stop') || route.template.endsWith('/restart')) out.t = '0';
      if (route.template.endsWith('/logs')) out.stdout = '1';
      return out;
    }
    for (const name of route.params)
      if (rng.chance(0.25)) out[name] = this.paramValue(rng, name, route, index);
    // the stop and restart waits must stay short: their `t` is always one of STOP_TIMES
    if (route.template.endsWith('/stop') || route.template.endsWith('/restart'))
      if (!('t' in out) && rng.chance(0.7)) out.t = rng.pick(['0', '1']);
    return out;
  }

  /** A few unknown, repeated, huge or badly encoded parameters. */
  private rawQuery(rng: Rng): string {
    switch (rng.int(0, 6)) {
      case 0:
        return `${word(rng)}=${queryValue(rng)}`;
      case 1:
        return 'all=1&all=0&all=x';
      case 2:
        return `x=${'y'.repeat(rng.pick([10_000, 70_000]))}`;
      case 3:
        return rng.pick(['&&&', '===', '%', '%zz=1', 'a=%', '=', '&=&', '?', 'a[]=1&a[]=2', 'a=1;b=2']);
      case 4:
        return Array.from({ length: 500 }, (_, i) => `k${i}=${i}`).join('&');
      case 5:
        return `filters=${pct(filtersValue(rng))}&filters=${pct(filtersValue(rng))}`;
      default:
        return `${pct(anyString(rng, 20))}=${pct(anyString(rng, 20))}`;
    }
  }

  private target(rng: Rng, path: string, query: Record<string, string>): string {
    const pairs = Object.entries(query).map(([k, v]) => `${k}=${v}`);
    if (this.clean) return pairs.length ? `${path}?${pairs.join('&')}` : path;
    if (rng.chance(0.08)) pairs.push(this.rawQuery(rng));
    // a key given twice, the second differently
    if (pairs.length && rng.chance(0.05))
      pairs.push(`${(pairs[0] as string).split('=')[0]}=${queryValue(rng)}`);
    const q = pairs.join('&');
    let target = q ? `${path}?${q}` : path;
    if (rng.chance(0.03)) target = `http://localhost${target}`;
    return target;
  }

  private archivePath(rng: Rng, body: Buffer | undefined, query: Record<string, string>): string {
    const looksTar = body !== undefined && body.length >= 512;
    const given = query.path !== undefined ? safeDecode(query.path) : undefined;
    if (looksTar && (given === undefined || !ARCHIVE_PATHS.includes(given)))
      return pct(rng.pick(ARCHIVE_PATHS));
    return query.path ?? pct(rng.pick(ARCHIVE_PATHS));
  }

  private hint(kind: BodyKind): Hint {
    return (path, rng) => {
      const name = path.join('.');
      const last = path[path.length - 1] ?? '';
      if (kind === 'create' && name === 'Image')
        return rng.chance(0.9) ? rng.pick(this.world.images) : undefined;
      if (last === 'Cmd' || last === 'Entrypoint' || last === 'Shell' || name === 'Healthcheck.Test')
        return rng.chance(0.6) ? rng.pick(COMMANDS) : undefined;
      if (name === 'StopTimeout' && kind === 'create')
        return rng.chance(0.7) ? rng.pick([0, 1, null, '1', 1.5]) : undefined;
      if (path[0] === 'Healthcheck' && ['Interval', 'Timeout', 'StartPeriod', 'StartInterval'].includes(last))
        return rng.pick([0, -1, 1, 999_999, 1.5, 2 ** 63, 30e9, 60e9, 'x', null]);
      if (last === 'Privileged') return rng.chance(0.8) ? rng.pick([false, null]) : rng.pick(['true', 1]);
      if (['NetworkMode', 'PidMode', 'IpcMode', 'UTSMode', 'UsernsMode', 'CgroupnsMode'].includes(last))
        return rng.chance(0.5)
          ? undefined
          : rng.pick([
              '',
              'bridge',
              'none',
              'default',
              'private',
              'shareable',
              'container:fz-running',
              'container:fz-missing',
              'container:',
              'x',
              7,
            ]);
      if (last === 'Binds')
        return rng.chance(0.5)
          ? undefined
          : Array.from({ length: rng.int(0, 3) }, () =>
              rng.pick([
                'fz-vol:/data',
                '/anon',
                'fz-vol:/data:ro',
                'x:y',
                'fz-vol:/data:rw,z',
                'bad name:/x',
                ':/x',
                'fz-vol:relative',
                'fz-vol:/data:xx',
                'a:b:c:d',
                'fz-vol2:/d:nocopy',
              ]),
            );
      if (name === 'HostConfig.NetworkMode' || name === 'NetworkMode') return undefined;
      return undefined;
    };
  }

  private schemaBody(rng: Rng, fields: Fields, kind: BodyKind, opts: Partial<GenOptions> = {}): Buffer {
    const clean = this.clean;
    const value = genStruct(rng, fields, [], {
      density: clean ? 0.015 : 0.06,
      wrongRate: clean ? 0 : 0.15,
      hint: this.hint(kind),
      // a create names an image and a command most of the time, so that some get made and run
      force: (path, r) =>
        path.length === 1 &&
        ((kind === 'create' && (path[0] === 'Image' ? r.chance(0.9) : path[0] === 'Cmd' && r.chance(0.5))) ||
          (kind === 'exec' && path[0] === 'Cmd' && r.chance(0.8))),
      ...opts,
      ...(clean ? { density: opts.density ? opts.density / 2 : 0.015 } : {}),
    });
    return clean ? Buffer.from(JSON.stringify(value)) : jsonBytes(rng, value);
  }

  /** A body of the kind, drawn again while it is unsafe (safety.ts), else a plain safe one. */
  private body(rng: Rng, kind: BodyKind, version: string, index: number): Buffer {
    const draw = (): Buffer => {
      switch (kind) {
        case 'create':
          return this.schemaBody(rng, wrapperFields, kind);
        case 'update':
          return this.schemaBody(rng, updateConfigFields, kind, { density: 0.08 });
        case 'commit':
          return rng.chance(0.3) ? Buffer.alloc(0) : this.schemaBody(rng, wrapperFields, kind);
        case 'exec':
          return this.schemaBody(rng, execConfigFields, kind, { density: 0.3 });
        case 'execStart':
          return this.schemaBody(rng, execStartFields, kind, { density: 0.5 });
        case 'volume':
          return this.schemaBody(rng, volumeCreateFields, kind, {
            density: 0.5,
            force: (path) => path[0] === 'Name',
            hint: (path, r) => {
              if (path[0] === 'Name') return r.chance(0.6) ? `fz-v${index}` : undefined;
              if (path[0] === 'DriverOpts')
                return r.pick<Record<string, string> | undefined>([
                  {},
                  { size: '1m' },
                  { size: '0' },
                  { size: 'abc' },
                  { size: '1.2.3' },
                  { size: '' },
                  { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' },
                  { type: 'tmpfs', device: 'tmpfs', o: 'size=x,mode=999' },
                  { type: 'tmpfs' },
                  { o: 'size=1m' },
                  { foo: 'bar' },
                  JSON.parse('{"constructor":"x","__proto__":"y"}') as Record<string, string>,
                  undefined,
                ]);
              return undefined;
            },
          });
        case 'json':
          return jsonBytes(
            rng,
            rng.chance(0.5) ? { Name: anyString(rng, 30), Container: 'fz-running' } : anyJson(rng),
          );
        case 'start':
          return rng.pick([
            Buffer.alloc(0),
            Buffer.from('{}'),
            Buffer.from('null'),
            Buffer.from('{"x":1}'),
            jsonBytes(rng, anyJson(rng)),
          ]);
        case 'auth': {
          const body: Record<string, unknown> = rng.chance(0.7)
            ? { username: anyString(rng, 20), password: anyString(rng, 20) }
            : (anyJson(rng) as Record<string, unknown>);
          if (typeof body !== 'object' || body === null || Array.isArray(body)) return jsonBytes(rng, body);
          if (rng.chance(0.3)) body.identitytoken = anyString(rng, 40);
          body.serveraddress = rng.pick(LOGIN_SERVERS);
          return jsonBytes(rng, body);
        }
        case 'import':
          return fuzzTar(rng);
        case 'build':
          return rng.chance(0.75) ? buildContextTar(rng) : fuzzTar(rng);
        case 'archive':
          return rng.chance(0.7) ? fuzzTar(rng) : rng.chance(0.5) ? smallTar(rng) : rng.bytes(rng.size(600));
      }
    };
    const problemOf = (b: Buffer): string | undefined => {
      if (kind === 'create') return createBodyProblem(b, version);
      if (kind === 'exec') return execBodyProblem(b);
      if (kind === 'update') return updateBodyProblem(b);
      if (kind === 'volume') return volumeBodyProblem(b);
      return undefined;
    };
    for (let i = 0; i < 8; i++) {
      const b = draw();
      const why = problemOf(b);
      if (!why) return b;
      const key = `unsafe ${kind} body (${why.split(' (')[0]})`;
      this.avoided.set(key, (this.avoided.get(key) ?? 0) + 1);
    }
    return Buffer.from(kind === 'create' ? '{"Image":"busybox","Cmd":["true"]}' : '{}');
  }
}
