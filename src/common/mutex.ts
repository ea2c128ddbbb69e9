/** A tiny async mutex: critical sections run one at a time, in call order. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<R>(fn: () => Promise<R>): Promise<R> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/** Mutexes by key (one per layer chain ID while it is being committed...), dropped when unused. */
export class KeyedMutex {
  private readonly locks = new Map<string, { mutex: Mutex; users: number }>();

  async run<R>(key: string, fn: () => Promise<R>): Promise<R> {
    let entry = this.locks.get(key);
    if (!entry) {
      entry = { mutex: new Mutex(), users: 0 };
      this.locks.set(key, entry);
    }
    entry.users++;
    try {
      return await entry.mutex.run(fn);
    } finally {
      entry.users--;
      if (entry.users === 0) this.locks.delete(key);
    }
  }
}
