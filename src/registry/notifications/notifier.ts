import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { hostname } from 'node:os';
import type { Logger } from '../../common/log.js';
import type { StorageDriver } from '../storage/driver.js';
import { type EndpointConfig, NotificationEndpoint, type PostEnvelope } from './endpoint.js';
import type { EventAction, EventRequest, EventTarget, RegistryEvent } from './events.js';

/** Where the endpoints' queues live in storage (outside the reference registry's tree). */
export const NOTIFICATIONS_DIR = '/berth/notifications';

/** A queue directory name for an endpoint name: safe characters kept, the rest hex-escaped. */
export function queueDirName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, (c) => `.${c.codePointAt(0)?.toString(16)}`);
}

/** The request an event describes, as the reference records it. */
export function eventRequest(req: IncomingMessage, id: string): EventRequest {
  const ua = req.headers['user-agent'];
  return {
    id,
    addr: `${req.socket?.remoteAddress ?? ''}:${req.socket?.remotePort ?? ''}`,
    host: req.headers.host ?? '',
    method: req.method ?? '',
    useragent: ua ?? '',
  };
}

/**
 * The registry's notifications (`notifications.endpoints`): every event goes to the queue of
 * each endpoint that wants it; each endpoint delivers its queue in order on its own, so a slow
 * or failing endpoint delays neither the others nor the registry's answers (an event costs the
 * request one small file write per endpoint).
 */
export class Notifier {
  readonly endpoints: NotificationEndpoint[];
  readonly instanceID = randomUUID();
  private sourceAddr = `${hostname()}:0`;
  private readonly requestIds = new WeakMap<IncomingMessage, string>();

  constructor(
    configs: EndpointConfig[],
    driver: StorageDriver,
    log: Logger,
    post?: PostEnvelope,
    /** Manifest events list the manifest's references (`notifications.events.includereferences`). */
    readonly includeReferences = false,
  ) {
    const names = new Set<string>();
    this.endpoints = configs.map((c) => {
      const dir = `${NOTIFICATIONS_DIR}/${queueDirName(c.name)}`;
      if (names.has(dir)) throw new Error(`two notification endpoints are named ${JSON.stringify(c.name)}`);
      names.add(dir);
      return new NotificationEndpoint(c, driver, dir, log.child('notifications'), post);
    });
  }

  /** Start the senders, with what earlier processes left queued. */
  async start(): Promise<void> {
    await Promise.all(this.endpoints.map((e) => e.start()));
  }

  /** The port the registry listens on (the events' `source.addr` is `hostname:port`). */
  setSourcePort(port: number): void {
    this.sourceAddr = `${hostname()}:${port}`;
  }

  async stop(): Promise<void> {
    await Promise.all(this.endpoints.map((e) => e.stop()));
  }

  /** Record an event of a request: queued on disk for every endpoint that wants it. */
  async publish(
    req: IncomingMessage,
    user: string | undefined,
    action: EventAction,
    target: EventTarget,
  ): Promise<void> {
    let requestId = this.requestIds.get(req);
    if (!requestId) {
      requestId = randomUUID();
      this.requestIds.set(req, requestId);
    }
    const event: RegistryEvent = {
      id: randomUUID(),
      timestamp: new Date().toISOString(),
      action,
      target,
      request: eventRequest(req, requestId),
      actor: user ? { name: user } : {},
      source: { addr: this.sourceAddr, instanceID: this.instanceID },
    };
    await Promise.all(this.endpoints.filter((e) => e.wants(event)).map((e) => e.enqueue(event)));
  }
}
