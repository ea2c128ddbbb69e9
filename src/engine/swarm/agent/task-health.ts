import type { EventsService } from '../../events/events.service.js';

/** A container's health status as its `health_status: <status>` events tell it. */
export type HealthStatus = 'starting' | 'healthy' | 'unhealthy';

/**
 * The containers' health changes, as the agent follows its task containers' (swarmkit's
 * controller: a task with a health check is `running` only once healthy, and an unhealthy one is
 * shut down and fails). Returns the way to stop listening.
 */
export type HealthEvents = (containerId: string, listener: (status: HealthStatus) => void) => () => void;

const PREFIX = 'health_status: ';

/** HealthEvents from the engine's event bus (the health monitors publish there). */
export function healthEventsOf(events: Pick<EventsService, 'subscribe'>): HealthEvents {
  return (containerId, listener) =>
    events.subscribe((e) => {
      if (e.Type !== 'container' || e.Actor.ID !== containerId || !e.Action.startsWith(PREFIX)) return;
      const status = e.Action.slice(PREFIX.length);
      if (status === 'starting' || status === 'healthy' || status === 'unhealthy') listener(status);
    });
}
