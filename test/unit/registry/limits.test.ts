import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { BerthError } from '../../../src/common/errors.js';
import { RateLimiter, retryAfterSeconds } from '../../../src/registry/limits/rate-limiter.js';

const req = (addr: string, headers: Record<string, string> = {}) =>
  ({ headers, socket: { remoteAddress: addr } }) as unknown as IncomingMessage;

describe('rate limiter', () => {
  it('allows a burst, then refuses with TooManyRequests and a retry delay, then refills', () => {
    let now = 0;
    const rl = new RateLimiter({ rate: 2, burst: 3, now: () => now });
    for (let i = 0; i < 3; i++) rl.check(req('10.0.0.1'));
    let err: unknown;
    try {
      rl.check(req('10.0.0.1'));
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof BerthError && err.kind === 'TooManyRequests');
    assert.equal(retryAfterSeconds(err), 1);
    // Another client is not affected.
    rl.check(req('10.0.0.2'));
    now += 500; // one token back at 2/s
    rl.check(req('10.0.0.1'));
    assert.throws(() => rl.check(req('10.0.0.1')), /too many requests/);
  });

  it('keys authenticated clients by user, others by address (X-Forwarded-For only when trusted)', () => {
    const rl = new RateLimiter({
      rate: 1,
      burst: 1,
      now: () => 0,
      identify: (r) => (r.headers.authorization === 'ok' ? 'alice' : undefined),
    });
    assert.equal(rl.clientKey(req('1.2.3.4', { authorization: 'ok' })), 'user:alice');
    assert.equal(rl.clientKey(req('1.2.3.4', { 'x-forwarded-for': '9.9.9.9' })), 'addr:1.2.3.4');
    const proxied = new RateLimiter({ rate: 1, burst: 1, trustForwardedFor: true });
    assert.equal(
      proxied.clientKey(req('1.2.3.4', { 'x-forwarded-for': '9.9.9.9, 1.2.3.4' })),
      'addr:9.9.9.9',
    );
    rl.check(req('1.2.3.4', { authorization: 'ok' }));
    rl.check(req('1.2.3.4')); // same address, different key
    assert.throws(() => rl.check(req('5.6.7.8', { authorization: 'ok' })));
  });

  it('keeps memory bounded: idle buckets are swept, and the count is capped', () => {
    let now = 0;
    const rl = new RateLimiter({ rate: 10, burst: 10, maxClients: 100, now: () => now });
    for (let i = 0; i < 1000; i++) rl.check(req(`10.0.${i >> 8}.${i & 255}`));
    assert.equal(rl.size, 100);
    now += 60_000;
    rl.check(req('10.9.9.9'));
    assert.equal(rl.size, 1);
  });

  it('refuses nonsense settings', () => {
    assert.throws(() => new RateLimiter({ rate: 0, burst: 1 }), /rate/);
    assert.throws(() => new RateLimiter({ rate: 1, burst: 0 }), /burst/);
  });
});
