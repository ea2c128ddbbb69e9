import { invalidParameter } from '../../common/errors.js';
import { readJson } from '../../http/body.js';
import { parseBool } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { ContainerService } from '../containers/service.types.js';
import type { ApiRouter } from './context.js';
import { decodeCreateJson } from './schema/containers.schema.js';

export type CommitBackend = Pick<ContainerService, 'commit'>;

/**
 * POST /commit (docker commit), as dockerd's postCommit: `pause` true unless given (API ≥ 1.13,
 * older than the oldest berth serves), the body a container Config (typed as create's, an empty
 * body meaning the container's own), `changes` repeatable, answered 201 with the image ID.
 */
export function registerCommitRoutes(router: ApiRouter, containers: CommitBackend): void {
  router.post('/commit', async (ctx) => {
    const q = ctx.query;
    const body = await readJson(ctx.req);
    if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) {
      throw invalidParameter(
        `json: cannot unmarshal ${Array.isArray(body) ? 'array' : typeof body} into Go value of type runconfig.ContainerConfigWrapper`,
      );
    }
    const decoded = body ? decodeCreateJson(body as Record<string, unknown>) : {};
    const name = q.get('container') ?? '';
    if (name === '') throw invalidParameter('invalid name or ID supplied: ""');
    const pause = q.get('pause');
    const id = await containers.commit(name, {
      repo: q.get('repo') || undefined,
      tag: q.get('tag') || undefined,
      author: q.get('author') || undefined,
      comment: q.get('comment') || undefined,
      pause: pause === null || pause === '' ? true : parseBool(pause),
      ...(decoded.config ? { config: decoded.config } : {}),
      changes: q.getAll('changes'),
    });
    sendJson(ctx.res, 201, { Id: id });
  });
}
