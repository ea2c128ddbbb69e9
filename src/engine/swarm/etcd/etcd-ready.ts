import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import { EtcdStore } from '../store/etcd-store.js';

/**
 * Waits until the member on `socketPath` answers a status call and knows a leader (a fresh
 * member takes its first write about a second after start); rejects with the last error when
 * `timeoutMs` passes.
 */
export async function waitForEtcd(socketPath: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    const store = new EtcdStore({ socketPath }, { timeoutMs: 2000 });
    try {
      const status = await store.status();
      if (status.leader !== '0') return;
      last = 'no leader yet';
    } catch (err) {
      last = errorMessage(err);
    } finally {
      store.close();
    }
    if (Date.now() >= deadline) throw new Error(`etcd did not come up in ${timeoutMs} ms: ${last}`);
    await sleep(100);
  }
}
