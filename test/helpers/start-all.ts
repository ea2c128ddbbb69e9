/** Something a test starts and must end (an engine, a reference daemon). */
export interface Destroyable {
  destroy(): Promise<void>;
}

/**
 * Start several systems at once. When one fails, those that did start are destroyed before its
 * error is thrown: a daemon left running would keep the test file's process alive until the
 * runner's timeout, and hide the first error behind a cancellation.
 */
export async function startAll<T extends readonly Destroyable[]>(
  starts: {
    [K in keyof T]: Promise<T[K]>;
  },
): Promise<T> {
  const settled = await Promise.allSettled(starts);
  const started = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value as Destroyable] : []));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (!failed) return started as unknown as T;
  await Promise.allSettled(started.map((s) => s.destroy()));
  throw failed.reason;
}
