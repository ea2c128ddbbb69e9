import type { Descriptor } from '../manifests/types.js';

/**
 * The notification event of the reference registry (distribution 2.8, notifications/event.go),
 * field for field: what it posts in an `application/vnd.docker.distribution.events.v1+json`
 * envelope, one event per envelope.
 */
export const EVENTS_MEDIA_TYPE = 'application/vnd.docker.distribution.events.v1+json';

export type EventAction = 'push' | 'pull' | 'mount' | 'delete';

export interface EventTarget {
  mediaType?: string;
  size?: number;
  digest?: string;
  length?: number;
  repository: string;
  /** A mount's source repository. */
  fromRepository?: string;
  url?: string;
  tag?: string;
  /** A manifest's references (`notifications.events.includereferences`). */
  references?: Descriptor[];
}

/** The request that caused the event. */
export interface EventRequest {
  id: string;
  /** The client's `address:port`. */
  addr: string;
  /** The Host the client asked for. */
  host: string;
  method: string;
  useragent: string;
}

export interface RegistryEvent {
  id: string;
  /** RFC 3339 time of the event. */
  timestamp: string;
  action: EventAction;
  target: EventTarget;
  request: EventRequest;
  /** The authenticated user (empty object for anonymous requests, as the reference). */
  actor: { name?: string };
  /** The registry that sent it: `hostname:port` and an id per process. */
  source: { addr: string; instanceID: string };
}

export interface EventEnvelope {
  events: RegistryEvent[];
}

/** The media type of a blob in events: blobs have no type of their own (as the reference). */
export const BLOB_MEDIA_TYPE = 'application/octet-stream';
