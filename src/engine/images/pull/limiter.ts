/** At most `n` holders at once; the others wait in call order. */
export class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly n: number) {}

  /** Whether acquire() would wait now. */
  get full(): boolean {
    return this.active >= this.n;
  }

  /** Resolve with a release function once a slot is free (rejects when `signal` aborts first). */
  acquire(signal?: AbortSignal): Promise<() => void> {
    return new Promise((resolve, reject) => {
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        this.active--;
        this.waiting.shift()?.();
      };
      const grant = () => {
        signal?.removeEventListener('abort', onAbort);
        this.active++;
        resolve(release);
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal?.reason ?? new Error('aborted'));
      };
      if (signal?.aborted) {
        reject(signal.reason ?? new Error('aborted'));
        return;
      }
      if (this.active < this.n) grant();
      else {
        signal?.addEventListener('abort', onAbort, { once: true });
        this.waiting.push(grant);
      }
    });
  }
}
