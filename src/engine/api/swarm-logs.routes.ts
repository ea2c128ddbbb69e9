import { invalidParameter } from '../../common/errors.js';
import { onceAny } from '../../common/once-any.js';
import { parseBool } from '../../http/query.js';
import { frame } from '../../http/stream.js';
import type { SwarmLogStream, SwarmLogsQuery } from '../swarm/logs/swarm-logs.js';
import type { ApiContext, ApiRouter } from './context.js';
import { parseTimestamp } from './events.routes.js';
import { streamType } from './hijack.js';
import { versioned } from './swarm.routes.js';

/** What the logs routes need (swarm/logs/swarm-logs.ts). */
export interface SwarmLogsBackend {
  /** Throws what a node that is not a manager answers (before the query is looked at, as dockerd). */
  ready(): Promise<void>;
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
        await backend.ready();
        stream = await open(ctx.params.id ?? '', logsQuery(ctx, ac.signal));
      } catch (err) {
        ac.abort();
        throw versioned(ctx, err);
      }
      ctx.res.statusCode = 200;
      ctx.res.setHeader('Content-Type', streamType(ctx, stream.tty));
      ctx.res.flushHeaders();
      for await (const batch of stream.batches) {
        if (ctx.res.destroyed) break;
        // as dockerd's WriteLogStream: stdout 1, stderr 2, an error on the system stream 3 (raw for a TTY)
        const data = Buffer.concat(
          batch.map((c) =>
            stream.tty ? c.data : frame(c.stream === 'stdout' ? 1 : c.stream === 'stderr' ? 2 : 3, c.data),
          ),
        );
        if (!ctx.res.write(data) && !ctx.res.destroyed) await onceAny(ctx.res, ['drain', 'close', 'error']);
      }
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
