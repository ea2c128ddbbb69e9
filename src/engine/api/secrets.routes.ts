import { invalidParameter } from '../../common/errors.js';
import type { Filters } from '../../common/filters.js';
import { readJson } from '../../http/body.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { ObjectKind, ObjectSpecInput, SwarmObject } from '../swarm/secrets/secrets.types.js';
import type { ApiContext, ApiRouter } from './context.js';
import { decodeObjectSpec } from './schema/secrets.schema.js';
import { swarmRoute as route } from './swarm.routes.js';
import { gates, versionBefore } from './versions.js';

/** What the routes need of a secret or config backend (swarm/secrets/object.service.ts). */
export interface ObjectBackend {
  readonly kind: ObjectKind;
  list(filters: Filters): Promise<SwarmObject[]>;
  inspect(ref: string): Promise<SwarmObject>;
  create(spec: ObjectSpecInput): Promise<string>;
  update(ref: string, version: number, spec: ObjectSpecInput): Promise<void>;
  remove(ref: string): Promise<void>;
}

/** Templating is a 1.37 field: older clients do not see it. */
function forVersion(ctx: ApiContext, o: SwarmObject): SwarmObject {
  if (!versionBefore(ctx.version, gates.swarmTemplating) || !o.Spec.Templating) return o;
  const { Templating: _, ...spec } = o.Spec;
  return { ...o, Spec: spec };
}

/** /secrets (moby's swarm router). */
export function registerSecretRoutes(router: ApiRouter, backend: ObjectBackend): void {
  objectRoutes(router, 'secret', backend);
}

/** /configs (moby's swarm router). */
export function registerConfigRoutes(router: ApiRouter, backend: ObjectBackend): void {
  objectRoutes(router, 'config', backend);
}

/** The routes of one kind of swarm object: list, create, inspect, remove, update. */
function objectRoutes(router: ApiRouter, kind: ObjectKind, backend: ObjectBackend): void {
  const base = `/${kind}s`;
  router.get(
    base,
    route(async (ctx) => {
      const list = await backend.list(parseFilters(ctx.query.get('filters')));
      sendJson(
        ctx.res,
        200,
        list.map((o) => forVersion(ctx, o)),
      );
    }),
  );
  router.post(
    `${base}/create`,
    route(async (ctx) => {
      const spec = decodeObjectSpec(kind, await readJson(ctx.req));
      if (spec.Templating && versionBefore(ctx.version, gates.swarmTemplating)) {
        throw invalidParameter(
          `${kind} templating is not supported on the specified API version: ${ctx.version}`,
        );
      }
      sendJson(ctx.res, 201, { ID: await backend.create(spec) });
    }),
  );
  router.get(
    `${base}/{id}`,
    route(async (ctx) => {
      sendJson(ctx.res, 200, forVersion(ctx, await backend.inspect(ctx.params.id ?? '')));
    }),
  );
  router.delete(
    `${base}/{id}`,
    route(async (ctx) => {
      await backend.remove(ctx.params.id ?? '');
      ctx.res.writeHead(204).end();
    }),
  );
  router.post(
    `${base}/{id}/update`,
    route(async (ctx) => {
      const spec = decodeObjectSpec(kind, await readJson(ctx.req));
      const raw = ctx.query.get('version') ?? '';
      if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
        throw invalidParameter(`invalid ${kind} version`);
      }
      await backend.update(ctx.params.id ?? '', Number(raw), spec);
      ctx.res.writeHead(200).end();
    }),
  );
}
