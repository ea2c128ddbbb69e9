import type { EventsService } from '../events/events.service.js';

/** Image events as dockerd logs them: the image's labels ride along as attributes. */
export class ImageEvents {
  constructor(
    private readonly events: Pick<EventsService, 'publish'>,
    private readonly labelsOf: (id: string) => Record<string, string>,
  ) {}

  /**
   * `action` on image `id`; `name` is the image ID, or the new reference for `tag`. `labels`
   * defaults to the image's own (dockerd looks them up as it logs: none once the image is gone).
   */
  publish(action: string, id: string, name: string, labels = this.labelsOf(id)): void {
    this.events.publish('image', action, id, { ...labels, name });
  }

  /** The `prune` event: no image, the bytes reclaimed. */
  pruned(reclaimed: number): void {
    this.events.publish('image', 'prune', '', { reclaimed: String(reclaimed) });
  }
}
