/**
 * A check run every period, never two at once: a run still going when the next tick comes makes
 * that tick a no-op. The timer is unref'd (it never keeps Node alive). `run()` is also the check
 * on demand, with the same rule.
 */
export class Periodic {
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(private readonly check: () => Promise<void>) {}

  start(periodMs: number): void {
    this.stop();
    this.timer = setInterval(() => void this.run(), periodMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.check();
    } finally {
      this.running = false;
    }
  }
}
