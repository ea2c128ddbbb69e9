import { invalidParameter } from '../../common/errors.js';
import { parseFilters } from '../../http/query.js';
import { eventFilter } from '../events/events.filter.js';
import type { EngineEvent, EventsService } from '../events/events.service.js';
import type { ApiRouter } from './context.js';

/**
 * Docker timestamps in query parameters: Unix seconds with optional fraction (`1700000000.5`,
 * `1700000000.000000001`), or RFC 3339. Returns Unix nanoseconds.
 */
export function parseTimestamp(value: string, name: string): bigint {
  const unix = /^(-?\d+)(?:\.(\d{1,9}))?$/.exec(value);
  if (unix) {
    const seconds = BigInt(unix[1] ?? '0');
    const frac = BigInt((unix[2] ?? '').padEnd(9, '0') || '0');
    return seconds * 1_000_000_000n + frac;
  }
  const ms = Date.parse(value);
  if (!Number.isNaN(ms)) return BigInt(ms) * 1_000_000n;
  throw invalidParameter(
    `invalid value for ${name}: ${JSON.stringify(value)}: not a Unix timestamp or RFC 3339 time`,
  );
}

export function registerEventRoutes(router: ApiRouter, events: EventsService): void {
  router.get('/events', async (ctx) => {
    const { query, res, req } = ctx;
    const since = query.get('since') ? parseTimestamp(query.get('since') ?? '', 'since') : undefined;
    const until = query.get('until') ? parseTimestamp(query.get('until') ?? '', 'until') : undefined;
    if (since !== undefined && until !== undefined && until < since) {
      throw invalidParameter('`since` time must be before `until` time');
    }
    const matches = eventFilter(parseFilters(query.get('filters')));
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json');
    res.flushHeaders();
    const write = (e: EngineEvent): void => {
      if (matches(e)) res.write(`${JSON.stringify(e)}\n`);
    };
    const nowNano = BigInt(Date.now()) * 1_000_000n;
    const buffered: EngineEvent[] = [];
    let replaying = true;
    // Subscribe before replaying history so that nothing published meanwhile is lost.
    const unsubscribe = events.subscribe((e) => {
      if (replaying) buffered.push(e);
      else if (until === undefined || BigInt(e.timeNano) <= until) write(e);
    });
    let lastReplayed = -1;
    if (since !== undefined) {
      for (const e of events.past(since, until)) {
        write(e);
        lastReplayed = e.timeNano;
      }
    }
    for (const e of buffered)
      if (e.timeNano > lastReplayed && (until === undefined || BigInt(e.timeNano) <= until)) write(e);
    replaying = false;
    await new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        if (timer) clearTimeout(timer);
        unsubscribe();
        resolve();
      };
      if (until !== undefined) {
        const waitMs = Number((until - nowNano) / 1_000_000n);
        if (waitMs <= 0) {
          finish();
          res.end();
          return;
        }
        timer = setTimeout(() => {
          finish();
          res.end();
        }, waitMs);
      }
      req.on('close', finish);
      res.on('close', finish);
    });
  });
}
