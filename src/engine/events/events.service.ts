import { EventEmitter } from 'node:events';

export type EventType =
  | 'container'
  | 'image'
  | 'volume'
  | 'network'
  | 'daemon'
  | 'plugin'
  | 'node'
  | 'service'
  | 'secret'
  | 'config'
  | 'builder';

/**
 * An event as the newest API writes it (moby's events.Message). Older API versions add the legacy
 * `status`, `id` and `from` keys (the API layer's work).
 */
export interface EngineEvent {
  Type: EventType;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  scope: 'local' | 'swarm';
  time: number;
  /** Exact (a Number would round nanoseconds since 1970); written as a JSON integer by eventJson. */
  timeNano: bigint;
}

/** One event as a JSON line's text, `timeNano` as the exact integer dockerd writes. */
export function eventJson(e: EngineEvent): string {
  // timeNano is the last key (reorder): write the rest, then it
  const { timeNano, ...rest } = e;
  const head = JSON.stringify(rest);
  return `${head.slice(0, -1)},"timeNano":${timeNano}}`;
}

export type EventListener = (event: EngineEvent) => void;

/** How many past events are kept for `since` queries (dockerd keeps 256). */
const HISTORY = 1024;

/**
 * The engine's event bus: services publish, GET /events subscribes. Keeps a bounded history for
 * `since`.
 */
export class EventsService {
  private readonly emitter = new EventEmitter();
  private readonly history: EngineEvent[] = [];
  private lastNano = 0n;

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  publish(
    type: EventType,
    action: string,
    id: string,
    attributes: Record<string, string> = {},
    scope: 'local' | 'swarm' = 'local',
  ): EngineEvent {
    const timeNano = this.nowNano();
    const event: EngineEvent = {
      Type: type,
      Action: action,
      Actor: { ID: id, Attributes: attributes },
      scope,
      time: Number(timeNano / 1_000_000_000n),
      timeNano,
    };
    return this.emit(event);
  }

  /** Past events with timeNano in [sinceNano, untilNano]. */
  past(sinceNano: bigint, untilNano?: bigint): EngineEvent[] {
    return this.history.filter(
      (e) => e.timeNano >= sinceNano && (untilNano === undefined || e.timeNano <= untilNano),
    );
  }

  subscribe(listener: EventListener): () => void {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }

  listenerCount(): number {
    return this.emitter.listenerCount('event');
  }

  private emit(event: EngineEvent): EngineEvent {
    this.history.push(event);
    if (this.history.length > HISTORY) this.history.splice(0, this.history.length - HISTORY);
    this.emitter.emit('event', event);
    return event;
  }

  /** Strictly increasing nanosecond timestamps, so `since`/`until` are exact. */
  private nowNano(): bigint {
    let now = BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
    if (now <= this.lastNano) now = this.lastNano + 1n;
    this.lastNano = now;
    return now;
  }
}
