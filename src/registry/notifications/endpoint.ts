import { setTimeout as delay } from 'node:timers/promises';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { isPathNotFound, type StorageDriver } from '../storage/driver.js';
import { EVENTS_MEDIA_TYPE, type EventEnvelope, type RegistryEvent } from './events.js';

/** One `notifications.endpoints` entry (distribution's EndpointConfig), typed. */
export interface EndpointConfig {
  name: string;
  url: string;
  /** Extra request headers (each may repeat). */
  headers: Record<string, string[]>;
  timeoutMs: number;
  /** Failures in a row after which the sender waits `backoffMs` before each retry. */
  threshold: number;
  backoffMs: number;
  /** Events whose target has one of these media types are not sent. */
  ignoredMediaTypes: string[];
  /** Events with one of these actions are not sent. */
  ignoredActions: string[];
}

/** How an endpoint posts an envelope: resolves with the HTTP status, rejects on a network failure. */
export type PostEnvelope = (
  url: string,
  headers: Headers,
  body: string,
  signal: AbortSignal,
) => Promise<number>;

export const postWithFetch: PostEnvelope = async (url, headers, body, signal) => {
  const res = await fetch(url, { method: 'POST', headers, body, signal, redirect: 'manual' });
  await res.arrayBuffer().catch(() => undefined);
  return res.status;
};

interface Entry {
  /** The file that holds the event until it is delivered. */
  path: string;
  event: RegistryEvent;
  /** Settles when the file is written (a failed write drops the event, logged). */
  written: Promise<boolean>;
}

/** Queue file names: a zero-padded sequence number, so that listing order is queue order. */
const SEQ_WIDTH = 16;
const FILE = /^(\d{16})\.json$/;

/**
 * One notification endpoint: a queue on disk (one file per event under `dir`, written before
 * the request is answered, removed once delivered) and a sender that posts the events in order,
 * one envelope each, retrying the head of the queue until the endpoint takes it (2xx or 3xx, as
 * the reference): at once below `threshold` failures in a row, after `backoffMs` from then on.
 * A restart (or a kill) resumes with what the files hold.
 */
export class NotificationEndpoint {
  private readonly entries: Entry[] = [];
  private nextSeq = 0;
  private failures = 0;
  private stopped = false;
  private readonly stopping = new AbortController();
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** Delivered events (tests and logs). */
  delivered = 0;

  constructor(
    readonly config: EndpointConfig,
    private readonly driver: StorageDriver,
    /** The queue's directory in storage. */
    readonly dir: string,
    private readonly log: Logger,
    private readonly post: PostEnvelope = postWithFetch,
  ) {}

  /** Load what an earlier process left in the queue, then start sending. */
  async start(): Promise<void> {
    let files: string[] = [];
    try {
      files = await this.driver.list(this.dir);
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    const queued = files
      .map((path) => ({ path, m: FILE.exec(path.slice(path.lastIndexOf('/') + 1)) }))
      .filter((f) => f.m)
      .sort((a, b) => (a.path < b.path ? -1 : 1));
    for (const { path, m } of queued) {
      this.nextSeq = Math.max(this.nextSeq, Number(m?.[1]) + 1);
      try {
        const event = JSON.parse((await this.driver.getContent(path)).toString('utf8')) as RegistryEvent;
        this.entries.push({ path, event, written: Promise.resolve(true) });
      } catch (err) {
        // A file cut short by a crash while it was written never held an acknowledged event.
        this.log.warn('dropping an unreadable queued notification', { path, error: errorMessage(err) });
        await this.driver.delete(path).catch(() => undefined);
      }
    }
    if (this.entries.length > 0)
      this.log.info('resuming queued notifications', {
        endpoint: this.config.name,
        count: this.entries.length,
      });
    this.loop = this.run();
  }

  /** Whether this endpoint wants the event (ignore.mediatypes, ignore.actions). */
  wants(event: RegistryEvent): boolean {
    if (this.config.ignoredActions.includes(event.action)) return false;
    const type = event.target.mediaType;
    return type === undefined || !this.config.ignoredMediaTypes.includes(type);
  }

  /** Queue an event: resolves once it is on disk. */
  enqueue(event: RegistryEvent): Promise<boolean> {
    const path = `${this.dir}/${String(this.nextSeq++).padStart(SEQ_WIDTH, '0')}.json`;
    const written = this.driver.putContent(path, JSON.stringify(event)).then(
      () => true,
      (err: unknown) => {
        this.log.error('could not queue a notification', {
          endpoint: this.config.name,
          error: errorMessage(err),
        });
        return false;
      },
    );
    this.entries.push({ path, event, written });
    this.wake?.();
    return written;
  }

  /** Events waiting to be delivered. */
  get pending(): number {
    return this.entries.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const head = this.entries[0];
      if (!head) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
        continue;
      }
      if (!(await head.written)) {
        this.entries.shift();
        continue;
      }
      if (await this.send(head.event)) {
        this.failures = 0;
        this.delivered++;
        this.entries.shift();
        await this.driver.delete(head.path).catch((err: unknown) => {
          if (!isPathNotFound(err))
            this.log.warn('could not remove a delivered notification', {
              path: head.path,
              error: errorMessage(err),
            });
        });
        continue;
      }
      this.failures++;
      if (this.failures >= this.config.threshold) await this.sleep(this.config.backoffMs);
    }
  }

  private async send(event: RegistryEvent): Promise<boolean> {
    const headers = new Headers();
    for (const [k, values] of Object.entries(this.config.headers))
      for (const v of values) headers.append(k, v);
    headers.set('Content-Type', EVENTS_MEDIA_TYPE);
    const envelope: EventEnvelope = { events: [event] };
    const signal = AbortSignal.any([this.stopping.signal, AbortSignal.timeout(this.config.timeoutMs)]);
    try {
      const status = await this.post(this.config.url, headers, JSON.stringify(envelope), signal);
      if (status >= 200 && status < 400) return true;
      if (this.failures === 0 || this.failures + 1 === this.config.threshold)
        this.log.warn('notification endpoint refused an event', { endpoint: this.config.name, status });
    } catch (err) {
      if (!this.stopped && (this.failures === 0 || this.failures + 1 === this.config.threshold))
        this.log.warn('notification endpoint unreachable', {
          endpoint: this.config.name,
          error: errorMessage(err),
        });
    }
    return false;
  }

  private async sleep(ms: number): Promise<void> {
    await delay(ms, undefined, { signal: this.stopping.signal }).catch(() => undefined);
  }
}
