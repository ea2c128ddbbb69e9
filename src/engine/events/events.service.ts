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

/** An event exactly as GET /events writes it. */
export interface EngineEvent {
  status?: string;
  id?: string;
  from?: string;
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
 * `since`. Legacy fields (status, id, from) are filled for container and image events as dockerd
 * fills them.
 */
export class EventsService {
  private readonly emitter = new EventEmitter();
  private readonly history: EngineEvent[] = [];
  private lastNano = 0n;

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  publish(type: EventType, action: string, id: string, attributes: Record<string, string> = {}): EngineEvent {
    const timeNano = this.nowNano();
    const event: EngineEvent = {
      Type: type,
      Action: action,
      Actor: { ID: id, Attributes: attributes },
      scope: 'local',
      time: Number(timeNano / 1_000_000_000n),
      timeNano,
    };
    if (type === 'container' || type === 'image') {
      // dockerd leaves an empty id out (image prune has none)
      const withLegacy: EngineEvent = { status: action, ...(id ? { id } : {}), ...event };
      if (type === 'container' && attributes.image !== undefined) withLegacy.from = attributes.image;
      return this.emit(reorder(withLegacy));
    }
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

/** Key order as dockerd writes it: status, id, from, Type, Action, Actor, scope, time, timeNano. */
function reorder(e: EngineEvent): EngineEvent {
  const out: EngineEvent = {} as EngineEvent;
  if (e.status !== undefined) out.status = e.status;
  if (e.id !== undefined) out.id = e.id;
  if (e.from !== undefined) out.from = e.from;
  out.Type = e.Type;
  out.Action = e.Action;
  out.Actor = e.Actor;
  out.scope = e.scope;
  out.time = e.time;
  out.timeNano = e.timeNano;
  return out;
}
