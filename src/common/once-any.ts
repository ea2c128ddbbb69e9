import type { EventEmitter } from 'node:events';

/** Resolves at the first of `names` an emitter emits (listeners removed then; never rejects). */
export function onceAny(emitter: EventEmitter, names: string[]): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      for (const n of names) emitter.off(n, done);
      resolve();
    };
    for (const n of names) emitter.on(n, done);
  });
}
