import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys } from '../keys.js';
import type { IpamOwner } from '../networks/network.types.js';
import { networkKeys } from '../networks/network-keys.js';
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

/** One change and what must go with it (its addresses' claims): one key or a few, all or none. */
interface Write {
  compares: Compare[];
  ops: TxnOp[];
  /** What the view takes once it went through (a value, or undefined for a delete). */
  applies: { key: string; value?: string }[];
}

function single(key: string, compare: Compare, value?: string): Write {
  return {
    compares: [compare],
    ops: [value === undefined ? { delete: { key } } : { put: { key, value } }],
    applies: [{ key, value }],
  };
}

/** The address claims of `owner` made in this pass, joined to its write (create-if-absent). */
function withClaims(plan: Plan, w: Write, owner: (o: IpamOwner) => boolean): Write {
  for (const [id, o] of plan.ipamClaims) {
    if (!owner(o)) continue;
    const slash = id.indexOf('/');
    const key = networkKeys.ipam(id.slice(0, slash), id.slice(slash + 1));
    const value = JSON.stringify(o);
    w.compares.push({ key, target: 'create', op: 'equal', value: 0 });
    w.ops.push({ put: { key, value } });
    w.applies.push({ key, value });
  }
  return w;
}

const BATCH = 50;

export function writesOf(plan: Plan): Write[] {
  const out: Write[] = [];
  for (const c of plan.serviceChanges()) {
    const key = keys.service(c.id);
    const w = single(key, mod(key, c.before?.modRevision ?? 0), JSON.stringify(c.after));
    out.push(withClaims(plan, w, (o) => o.kind === 'vip' && o.service === c.id));
  }
  for (const c of plan.taskChanges()) {
    const key = keys.task(c.id);
    const compare = mod(key, c.before?.modRevision ?? 0);
    if (c.after === undefined) out.push(single(key, compare));
    else {
      const w = single(key, compare, JSON.stringify(c.after));
      out.push(withClaims(plan, w, (o) => o.kind === 'task' && o.task === c.id));
    }
  }
  // a node's ingress sandbox address: a write of its own
  for (const o of plan.ipamClaims.values()) {
    if (o.kind === 'node') out.push(withClaims(plan, { compares: [], ops: [], applies: [] }, (x) => x === o));
  }
  for (const id of plan.ipamReleases) {
    const slash = id.indexOf('/');
    const key = networkKeys.ipam(id.slice(0, slash), id.slice(slash + 1));
    out.push(single(key, mod(key, plan.snap.ipam.get(id)?.modRevision ?? 0)));
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
      [guard, ...batch.flatMap((w) => w.compares)],
      batch.flatMap((w) => w.ops),
      [{ get: { key: guard.key } }],
    );
    if (res.succeeded) {
      for (const w of batch) for (const a of w.applies) target.applyWrite(a.key, a.value, res.revision);
      return 'ok';
    }
    const held = res.gets[0]?.[0];
    return held && held.createRevision === guard.value ? 'conflict' : 'deposed';
  } catch (err) {
    target.log.debug('orchestrator write failed', { error: errorMessage(err) });
    return 'conflict';
  }
}
