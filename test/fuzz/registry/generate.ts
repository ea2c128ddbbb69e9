import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { matchRoute, type RouteName } from '../../../src/registry/routes.js';
import type { ExchangeResult } from '../lib/exchange.js';
import { anyJson, jsonBytes } from '../lib/json-gen.js';
import type { ParsedResponse } from '../lib/response-parser.js';
import { header } from '../lib/response-parser.js';
import type { Rng } from '../lib/rng.js';
import type { Fuzzer } from '../lib/runner.js';
import { anyNumber, anyString, badSegment, numberText, pct, queryValue, word } from '../lib/values.js';
import {
  otherMethod,
  type RequestSpec,
  serialize,
  targetBreaksRequestLine,
  type WireRequest,
} from '../lib/wire.js';
import { AUTH, type RegistryWorld } from './world.js';

/**
 * Registry requests: every route of src/registry/routes.ts (the template of each RouteName, the
 * methods its table serves read from matchRoute), repository names, references, digests and
 * upload IDs drawn from the fixtures or mutated, the query parameters the handlers read, headers
 * (auth, Content-Range, Content-Type, Range...), manifests mutated from valid ones and blob data,
 * then framing and headers mutated (lib/wire.ts).
 */

/** A path template per route; the type makes a route added to routes.ts fail to compile here. */
export const REGISTRY_TEMPLATES: Record<RouteName, string> = {
  base: '/v2/',
  catalog: '/v2/_catalog',
  manifest: '/v2/{repo}/manifests/{ref}',
  blob: '/v2/{repo}/blobs/{digest}',
  uploads: '/v2/{repo}/blobs/uploads/',
  upload: '/v2/{repo}/blobs/uploads/{uuid}',
  tags: '/v2/{repo}/tags/list',
  referrers: '/v2/{repo}/referrers/{digest}',
};

export interface RegistryRoute {
  name: RouteName;
  template: string;
  methods: string[];
}

/** The routes with the methods the registry's table serves for each (checked against matchRoute). */
export function registryRoutes(): RegistryRoute[] {
  const sample = { repo: 'fz/one', ref: 'v1', digest: `sha256:${'a'.repeat(64)}`, uuid: 'u' };
  return (Object.entries(REGISTRY_TEMPLATES) as Array<[RouteName, string]>).map(([name, template]) => {
    const path = template.replace(/\{(\w+)\}/g, (_, k: keyof typeof sample) => sample[k]);
    const route = matchRoute(path);
    if (route?.name !== name)
      throw new Error(`${template} is not the ${name} route of src/registry/routes.ts`);
    return { name, template, methods: Object.keys(route.methods) };
  });
}

/** The query parameters the registry's handlers read (from their source). */
export function registryQueryParams(): string[] {
  const dir = resolve(import.meta.dirname, '../../../src/registry/handlers');
  const names = new Set<string>();
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.ts'))) {
    for (const m of readFileSync(join(dir, f), 'utf8').matchAll(/query\.(?:get|getAll|has)\('([^']+)'\)/g))
      names.add(m[1] as string);
  }
  return [...names].sort();
}

const MEDIA_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v1+prettyjws',
  'application/json',
  'text/plain',
  'application/vnd.oci.image.manifest.v1+json; charset=utf-8',
  '',
  'x/y',
];

const BAD_REPOS = [
  'UPPER/x',
  'a/../b',
  'a//b',
  '-a',
  'a.',
  'a'.repeat(256),
  '%2e%2e/x',
  'fz/one/blobs/x',
  'x/manifests/y',
  'x/tags/list',
  '_catalog',
  'a%2Fb',
  'a b',
  '%00',
];

/** The routes that write get more of the run. */
const ROUTE_WEIGHT: Partial<Record<RouteName, number>> = { manifest: 3, upload: 3, uploads: 2, blob: 2 };

