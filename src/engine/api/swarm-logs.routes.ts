import { invalidParameter } from '../../common/errors.js';
import { parseBool } from '../../http/query.js';
import type { SwarmLogStream, SwarmLogsQuery } from '../swarm/logs/swarm-logs.js';
import type { ApiContext, ApiRouter } from './context.js';
import { parseTimestamp } from './events.routes.js';
import { streamType } from './hijack.js';
import { writeLogBatches } from './streams.routes.js';
import { versioned } from './swarm.routes.js';

/** What the logs routes need (swarm/logs/swarm-logs.ts). */
export interface SwarmLogsBackend {
  service(ref: string, q: SwarmLogsQuery): Promise<SwarmLogStream>;
  task(ref: string, q: SwarmLogsQuery): Promise<SwarmLogStream>;
}

/** The query of service and task logs, read as dockerd's swarm router reads it. */
function logsQuery(ctx: ApiContext, signal: AbortSignal): SwarmLogsQuery {
  const bool = (name: string) => parseBool(ctx.query.get(name), false);
  const stdout = bool('stdout');
  const stderr = bool('stderr');
  if (!stdout && !stderr) throw invalidParameter('Bad parameters: you must choose at least one stream');
  const sinceRaw = ctx.query.get('since');
  const since = sinceRaw && sinceRaw !== '0' ? parseTimestamp(sinceRaw, 'since') : undefined;
  const tailRaw = ctx.query.get('tail') ?? 'all';
  let tail: number | undefined;
  if (tailRaw !== 'all' && tailRaw !== '') {
    if (!/^[+-]?\d+$/.test(tailRaw)) {
      throw invalidParameter(
        `tail value must be a positive integer: strconv.Atoi: parsing ${JSON.stringify(tailRaw)}: invalid syntax`,
      );
    }
    const n = Number(tailRaw);
    tail = n >= 0 ? n : undefined;
  }
  return {
    stdout,
    stderr,
    since,
    tail,
    timestamps: bool('timestamps'),
    follow: bool('follow'),
    details: bool('details'),
    signal,
  };
}

/** `GET /services/{id}/logs` and `GET /tasks/{id}/logs`: multiplexed as `docker logs` (raw for TTY). */
export function registerSwarmLogRoutes(router: ApiRouter, backend: SwarmLogsBackend): void {
  const logs =
    (open: (ref: string, q: SwarmLogsQuery) => Promise<SwarmLogStream>) => async (ctx: ApiContext) => {
      const ac = new AbortController();
      ctx.res.on('close', () => ac.abort());
      let stream: SwarmLogStream;
      try {
        stream = await open(ctx.params.id ?? '', logsQuery(ctx, ac.signal));
      } catch (err) {
        ac.abort();
        throw versioned(ctx, err);
      }
      ctx.res.statusCode = 200;
      ctx.res.setHeader('Content-Type', streamType(ctx, stream.tty));
      ctx.res.flushHeaders();
      await writeLogBatches(ctx.res, stream.batches, stream.tty);
      if (!ctx.res.writableEnded) ctx.res.end();
    };
  router.get(
    '/services/{id}/logs',
    logs((ref, q) => backend.service(ref, q)),
  );
  router.get(
    '/tasks/{id}/logs',
    logs((ref, q) => backend.task(ref, q)),
  );
}
