import { type RequestContext, urlFor } from '../context.js';
import type { EventAction, EventTarget } from './events.js';
import { manifestReferences } from './references.js';

/**
 * Publish an event of this request when notifications are configured (a no-op otherwise).
 * `url` is made absolute as the request's Location headers are.
 */
export async function notify(
  ctx: RequestContext,
  action: EventAction,
  target: Omit<EventTarget, 'repository' | 'url' | 'references'> & {
    repository?: string;
    urlPath?: string;
    /** The manifest, when the event is about one (its references, when configured). */
    manifest?: Buffer;
  },
): Promise<void> {
  const notifier = ctx.state.notifier;
  if (!notifier) return;
  // The reference's field order.
  const full: EventTarget = {
    mediaType: target.mediaType,
    size: target.size,
    digest: target.digest,
    length: target.length,
    repository: target.repository ?? ctx.name,
    fromRepository: target.fromRepository,
    url: target.urlPath === undefined ? undefined : urlFor(ctx, target.urlPath),
    tag: target.tag,
    references:
      target.manifest && notifier.includeReferences ? manifestReferences(target.manifest) : undefined,
  };
  for (const key of Object.keys(full) as Array<keyof EventTarget>)
    if (full[key] === undefined) delete full[key];
  await notifier.publish(ctx.req, ctx.grant.user, action, full);
}
