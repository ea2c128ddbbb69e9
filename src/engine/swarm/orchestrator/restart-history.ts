import type { StoredTask } from '../tasks/task.types.js';

/** More than any sensible MaxAttempts: older failures of a slot are forgotten. */
const MAX_KEPT = 1000;

/**
 * The tasks each slot lost (their end, their spec version), kept for as long as this manager
 * leads: the reaper deletes history beyond TaskHistoryRetentionLimit, and MaxAttempts may be
 * larger. A new leader starts from the history the store still holds.
 */
export class RestartHistory {
  private readonly slots = new Map<string, Map<string, { at: number; specVersion: number }>>();

  note(t: StoredTask, at: number): void {
    const key = slotKey(t);
    const slot = this.slots.get(key) ?? new Map<string, { at: number; specVersion: number }>();
    this.slots.set(key, slot);
    if (slot.has(t.ID)) return;
    slot.set(t.ID, { at, specVersion: t._.specVersion });
    // only the current spec's failures count: older ones go, and a slot keeps at most MAX_KEPT
    for (const [id, e] of slot) if (e.specVersion < t._.specVersion) slot.delete(id);
    while (slot.size > MAX_KEPT) slot.delete(slot.keys().next().value as string);
  }

  /** Failures in `t`'s slot with its spec version since `since`. */
  count(t: StoredTask, since: number): number {
    let n = 0;
    for (const e of this.slots.get(slotKey(t))?.values() ?? [])
      if (e.specVersion === t._.specVersion && e.at >= since) n++;
    return n;
  }

  /** Forgets the slots of services that are gone. */
  keepServices(alive: (serviceId: string) => boolean): void {
    for (const key of this.slots.keys()) if (!alive(key.slice(0, key.indexOf('/')))) this.slots.delete(key);
  }
}

function slotKey(t: StoredTask): string {
  return `${t.ServiceID}/${t.Slot ?? t.NodeID ?? ''}`;
}