function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export class RegistryFuzzer implements Fuzzer {
  readonly avoided = new Map<string, number>();
  private readonly meta = new WeakMap<WireRequest, { route?: RegistryRoute }>();
  private readonly params = registryQueryParams();
  private clean = false;

  constructor(
    private readonly routes: RegistryRoute[],
    private readonly world: RegistryWorld,
  ) {}

  maintain(index: number): Promise<void> {
    return this.world.maintain(index);
  }

  /** 503 only as the registry's UNAVAILABLE error; nothing else at 5xx. */
  deliberate = (res: ParsedResponse): boolean =>
    res.status === 503 && /"UNAVAILABLE"/.test(res.body.toString('utf8'));

  observe(req: WireRequest, result: ExchangeResult): void {
    const m = this.meta.get(req);
    const res = result.responses.find((r) => r.status >= 200 && r.complete);
    if (!m?.route || !res) return;
    const location = header(res, 'location');
    if (res.status === 202 && location) {
      const id = /\/blobs\/uploads\/([^/?]+)/.exec(location)?.[1];
      if (id) this.world.learnUpload(id);
    }
    const digest = header(res, 'docker-content-digest');
    if (res.status === 201 && digest) this.world.learnDigest(digest);
  }

  generate(rng: Rng, index: number): WireRequest {
    if (rng.chance(0.05)) return this.randomPath(rng);
    this.clean = rng.chance(0.25);
    const route = rng.weighted(this.routes.map((r) => [r, ROUTE_WEIGHT[r.name] ?? 1] as const));
    const method = this.clean || rng.chance(0.9) ? rng.pick(route.methods) : otherMethod(rng);
    const path = route.template.replace(/\{(\w+)\}/g, (_, k: string) => this.param(rng, k));
    const headers: Array<[string, string]> = [['User-Agent', 'berth-fuzz']];
    // most requests are the logged-in user's; the others no, bad or broken credentials
    if (this.clean || rng.chance(0.85)) headers.push(['Authorization', AUTH]);
    else {
      const bad = rng.pick([
        undefined,
        'Basic Zno6d3Jvbmc=',
        'Basic !!!',
        'Basic ',
        'Bearer x.y.z',
        `Basic ${Buffer.from('fz').toString('base64')}`,
        `Basic ${Buffer.from(`${'a'.repeat(5000)}:x`).toString('base64')}`,
        'Digest x',
        AUTH.toLowerCase(),
      ]);
      if (bad !== undefined) headers.push(['Authorization', bad]);
    }
    const query: string[] = [];
    let body: Buffer | undefined;
    if (route.name === 'manifest' && (method === 'PUT' || rng.chance(0.05))) {
      body = this.manifestBody(rng, index);
      headers.push(['Content-Type', rng.chance(0.8) ? this.mediaTypeOf(body) : rng.pick(MEDIA_TYPES)]);
    } else if (
      (route.name === 'upload' || route.name === 'uploads') &&
      method !== 'GET' &&
      method !== 'DELETE'
    ) {
      body = this.blobData(rng);
      if (rng.chance(0.5)) {
        query.push(`digest=${pct(rng.chance(0.7) ? sha256(body) : this.digest(rng))}`);
      }
      if (method === 'PATCH' && rng.chance(0.6))
        headers.push(['Content-Range', this.contentRange(rng, body.length)]);
      headers.push(['Content-Type', rng.pick(['application/octet-stream', 'text/plain', ''])]);
      if (route.name === 'uploads' && rng.chance(0.2)) {
        query.push(`mount=${pct(this.digest(rng))}`, `from=${pct(this.repo(rng))}`);
        body = undefined;
      }
    } else if (!this.clean && rng.chance(0.04)) {
      body = jsonBytes(rng, anyJson(rng));
    }
    if (route.name === 'manifest' && (method === 'GET' || method === 'HEAD') && rng.chance(0.5))
      headers.push(['Accept', rng.pick([...MEDIA_TYPES, '*/*', MEDIA_TYPES.join(', ')])]);
    if (route.name === 'blob' && method === 'GET' && rng.chance(0.3))
      headers.push([
        'Range',
        rng.pick([
          'bytes=0-1',
          'bytes=5-',
          'bytes=-3',
          'bytes=9-1',
          'bytes=0-99999999999999999999',
          'bytes=x',
          'items=0-1',
          'bytes=0-0,2-3',
        ]),
      ]);
    if (route.name === 'manifest' && rng.chance(0.1))
      headers.push(['If-None-Match', rng.pick(['*', '"x"', `"${this.digest(rng)}"`, ''])]);
    if (!this.clean) {
      for (const name of this.params)
        if (rng.chance(0.08)) query.push(`${name}=${this.queryValue(rng, name)}`);
      if (rng.chance(0.05)) query.push(`${word(rng)}=${queryValue(rng)}`);
    } else if (route.name === 'tags' || route.name === 'catalog') {
      if (rng.chance(0.5)) query.push(`n=${rng.int(0, 5)}`);
    }
    let target = query.length ? `${path}?${query.join('&')}` : path;
    if (!this.clean && rng.chance(0.03)) target = `http://127.0.0.1${target}`;
    const spec: RequestSpec = { method, target, headers, body };
    const req = this.finish(rng, spec, `${method} ${route.template}`);
    this.meta.set(req, { route });
    return req;
  }

  private finish(rng: Rng, spec: RequestSpec, label: string): WireRequest {
    const wire = serialize(rng, spec, { host: '127.0.0.1', mutateRate: this.clean ? 0 : 0.15 });
    let data = wire.data;
    const methods = [spec.method];
    if (!this.clean && rng.chance(0.03) && !wire.halfClose) {
      data = Buffer.concat([
        data,
        Buffer.from(`GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\n\r\n`),
      ]);
      methods.push('GET');
    }
    return {
      data,
      methods,
      halfClose: wire.halfClose,
      mayClose: wire.mayClose || targetBreaksRequestLine(spec.target) || !/^[A-Z]+$/.test(spec.method),
      // a blob answer may be large; its head is enough
      streaming: /\/blobs\/[^/]+$/.test(label) && spec.method === 'GET',
      mayBlock: false,
      label: `${label}${wire.mutated.length ? ` [${wire.mutated.join(', ')}]` : ''}`,
    };
  }

  private randomPath(rng: Rng): WireRequest {
    this.clean = false;
    const segments = Array.from({ length: rng.int(0, 6) }, () =>
      rng.chance(0.5) ? word(rng) : badSegment(rng),
    );
    let target = `/${rng.chance(0.6) ? 'v2/' : ''}${segments.join('/')}`;
    if (rng.chance(0.2))
      target = rng.pick([
        '*',
        'http://127.0.0.1/v2/',
        '//v2/',
        '/v2',
        '/V2/',
        '/v2/%',
        '/v2/./_catalog',
        '',
        `/v2/${'a/'.repeat(5000)}`,
      ]);
    const spec: RequestSpec = {
      method: otherMethod(rng),
      target,
      headers: rng.chance(0.8) ? [['Authorization', AUTH]] : [],
      body: rng.chance(0.2) ? jsonBytes(rng, anyJson(rng)) : undefined,
    };
    return this.finish(rng, spec, `${spec.method} (random path)`);
  }

  private repo(rng: Rng): string {
    if (this.clean || rng.chance(0.75))
      return rng.pick([...this.world.repos, 'fz/missing', 'fz/new', 'library/busybox']);
    return rng.chance(0.5) ? rng.pick(BAD_REPOS) : badSegment(rng);
  }

  private digest(rng: Rng): string {
    const known = [...this.world.digests, ...this.world.learnedDigests];
    if (this.clean || rng.chance(0.6)) return rng.pick(known.length ? known : [`sha256:${'0'.repeat(64)}`]);
    return rng.pick([
      `sha256:${'0'.repeat(64)}`,
      `sha256:${'A'.repeat(64)}`,
      'sha256:abc',
      `sha512:${'0'.repeat(128)}`,
      `sha384:${'0'.repeat(96)}`,
      `md5:${'0'.repeat(32)}`,
      `sha256:${'0'.repeat(65)}`,
      'sha256',
      ':',
      `SHA256:${'0'.repeat(64)}`,
      `sha256:${'g'.repeat(64)}`,
      `${'0'.repeat(64)}`,
      badSegment(rng),
    ]);
  }

  private param(rng: Rng, key: string): string {
    switch (key) {
      case 'repo':
        return this.repo(rng);
      case 'ref':
        return rng.chance(0.5)
          ? this.digest(rng)
          : this.clean || rng.chance(0.6)
            ? rng.pick([...this.world.tags, 'missing', 'v2'])
            : rng.pick(['x'.repeat(129), '-tag', '.tag', 'tag%20x', 'ta:g', '%00', badSegment(rng)]);
      case 'digest':
        return this.digest(rng);
      case 'uuid': {
        const pool = [...this.world.uploads, ...this.world.learnedUploads];
        if ((this.clean || rng.chance(0.7)) && pool.length) return rng.pick(pool);
        return rng.pick(['x', '00000000-0000-0000-0000-000000000000', '..', badSegment(rng)]);
      }
      default:
        return 'x';
    }
  }

  private queryValue(rng: Rng, name: string): string {
    switch (name) {
      case 'n':
        return pct(numberText(rng));
      case 'last':
        return pct(rng.pick(['v1', 'fz/one', '', 'zzz', anyString(rng, 20)]));
      case 'digest':
      case 'mount':
        return pct(this.digest(rng));
      case 'from':
        return pct(this.repo(rng));
      default:
        return queryValue(rng);
    }
  }

  private contentRange(rng: Rng, length: number): string {
    return rng.pick([
      `0-${Math.max(0, length - 1)}`,
      `bytes 0-${Math.max(0, length - 1)}/*`,
      `${length}-${length * 2}`,
      '5-1',
      '-1-3',
      '0-99999999999999999999',
      'x-y',
      '',
      '0-',
      `${anyNumber(rng)}-${anyNumber(rng)}`,
    ]);
  }

  private blobData(rng: Rng): Buffer {
    const r = rng.float();
    if (r < 0.6) return Buffer.from(`blob ${rng.int(0, 1000)}`);
    if (r < 0.95) return rng.bytes(rng.size(64 * 1024));
    return rng.bytes(rng.int(1, 3) * 1024 * 1024);
  }

  private mediaTypeOf(body: Buffer): string {
    try {
      const v = JSON.parse(body.toString('utf8')) as { mediaType?: unknown };
      if (typeof v?.mediaType === 'string') return v.mediaType;
    } catch {
      // not JSON
    }
    return MEDIA_TYPES[0] as string;
  }

  /** A manifest: a valid one of the fixtures' blobs, mutated field by field, or not one at all. */
  private manifestBody(rng: Rng, index: number): Buffer {
    const digests = [...this.world.digests, ...this.world.learnedDigests];
    const d = () => (rng.chance(0.8) && digests.length ? rng.pick(digests) : this.digest(rng));
    const desc = (mediaType: string) => ({
      mediaType,
      digest: d(),
      size: rng.chance(0.8) ? rng.int(0, 200) : anyNumber(rng),
    });
    const kind = rng.int(0, 4);
    let m: Record<string, unknown>;
    if (kind === 0 || kind === 2) {
      m = {
        schemaVersion: 2,
        mediaType: kind === 0 ? MEDIA_TYPES[0] : MEDIA_TYPES[2],
        config: desc(
          kind === 0
            ? 'application/vnd.oci.image.config.v1+json'
            : 'application/vnd.docker.container.image.v1+json',
        ),
        layers: Array.from({ length: rng.int(0, 3) }, () =>
          desc('application/vnd.oci.image.layer.v1.tar+gzip'),
        ),
      };
      if (rng.chance(0.2)) m.subject = desc(MEDIA_TYPES[0] as string);
      if (rng.chance(0.2)) m.artifactType = rng.pick(['application/x-fz', '', 1]);
      if (rng.chance(0.2))
        m.annotations = rng.pick([{ a: 'b' }, { a: 1 }, [], null, { [`k${index}`]: 'v'.repeat(1000) }]);
    } else if (kind === 1 || kind === 3) {
      m = {
        schemaVersion: 2,
        mediaType: kind === 1 ? MEDIA_TYPES[1] : MEDIA_TYPES[3],
        manifests: Array.from({ length: rng.int(0, 3) }, () => ({
          ...desc(MEDIA_TYPES[0] as string),
          platform: rng.pick([{ os: 'linux', architecture: 'amd64' }, {}, null, 'x', { os: 1 }]),
        })),
      };
    } else {
      m = {
        schemaVersion: 1,
        name: 'fz/one',
        tag: 'v1',
        architecture: 'amd64',
        fsLayers: [{ blobSum: d() }],
        history: [{ v1Compatibility: '{}' }],
        signatures: rng.chance(0.5)
          ? [{ header: { jwk: {}, alg: 'ES256' }, signature: 'x', protected: 'e30' }]
          : undefined,
      };
    }
    // break a field or two
    const keys = Object.keys(m);
    for (let i = this.clean ? 0 : rng.int(0, 2); i > 0; i--) {
      const k = rng.pick(keys);
      m[k] = rng.chance(0.3) ? undefined : anyJson(rng);
    }
    if (rng.chance(0.01)) {
      // large: near and past the 4 MiB limit
      m.annotations = {
        pad: 'x'.repeat(rng.pick([4 * 1024 * 1024 - 500, 4 * 1024 * 1024 + 10, 5 * 1024 * 1024])),
      };
    }
    return this.clean ? Buffer.from(JSON.stringify(m)) : jsonBytes(rng, m);
  }
}
