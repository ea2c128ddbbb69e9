import type { IncomingMessage } from 'node:http';
import { BerthError } from '../../common/errors.js';

export interface RateLimitOptions {
  /** Sustained requests per second allowed per client. */
  rate: number;
  /** Bucket size: how many requests a client may make at once after being idle. */
  burst: number;
  /** At most this many clients are tracked; beyond it the idlest are forgotten. */
  maxClients?: number;
  /**
   * The identity of an authenticated request, when it can be told cheaply (the authorizer's
   * `identify`); otherwise clients are told apart by remote address.
   */
  identify?: (req: IncomingMessage) => string | undefined;
  /** Take the client address from the first X-Forwarded-For entry (only behind a trusted proxy). */
  trustForwardedFor?: boolean;
  now?: () => number;
}

interface Bucket {
  tokens: number;
  updated: number;
}

/**
 * A per-client token bucket: each client holds up to `burst` tokens, refilled at `rate` per
 * second; a request takes one or is refused with a TooManyRequests error (registry code
 * TOOMANYREQUESTS, status 429) whose detail says when to retry (`retryAfter`, seconds, for the
 * Retry-After header). Memory is bounded: buckets that have refilled completely carry no state
 * and are dropped by a periodic sweep, and at most `maxClients` are kept.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly max: number;
  private readonly now: () => number;
  private lastSweep = 0;

  constructor(readonly options: RateLimitOptions) {
    if (!(options.rate > 0))
      throw new Error('rate limit: rate must be a positive number of requests per second');
    if (!(options.burst >= 1)) throw new Error('rate limit: burst must be at least 1');
    this.max = options.maxClients ?? 100_000;
    this.now = options.now ?? (() => performance.now());
  }

  /** The key a request is counted under. */
  clientKey(req: IncomingMessage): string {
    const user = this.options.identify?.(req);
    if (user) return `user:${user}`;
    if (this.options.trustForwardedFor) {
      const fwd = req.headers['x-forwarded-for'];
      const first = (Array.isArray(fwd) ? fwd[0] : fwd)?.split(',')[0]?.trim();
      if (first) return `addr:${first}`;
    }
    return `addr:${req.socket?.remoteAddress ?? 'unknown'}`;
  }

  /** Take one token for the request's client, or throw TooManyRequests. */
  check(req: IncomingMessage): void {
    this.take(this.clientKey(req));
  }

  /** Take one token from a client's bucket, or throw TooManyRequests. */
  take(key: string): void {
    const now = this.now();
    this.sweep(now);
    const { rate, burst } = this.options;
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.max) this.evictOldest();
      bucket = { tokens: burst, updated: now };
      this.buckets.set(key, bucket);
    } else {
      bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.updated) / 1000) * rate);
      bucket.updated = now;
      // Keep the map ordered by last use, so eviction drops the idlest.
      this.buckets.delete(key);
      this.buckets.set(key, bucket);
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return;
    }
    const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / rate));
    throw new BerthError('TooManyRequests', 'too many requests: slow down', { retryAfter });
  }

  /** How many clients are tracked (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < 10_000) return;
    this.lastSweep = now;
    const { rate, burst } = this.options;
    const full = (burst / rate) * 1000;
    for (const [key, bucket] of this.buckets) {
      // Ordered by last use: once one is still refilling, all later ones are too.
      if (now - bucket.updated < full) break;
      this.buckets.delete(key);
    }
  }

  private evictOldest(): void {
    const oldest = this.buckets.keys().next();
    if (!oldest.done) this.buckets.delete(oldest.value);
  }
}

/** The Retry-After value (seconds) of a TooManyRequests error, when it carries one. */
export function retryAfterSeconds(err: unknown): number | undefined {
  if (!(err instanceof BerthError) || err.kind !== 'TooManyRequests') return undefined;
  const detail = err.detail as { retryAfter?: unknown } | undefined;
  return typeof detail?.retryAfter === 'number' ? detail.retryAfter : undefined;
}
