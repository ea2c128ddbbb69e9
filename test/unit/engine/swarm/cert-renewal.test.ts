import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import { RootCa } from '../../../../src/engine/swarm/ca/root-ca.js';
import {
  CertRenewal,
  type RenewalClock,
  renewalDelayMs,
} from '../../../../src/engine/swarm/runtime/cert-renewal.js';

const HOUR = 3600_000;

/** A clock that runs only when told: timers fire in order as `advance` passes them. */
class FakeClock implements RenewalClock {
  t = 0;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];
  now(): number {
    return this.t;
  }
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + ms, fn, live: true };
    this.timers.push(timer);
    return () => {
      timer.live = false;
    };
  }
  pending(): number[] {
    return this.timers.filter((x) => x.live).map((x) => x.at);
  }
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      const next = this.timers.filter((x) => x.live && x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      next.live = false;
      this.t = next.at;
      next.fn();
      // let the renewal's promise settle before the next timer
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
    this.t = end;
  }
}

describe('certificate renewal timing', () => {
  it('falls between 50% and 80% of the validity, spread by the random draw', () => {
    const from = 1_000_000;
    const to = from + 100 * HOUR;
    assert.equal(
      renewalDelayMs(from, to, from, () => 0),
      50 * HOUR,
    );
    assert.equal(
      renewalDelayMs(from, to, from, () => 1),
      80 * HOUR,
    );
    assert.equal(
      renewalDelayMs(from, to, from + 10 * HOUR, () => 0.5),
      55 * HOUR,
    );
    assert.equal(
      renewalDelayMs(from, to, from + 90 * HOUR, () => 0.5),
      0,
      'past the window: at once',
    );
    for (let i = 0; i < 200; i++) {
      const d = renewalDelayMs(from, to, from);
      assert.ok(d >= 50 * HOUR && d <= 80 * HOUR, `${d}`);
    }
  });

  it("renews once in the window of the node's certificate, then follows the new one; retries a failure", async () => {
    const clock = new FakeClock();
    const ca = RootCa.create(new Date(0));
    // a 10 h certificate issued at t=0 (backdated an hour: valid from -1 h to 10 h)
    let cert = ca.issueNode('n1', 'worker', 'c1', 10 * HOUR, undefined, new Date(0)).certPem;
    let renewals = 0;
    let fail = false;
    const renewal = new CertRenewal(
      () => cert,
      async () => {
        if (fail) throw new Error('no manager');
        renewals++;
        cert = ca.issueNode('n1', 'worker', 'c1', 10 * HOUR, undefined, new Date(clock.now())).certPem;
      },
      new Logger('error'),
      clock,
      () => 0.5,
    );
    renewal.start();
    // validity 11 h from -1 h: 65% is at 6.15 h
    assert.deepEqual(clock.pending(), [6.15 * HOUR]);
    await clock.advance(6 * HOUR);
    assert.equal(renewals, 0);
    await clock.advance(0.15 * HOUR);
    assert.equal(renewals, 1);
    // the new certificate (from 5.15 h to 16.15 h) renews at 5.15 + 7.15 h
    assert.deepEqual(clock.pending(), [12.3 * HOUR]);
    fail = true;
    await clock.advance(6.15 * HOUR);
    assert.equal(renewals, 1);
    assert.deepEqual(clock.pending(), [12.3 * HOUR + 60_000], 'a failure is tried again a minute later');
    fail = false;
    await clock.advance(60_000);
    assert.equal(renewals, 2);
    renewal.stop();
    assert.deepEqual(clock.pending(), []);
  });
});
