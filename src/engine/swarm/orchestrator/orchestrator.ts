import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { newSwarmId } from '../ca/tokens.js';
import type { ClusterStore } from '../store/cluster-store.js';
import { type Clock, systemClock } from './clock.js';
import { ClusterView } from './cluster-view.js';
import { Leadership } from './leadership.js';
import { type LoopMemory, reconcile } from './reconcile.js';
import { RestartHistory } from './restart-history.js';
import { UpdaterMemory } from './updater.js';
import { commit, writesOf } from './writer.js';

/**
 * The elected leader's control loops, started on every manager: each campaigns, one leads. The
 * leader keeps a watch-fed view of the cluster (cluster-view.ts) and runs a reconcile pass
 * (reconcile.ts) whenever the view changes or a timer it asked for fires; passes run one at a
 * time, and changes that arrive during one bring one more. Nothing polls.
 */
export interface OrchestratorOptions {
  store: ClusterStore;
  nodeId: string;
  /** This manager's cluster API address, kept in the election key with the node ID. */
  addr?: string;
  /** The election lease's TTL: 3 × etcd's election timeout (3 s by default). */
  ttlSeconds?: number;
  clock?: Clock;
  newId?: () => string;
  log: Logger;
}

export interface Orchestrator {
  /** Whether this manager leads now. */
  readonly leading: boolean;
  /** Resolves once the current (or next) pass is over and nothing more is pending; for tests. */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

const STOP_MS = 2000;
const RETRY_MS = 500;

/** Waits for `p`, or `ms` on the clock, whichever ends first. */
function bounded(clock: Clock, ms: number, p: Promise<unknown> | undefined): Promise<unknown> {
  if (!p) return Promise.resolve();
  let cancel: (() => void) | undefined;
  const timer = new Promise<void>((resolve) => {
    cancel = clock.after(ms, resolve);
  });
  return Promise.race([p, timer]).finally(() => cancel?.());
}

export function startOrchestrator(opts: OrchestratorOptions): Orchestrator {
  const clock = opts.clock ?? systemClock;
  const newId = opts.newId ?? newSwarmId;
  const log = opts.log;
  let view: ClusterView | undefined;
  let memory: LoopMemory = { updates: new UpdaterMemory(), restarts: new RestartHistory() };
  let running: Promise<void> | undefined;
  let again = false;
  let cancelWake: (() => void) | undefined;
  let generation = 0;

  const leadership = new Leadership({
    store: opts.store,
    value: JSON.stringify({ NodeID: opts.nodeId, Addr: opts.addr ?? '' }),
    ttlSeconds: opts.ttlSeconds ?? 3,
    clock,
    log,
    onElected: () => {
      const gen = ++generation;
      memory = { updates: new UpdaterMemory(), restarts: new RestartHistory() };
      const v = new ClusterView(opts.store, clock, log, () => kick(gen));
      view = v;
      v.start().then(
        () => kick(gen),
        (err) => {
          log.warn('cannot read the cluster to orchestrate it', { error: errorMessage(err) });
          leadership.deposed();
        },
      );
    },
    onLost: () => {
      generation++;
      view?.stop();
      view = undefined;
      cancelWake?.();
    },
  });

  const kick = (gen: number): void => {
    if (gen !== generation) return;
    if (running) {
      again = true;
      return;
    }
    // the pass starts after `running` is set: a store that calls its watchers within a write
    // (the memory fake) must not start a second pass inside the first
    running = Promise.resolve()
      .then(() => pass(gen))
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          kick(gen);
        }
      });
  };

  const pass = async (gen: number): Promise<void> => {
    const v = view;
    if (!v || gen !== generation) return;
    const now = clock.now();
    let wake: number | undefined;
    try {
      const plan = reconcile(v, now, newId, memory);
      wake = plan.wakeTime;
      const writes = writesOf(plan);
      if (writes.length > 0) {
        const res = await commit(
          {
            store: opts.store,
            log,
            guard: () => (gen === generation ? leadership.guard() : undefined),
            applyWrite: (key, value, revision) => v.applyWrite(key, value, revision),
          },
          writes,
        );
        if (res.deposed && gen === generation) leadership.deposed();
        if (res.conflicts > 0) {
          // a lost race brings its watch event; a store error (a leader election in etcd) brings
          // nothing: a pass soon either way
          log.debug('orchestrator writes did not go through; passing again', { ...res });
          wake = Math.min(wake ?? Number.POSITIVE_INFINITY, now + RETRY_MS);
        }
      }
    } catch (err) {
      log.warn('orchestrator pass failed', { error: errorMessage(err) });
      wake = now + RETRY_MS;
    }
    if (gen !== generation) return;
    cancelWake?.();
    cancelWake = undefined;
    if (wake !== undefined) cancelWake = clock.after(Math.max(0, wake - clock.now()), () => kick(gen));
  };

  leadership.start();
  return {
    get leading() {
      return leadership.current !== undefined;
    },
    async settled() {
      for (let i = 0; i < 100 && running; i++) await running;
    },
    async stop() {
      generation++;
      cancelWake?.();
      view?.stop();
      view = undefined;
      // a store that does not answer (quorum lost) must not hold a leave or an engine stop long
      await bounded(
        clock,
        STOP_MS,
        running?.catch(() => {}),
      );
      await bounded(clock, STOP_MS, leadership.stop());
    },
  };
}
