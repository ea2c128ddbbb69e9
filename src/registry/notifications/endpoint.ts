import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { isPathNotFound, type StorageDriver } from '../storage/driver.js';
import { FilesystemDriver } from '../storage/filesystem.driver.js';
import { type Lease, tryLease } from '../storage/lease.js';
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

/**
 * One queue directory: this process's own, or one a process left behind (it stopped with events
 * undelivered, or died) that this process adopted, holding its lease until it is empty.
 */
interface Queue {
  dir: string;
  own: boolean;
  /** Files directly in the endpoint's directory (the layout before queues had owners). */
  legacy: boolean;
  lease: Lease | undefined;
  /** Events of this queue not delivered yet. */
  remaining: number;
}

interface Entry {
  /** The file that holds the event until it is delivered. */
  path: string;
  event: RegistryEvent;
  /** Settles when the file is written (a failed write drops the event, logged). */
  written: Promise<boolean>;
  queue: Queue;
}

/** Queue file names: a zero-padded sequence number, so that listing order is queue order. */
const SEQ_WIDTH = 16;
const FILE = /^(\d{16})\.json$/;
/** The lease file of a queue directory (storage/lease.ts): which live process delivers it. */
const OWNER = 'owner';
/** How often a running process looks for queues that a dead process left. */
const ADOPT_INTERVAL_MS = 15_000;

