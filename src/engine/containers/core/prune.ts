import { errorMessage } from '../../../common/errors.js';
import { checkFilterNames, type Filters } from '../../../common/filters.js';
import type { Logger } from '../../../common/log.js';
import { parseFilterTime, parseTimestampMs } from '../../../common/time.js';
import type { ContainerEvents } from './events.js';
import type { Lifecycle } from './lifecycle.js';
import type { ContainerSnapshots } from './ports.js';
import type { ContainerSet } from './set.js';

export interface PruneDeps {
  set: ContainerSet;
  life: Pick<Lifecycle, 'remove'>;
  snapshots: Pick<ContainerSnapshots, 'usage'>;
  events: ContainerEvents;
  log: Logger;
}

function labelMatches(labels: Record<string, string>, filter: string): boolean {
  const i = filter.indexOf('=');
  if (i < 0) return Object.hasOwn(labels, filter);
  return labels[filter.slice(0, i)] === filter.slice(i + 1);
}

/** POST /containers/prune: stopped containers matching until/label/label!; a `prune` event. */
export async function pruneContainers(
  d: PruneDeps,
  filters: Filters,
): Promise<{ ContainersDeleted: string[] | null; SpaceReclaimed: number }> {
  checkFilterNames(filters, ['until', 'label', 'label!']);
  const until = (filters.get('until') ?? []).map((v) => parseFilterTime(v));
  const labels = filters.get('label') ?? [];
  const notLabels = filters.get('label!') ?? [];
  const deleted: string[] = [];
  let reclaimed = 0;
  for (const c of [...d.set.values()]) {
    const s = c.state;
    if (s.Running || s.RemovalInProgress) continue;
    const created = parseTimestampMs(c.record.Created);
    if (!until.every((t) => created < t)) continue;
    const have = c.record.Config.Labels ?? {};
    if (!labels.every((l) => labelMatches(have, l))) continue;
    if (notLabels.some((l) => labelMatches(have, l))) continue;
    const size = await d.snapshots.usage(c.id).catch(() => 0);
    try {
      await d.life.remove(c, {});
    } catch (err) {
      d.log.warn('prune: cannot remove container', { id: c.id, error: errorMessage(err) });
      continue;
    }
    deleted.push(c.id);
    reclaimed += size;
  }
  d.events.emitGlobal('prune', { reclaimed: String(reclaimed) });
  return { ContainersDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed };
}
