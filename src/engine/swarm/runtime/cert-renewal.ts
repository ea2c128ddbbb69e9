import { X509Certificate } from 'node:crypto';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';

/**
 * When a node renews its certificate: at a random point between 50% and 80% of its validity
 * (swarmkit's window), so that the nodes of a swarm do not all come at once. A failed renewal is
 * tried again after a minute (or at once past expiry), until one succeeds.
 */

export interface RenewalClock {
  now(): number;
  /** Calls `fn` after `ms`; the answer cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export const realClock: RenewalClock = {
  now: () => Date.now(),
  after: (ms, fn) => {
    const t = setTimeout(fn, Math.min(ms, 2 ** 31 - 1));
    t.unref();
    return () => clearTimeout(t);
  },
};

const RETRY_MS = 60_000;

/** The delay from `now` to a random point in [50%, 80%] of the certificate's validity (0 when past it). */
export function renewalDelayMs(
  validFrom: number,
  validTo: number,
  now: number,
  random = Math.random,
): number {
  const span = validTo - validFrom;
  const at = validFrom + span * (0.5 + 0.3 * random());
  return Math.max(0, Math.round(at - now));
}

export class CertRenewal {
  private cancel?: () => void;

  /**
   * `certificate()` is the node's current certificate (PEM); `renew()` gets and installs a new one
   * (the schedule then follows the new certificate).
   */
  constructor(
    private readonly certificate: () => string,
    private readonly renew: () => Promise<void>,
    private readonly log: Logger,
    private readonly clock: RenewalClock = realClock,
    private readonly random: () => number = Math.random,
  ) {}

  start(): void {
    this.stop();
    let delay: number;
    try {
      const cert = new X509Certificate(this.certificate());
      delay = renewalDelayMs(
        Date.parse(cert.validFrom),
        Date.parse(cert.validTo),
        this.clock.now(),
        this.random,
      );
    } catch (err) {
      this.log.warn('cannot read the node certificate; renewing it', { error: errorMessage(err) });
      delay = 0;
    }
    this.schedule(delay);
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  /** A renewal in `ms`, whatever the certificate says (one that carries a role no longer held). */
  soon(ms: number): void {
    this.stop();
    this.schedule(ms);
  }

  private schedule(ms: number): void {
    const cancel = this.clock.after(ms, () => {
      if (this.cancel !== cancel) return;
      void this.renew().then(
        () => {
          if (this.cancel === cancel) this.start();
        },
        (err: unknown) => {
          this.log.warn('certificate renewal failed; trying again', { error: errorMessage(err) });
          if (this.cancel === cancel) this.schedule(RETRY_MS);
        },
      );
    });
    this.cancel = cancel;
  }
}