/** A queue directory name of this process: host, pid and a random part (ids are not reused). */
function ownQueueName(): string {
  const host = hostname().replace(/[^A-Za-z0-9_-]/g, '_');
  return `${host}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * One notification endpoint: a queue on disk (one file per event, written before the request is
 * answered, removed once delivered) and a sender that posts the events in order, one envelope
 * each, retrying the head of the queue until the endpoint takes it (2xx or 3xx, as the
 * reference): at once below `threshold` failures in a row, after `backoffMs` from then on.
 *
 * Several registry processes may serve one storage: each process queues into its own directory
 * `<dir>/<host>-<pid>-<random>/`, held by a lease file (`owner`, storage/lease.ts), so two
 * processes never number files over each other nor send each other's events. A queue whose
 * process stopped with events undelivered, or died (its lease free or stale), is adopted by the
 * next process that looks — at its start, then every 15 s — and sent before that process's own
 * events, in its order; an adopted queue's directory goes once it is empty. So a restart, or a
 * kill, resumes with what the files hold, and every event is sent by exactly one process.
 */
export class NotificationEndpoint {
  private readonly entries: Entry[] = [];
  private readonly own: Queue;
  private readonly adopted = new Map<string, Queue>();
  private adopting: Promise<void> | undefined;
  private adoptTimer: NodeJS.Timeout | undefined;
  private nextSeq = 0;
  private failures = 0;
  private stopped = false;
  /** An attempt to send the head of the queue is under way. */
  private sending = false;
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
    private readonly adoptIntervalMs = ADOPT_INTERVAL_MS,
  ) {
    this.own = { dir: `${dir}/${ownQueueName()}`, own: true, legacy: false, lease: undefined, remaining: 0 };
  }

  /** This process's queue directory (in storage). */
  get queueDir(): string {
    return this.own.dir;
  }

  /** Take this process's queue, adopt what earlier processes left, then start sending. */
  async start(): Promise<void> {
    const own = await this.lease(this.own.dir, true);
    if (own === 'missing' || (own && 'busy' in own))
      throw new Error(`cannot take the notification queue ${this.own.dir}`);
    this.own.lease = own;
    await this.adopt();
    this.adoptTimer = setInterval(() => void this.adopt(), this.adoptIntervalMs);
    this.adoptTimer.unref();
    this.loop = this.run();
  }

  /**
   * A lease on a queue directory (created first when `create`); undefined when the storage has
   * no files to lease (then queues are not shared between processes), 'missing' when the
   * directory is gone.
   */
  private async lease(
    dir: string,
    create: boolean,
  ): Promise<Lease | { busy: { pid: number } } | 'missing' | undefined> {
    if (!(this.driver instanceof FilesystemDriver)) return undefined;
    const full = this.driver.fullPath(dir);
    if (create) await mkdir(full, { recursive: true });
    return tryLease(`${full}/${OWNER}`);
  }

  /** Adopt the queues of processes that stopped or died (one look at a time). */
  private adopt(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.adopting ??= this.adoptOnce()
      .catch((err: unknown) =>
        this.log.warn('looking for left notification queues failed', {
          endpoint: this.config.name,
          error: errorMessage(err),
        }),
      )
      .finally(() => {
        this.adopting = undefined;
      });
    return this.adopting;
  }

  private async adoptOnce(): Promise<void> {
    let names: string[] = [];
    try {
      names = await this.driver.list(this.dir);
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    const found: Entry[] = [];
    if (names.some((p) => FILE.test(basename(p))) && !this.adopted.has(this.dir)) {
      const queue: Queue = { dir: this.dir, own: false, legacy: true, lease: undefined, remaining: 0 };
      if (await this.take(queue)) found.push(...(await this.load(queue)));
    }
    for (const path of names.sort()) {
      const name = basename(path);
      if (FILE.test(name) || name === OWNER || path === this.own.dir || this.adopted.has(path)) continue;
      const info = await this.driver.stat(path).catch(() => undefined);
      if (!info?.isDir) continue;
      const queue: Queue = { dir: path, own: false, legacy: false, lease: undefined, remaining: 0 };
      if (!(await this.take(queue))) continue;
      const entries = await this.load(queue);
      if (entries.length === 0) await this.dropQueue(queue);
      else found.push(...entries);
    }
    if (found.length === 0) return;
    this.log.info('resuming queued notifications', { endpoint: this.config.name, count: found.length });
    // Older than anything this process queued: sent first (after an attempt under way).
    const at = this.sending ? 1 : 0;
    this.entries.splice(Math.min(at, this.entries.length), 0, ...found);
    this.wake?.();
  }

  /** Lease a queue another process left; false when a live process holds it. */
  private async take(queue: Queue): Promise<boolean> {
    const lease = await this.lease(queue.dir, false);
    if (lease === 'missing' || (lease && 'busy' in lease)) return false;
    queue.lease = lease;
    this.adopted.set(queue.dir, queue);
    return true;
  }

  /** The events a queue directory holds, in order. */
  private async load(queue: Queue): Promise<Entry[]> {
    let files: string[] = [];
    try {
      files = await this.driver.list(queue.dir);
    } catch (err) {
      if (!isPathNotFound(err)) throw err;
    }
    const entries: Entry[] = [];
    for (const path of files.filter((p) => FILE.test(basename(p))).sort()) {
      try {
        const event = JSON.parse((await this.driver.getContent(path)).toString('utf8')) as RegistryEvent;
        entries.push({ path, event, written: Promise.resolve(true), queue });
      } catch (err) {
        // A file cut short by a crash while it was written never held an acknowledged event.
        this.log.warn('dropping an unreadable queued notification', { path, error: errorMessage(err) });
        await this.driver.delete(path).catch(() => undefined);
      }
    }
    queue.remaining = entries.length;
    return entries;
  }

  /** An adopted queue is empty: its directory goes (the legacy one stays), its lease is freed. */
  private async dropQueue(queue: Queue): Promise<void> {
    this.adopted.delete(queue.dir);
    await queue.lease?.release();
    if (!queue.legacy) await this.driver.delete(queue.dir).catch(() => undefined);
  }

  /** Whether this endpoint wants the event (ignore.mediatypes, ignore.actions). */
  wants(event: RegistryEvent): boolean {
    if (this.config.ignoredActions.includes(event.action)) return false;
    const type = event.target.mediaType;
    return type === undefined || !this.config.ignoredMediaTypes.includes(type);
  }

  /** Queue an event: resolves once it is on disk. */
  enqueue(event: RegistryEvent): Promise<boolean> {
    const path = `${this.own.dir}/${String(this.nextSeq++).padStart(SEQ_WIDTH, '0')}.json`;
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
    this.own.remaining++;
    this.entries.push({ path, event, written, queue: this.own });
    this.wake?.();
    return written;
  }

  /** Events waiting to be delivered. */
  get pending(): number {
    return this.entries.length;
  }

  /**
   * Stop sending. The queues' leases are freed: what is undelivered stays on disk for the next
   * process; this process's own directory goes when it is empty.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.adoptTimer);
    this.stopping.abort();
    this.wake?.();
    await this.loop;
    await this.adopting;
    for (const queue of [...this.adopted.values()]) {
      if (queue.remaining === 0) await this.dropQueue(queue);
      else await queue.lease?.release();
    }
    this.adopted.clear();
    await Promise.all(this.entries.map((e) => e.written));
    await this.own.lease?.release();
    if (this.own.remaining === 0) await this.driver.delete(this.own.dir).catch(() => undefined);
  }

  /** An entry is done with (delivered, or never written): its queue may be empty now. */
  private async finished(entry: Entry): Promise<void> {
    const i = this.entries.indexOf(entry);
    if (i >= 0) this.entries.splice(i, 1);
    entry.queue.remaining--;
    if (!entry.queue.own && entry.queue.remaining === 0) await this.dropQueue(entry.queue);
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
        await this.finished(head);
        continue;
      }
      this.sending = true;
      const sent = await this.send(head.event);
      this.sending = false;
      if (sent) {
        this.failures = 0;
        this.delivered++;
        await this.driver.delete(head.path).catch((err: unknown) => {
          if (!isPathNotFound(err))
            this.log.warn('could not remove a delivered notification', {
              path: head.path,
              error: errorMessage(err),
            });
        });
        await this.finished(head);
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

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
