import type { EventsService } from '../../events/events.service.js';
import type { Container } from './container.js';

/** Container events (type `container`), with the container's labels, image and name as attributes. */
export class ContainerEvents {
  constructor(private readonly events: EventsService) {}

  emit(c: Container, action: string, extra: Record<string, string> = {}): void {
    this.events.publish('container', action, c.id, c.attributes(extra));
  }

  /** An event about containers in general (`prune`): no actor. */
  emitGlobal(action: string, attributes: Record<string, string>): void {
    this.events.publish('container', action, '', attributes);
  }
}
