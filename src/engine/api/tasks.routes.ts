import type { Filters } from '../../common/filters.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import { isAttachment, type Task } from '../swarm/tasks/task.types.js';
import { type ApiContext, type ApiRouter, atLeast } from './context.js';
import { specForVersion } from './services.versions.js';
import { swarmRoute as route } from './swarm.routes.js';

/** What the routes need of the tasks backend (swarm/tasks/tasks.service.ts). */
export interface TasksBackend {
  list(filters: Filters): Promise<Task[]>;
  inspect(ref: string): Promise<Task>;
}

/** A task's Spec (a TaskTemplate) without what the request's API version does not have. */
function forVersion(ctx: ApiContext, t: Task): Task {
  const spec = specForVersion({ TaskTemplate: t.Spec }, ctx.version).TaskTemplate ?? t.Spec;
  return spec === t.Spec ? t : { ...t, Spec: spec };
}

/** /tasks (moby's swarm router); task logs: swarm-logs.routes.ts. */
export function registerTaskRoutes(router: ApiRouter, backend: TasksBackend): void {
  router.get(
    '/tasks',
    route(async (ctx) => {
      const list = await backend.list(parseFilters(ctx.query.get('filters')));
      // containers' network-attachment tasks are listed from API 1.38 on (moby's router)
      const shown = atLeast(ctx, '1.38') ? list : list.filter((t) => !isAttachment(t));
      sendJson(
        ctx.res,
        200,
        shown.map((t) => forVersion(ctx, t)),
      );
    }),
  );
  router.get(
    '/tasks/{id}',
    route(async (ctx) => {
      sendJson(ctx.res, 200, forVersion(ctx, await backend.inspect(ctx.params.id ?? '')));
    }),
  );
}
