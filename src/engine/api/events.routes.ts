import { invalidParameter } from '../../common/errors.js';
import { type LongTimer, setLongTimeout } from '../../common/long-timer.js';
import { frameRecord } from '../../http/json-records.js';
import { parseFilters } from '../../http/query.js';
import { eventFilter } from '../events/events.filter.js';
import type { EngineEvent, EventsService } from '../events/events.service.js';
import type { ApiRouter } from './context.js';
import { eventRecord, eventShown, eventsContentType } from './events.versions.js';

/**
 * Docker timestamps in query parameters: Unix seconds with an optional fraction
 * (`1700000000.5`; digits past the ninth are dropped, as dockerd does), or RFC 3339 (the docker
 * CLI sends Unix seconds; RFC 3339 is accepted for people). Returns Unix nanoseconds.
 */
export function parseTimestamp(value: string, name: string): bigint {
  const unix = /^(-?\d+)(?:\.(\d+))?$/.exec(value);
  if (unix) {
    const seconds = BigInt(unix[1] ?? '0');
    const frac = BigInt((unix[2] ?? '').slice(0, 9).padEnd(9, '0'));
    return seconds * 1_000_000_000n + (seconds < 0n ? -frac : frac);
  }
  const ms = Date.parse(value);
  if (!Number.isNaN(ms) && /^\d{4}-\d\d-\d\dT/.test(value)) return BigInt(ms) * 1_000_000n;
  throw invalidParameter(
    `invalid value for ${name}: ${JSON.stringify(value)}: not a Unix timestamp or RFC 3339 time`,
  );
}

/** GET /events: the history and the stream. */
export type EventsBackend = Pick<EventsService, 'past' | 'subscribe'>;

export function registerEventRoutes(router: ApiRouter, events: EventsBackend): void {
  router.get('/events', async (ctx) => {
    const { query, res, req } = ctx;
    const sinceText = query.get('since') ?? '';
    const untilText = query.get('until') ?? '';
    const since = sinceText ? parseTimestamp(sinceText, 'since') : undefined;
    const until = untilText ? parseTimestamp(untilText, 'until') : undefined;
    if (since !== undefined && until !== undefined && until < since) {
      throw invalidParameter(`\`since\` time (${sinceText}) cannot be after \`until\` time (${untilText})`);
    }
    const matches = eventFilter(parseFilters(query.get('filters')));
    const contentType = eventsContentType(req.headersDistinct.accept, ctx.version);
    res.statusCode = 200;
    res.setHeader('Content-Type', contentType);
    res.flushHeaders();
    const write = (e: EngineEvent): void => {
      if (matches(e) && eventShown(e, ctx.version))
        res.write(frameRecord(contentType, eventRecord(e, ctx.version)));
    };
    const nowNano = BigInt(Date.now()) * 1_000_000n;
    const buffered: EngineEvent[] = [];
    let replaying = true;
    // Subscribe before replaying history so that nothing published meanwhile is lost.
    const unsubscribe = events.subscribe((e) => {
      if (replaying) buffered.push(e);
      else if (until === undefined || e.timeNano <= until) write(e);
    });
    // dockerd replays its history when either bound is given (until alone: all of it up to until)
    let lastReplayed = -1n;
    if (since !== undefined || until !== undefined) {
      for (const e of events.past(since ?? 0n, until !== undefined && until > 0n ? until : undefined)) {
        write(e);
        lastReplayed = e.timeNano;
      }
    }
    for (const e of buffered)
      if (e.timeNano > lastReplayed && (until === undefined || e.timeNano <= until)) write(e);
    replaying = false;
    await new Promise<void>((resolve) => {
      let timer: LongTimer | undefined;
      const finish = (): void => {
        timer?.clear();
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
        timer = setLongTimeout(() => {
          finish();
          res.end();
        }, waitMs);
      }
      req.on('close', finish);
      res.on('close', finish);
    });
  });
}
