import { invalidParameter } from '../../common/errors.js';
import type { Filters } from '../../common/filters.js';
import { goParseBool, parseBoolError } from '../../common/go-strconv.js';
import { readJson } from '../../http/body.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { Service, ServiceSpec } from '../swarm/services/service.types.js';
import type { UpdateOptions } from '../swarm/services/services.service.js';
import type { ApiContext, ApiRouter } from './context.js';
import { decodeServiceSpec } from './schema/services.schema.js';
import { serviceGates, specForVersion } from './services.versions.js';
import { swarmRoute as route } from './swarm.routes.js';
import { versionAtLeast } from './versions.js';

/** What the routes need of the services backend (swarm/services/services.service.ts). */
export interface ServicesBackend {
  list(filters: Filters, withStatus: boolean): Promise<Service[]>;
  inspect(ref: string, insertDefaults: boolean): Promise<Service>;
  create(spec: ServiceSpec, registryAuth?: string): Promise<{ ID: string; Warnings: string[] | null }>;
  update(ref: string, version: number, spec: ServiceSpec, opts: UpdateOptions): Promise<void>;
  remove(ref: string): Promise<void>;
}

/** A service as the request's API version shows it. */
function forVersion(ctx: ApiContext, s: Service): Service {
  const out: Service = { ...s, Spec: specForVersion(s.Spec, ctx.version) };
  if (s.PreviousSpec) out.PreviousSpec = specForVersion(s.PreviousSpec, ctx.version);
  return out;
}

/** A boolean query parameter read with strconv.ParseBool (absent or empty: false), or 400 in dockerd's words. */
function boolParam(ctx: ApiContext, name: string): boolean {
  const v = ctx.query.get(name);
  if (v === null || v === '') return false;
  const b = goParseBool(v);
  if (b === undefined) throw invalidParameter(`invalid value for ${name}: ${v}: ${parseBoolError(v)}`);
  return b;
}

function registryAuth(ctx: ApiContext): string | undefined {
  const h = ctx.req.headers['x-registry-auth'];
  return typeof h === 'string' && h !== '' ? h : undefined;
}

/** /services (moby's swarm router); their logs: swarm-logs.routes.ts. */
export function registerServiceRoutes(router: ApiRouter, backend: ServicesBackend): void {
  router.get(
    '/services',
    route(async (ctx) => {
      const status = versionAtLeast(ctx.version, serviceGates.serviceStatus) && boolParam(ctx, 'status');
      const list = await backend.list(parseFilters(ctx.query.get('filters')), status);
      sendJson(
        ctx.res,
        200,
        list.map((s) => forVersion(ctx, s)),
      );
    }),
  );
  router.post(
    '/services/create',
    route(async (ctx) => {
      const spec = specForVersion(decodeServiceSpec(await readJson(ctx.req)), ctx.version);
      const res = await backend.create(spec, registryAuth(ctx));
      sendJson(ctx.res, 201, res.Warnings && res.Warnings.length > 0 ? res : { ID: res.ID });
    }),
  );
  router.get(
    '/services/{id}',
    route(async (ctx) => {
      const insertDefaults = boolParam(ctx, 'insertDefaults');
      sendJson(ctx.res, 200, forVersion(ctx, await backend.inspect(ctx.params.id ?? '', insertDefaults)));
    }),
  );
  router.delete(
    '/services/{id}',
    route(async (ctx) => {
      await backend.remove(ctx.params.id ?? '');
      ctx.res.writeHead(200).end();
    }),
  );
  router.post(
    '/services/{id}/update',
    route(async (ctx) => {
      const raw = ctx.query.get('version') ?? '';
      if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
        throw invalidParameter(
          `invalid service version '${raw}': strconv.ParseUint: parsing ${JSON.stringify(raw)}: invalid syntax`,
        );
      }
      const from = ctx.query.get('registryAuthFrom') ?? '';
      if (from !== '' && from !== 'spec' && from !== 'previous-spec') {
        throw invalidParameter('unsupported registryAuthFrom value');
      }
      const rollback = ctx.query.get('rollback') ?? '';
      if (rollback !== '' && rollback !== 'previous')
        throw invalidParameter(`unrecognized rollback option ${rollback}`);
      const spec = specForVersion(decodeServiceSpec(await readJson(ctx.req)), ctx.version);
      await backend.update(ctx.params.id ?? '', Number(raw), spec, {
        rollback: rollback === 'previous',
        registryAuth: registryAuth(ctx),
      });
      sendJson(ctx.res, 200, { Warnings: null });
    }),
  );
}
