import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import type { ClusterStore, Compare, TxnOp } from '../store/cluster-store.js';
import type { Plan } from './plan.js';

/**
 * Commits a plan: each changed task or service is a compare-and-swap on its key's mod revision
 * (create: the key must not exist), and every transaction also carries the leader's guard, so a
 * deposed leader's write changes nothing. Changes go in batches; a batch that loses a race is
 * retried one change at a time, and a change that still loses is left for the next pass (the
 * watch brings the newer value). Committed writes are applied to the view at once.
 */
export interface WriteTarget {
  store: ClusterStore;
  log: Logger;
  /** The leader's guard, undefined once leadership is lost. */
  guard(): Compare | undefined;
  applyWrite(key: string, value: string | undefined, revision: number): void;
}

export interface WriteResult {
  written: number;
  conflicts: number;
  /** The guard failed: this node no longer leads. */
  deposed: boolean;
}

interface Write {
  key: string;
  compare: Compare;
  op: TxnOp;
  value?: string;
}

const BATCH = 50;

export function writesOf(plan: Plan): Write[] {
  const out: Write[] = [];
  for (const c of plan.serviceChanges()) {
    const key = keys.service(c.id);
    const value = JSON.stringify(c.after);
    out.push({ key, value, compare: mod(key, c.before?.modRevision ?? 0), op: { put: { key, value } } });
  }
  for (const c of plan.taskChanges()) {
    const key = keys.task(c.id);
    const compare = mod(key, c.before?.modRevision ?? 0);
    if (c.after === undefined) out.push({ key, compare, op: { delete: { key } } });
    else {
      const value = JSON.stringify(c.after);
      out.push({ key, value, compare, op: { put: { key, value } } });
    }
  }
  return out;
}

function mod(key: string, revision: number): Compare {
  return { key, target: 'mod', op: 'equal', value: revision };
}

export async function commit(target: WriteTarget, writes: Write[]): Promise<WriteResult> {
  const result: WriteResult = { written: 0, conflicts: 0, deposed: false };
  for (let i = 0; i < writes.length && !result.deposed; i += BATCH) {
    const batch = writes.slice(i, i + BATCH);
    const outcome = await attempt(target, batch);
    if (outcome === 'ok') {
      result.written += batch.length;
      continue;
    }
    if (outcome === 'deposed' || batch.length === 1) {
      if (outcome === 'deposed') result.deposed = true;
      else result.conflicts++;
      continue;
    }
    for (const w of batch) {
      const one = await attempt(target, [w]);
      if (one === 'ok') result.written++;
      else if (one === 'deposed') {
        result.deposed = true;
        break;
      } else result.conflicts++;
    }
  }
  return result;
}

async function attempt(target: WriteTarget, batch: Write[]): Promise<'ok' | 'conflict' | 'deposed'> {
  const guard = target.guard();
  if (!guard) return 'deposed';
  try {
    const res = await target.store.txn(
      [guard, ...batch.map((w) => w.compare)],
      batch.map((w) => w.op),
      [{ get: { key: guard.key } }],
    );
    if (res.succeeded) {
      for (const w of batch) target.applyWrite(w.key, w.value, res.revision);
      return 'ok';
    }
    const held = res.gets[0]?.[0];
    return held && held.createRevision === guard.value ? 'conflict' : 'deposed';
  } catch (err) {
    target.log.debug('orchestrator write failed', { error: errorMessage(err) });
    return 'conflict';
  }
}
