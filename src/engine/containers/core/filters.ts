import type { HostConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { checkFilterNames, type Filters } from '../../../common/filters.js';
import { filterMatch } from '../../../common/go-regexp.js';
import type { ContainerRecord } from './record.types.js';
import { timeKey } from './units.js';
import { parsePortKey } from './validate.js';
import { attachedNetworkNames, mountsView } from './views.js';

/** GET /containers/json filtering, as dockerd does it. */

export const LIST_FILTERS = [
  'id',
  'name',
  'label',
  'exited',
  'status',
  'ancestor',
  'before',
  'since',
  'volume',
  'network',
  'publish',
  'expose',
  'health',
  'isolation',
  'is-task',
] as const;

const STATES = ['created', 'restarting', 'running', 'removing', 'paused', 'exited', 'dead'];
const HEALTH = ['starting', 'healthy', 'unhealthy', 'none'];

export interface Listed {
  record: ContainerRecord;
  hostConfig: HostConfig;
}

export interface ListQuery {
  all: boolean;
  limit: number;
  since?: string;
  before?: string;
  filters: Filters;
}

const regexMatch = filterMatch;

function matchLabels(values: string[], labels: Record<string, string>): boolean {
  return values.every((v) => {
    const i = v.indexOf('=');
    if (i < 0) return Object.hasOwn(labels, v);
    const key = v.slice(0, i);
    return Object.hasOwn(labels, key) && labels[key] === v.slice(i + 1);
  });
}

function portMatches(values: string[], ports: string[]): boolean {
  return values.some((v) => {
    const want = parsePortKey(v);
    return ports.some((p) => {
      const have = parsePortKey(p);
      return have.proto === want.proto && have.start <= want.end && want.start <= have.end;
    });
  });
}

/**
 * Filter and order (newest first) the containers. `resolve` maps an ID/name for since/before and
 * `imageIds` gives the image IDs an `ancestor` value stands for.
 */
export function filterContainers(
  all: Listed[],
  q: ListQuery,
  helpers: {
    resolve(idOrName: string): string;
    ancestorIds(ref: string): string[];
    /** The ID of a network by name (absent: names only). */
    networkId?(name: string): string | undefined;
  },
): Listed[] {
  const f = q.filters;
  checkFilterNames(f, LIST_FILTERS);
  let showAll = q.all || q.limit > 0;
  for (const s of f.get('status') ?? []) {
    if (!STATES.includes(s)) throw invalidParameter(`invalid filter 'status=${s}'`);
    showAll = true;
  }
  for (const h of f.get('health') ?? []) {
    if (!HEALTH.includes(h)) throw invalidParameter(`invalid filter 'health=${h}'`);
  }
  const exited = (f.get('exited') ?? []).map((v) => {
    if (!/^-?\d+$/.test(v)) throw invalidParameter(`invalid filter 'exited=${v}'`);
    return Number(v);
  });
  let isTask: boolean | undefined;
  for (const v of f.get('is-task') ?? []) {
    if (v === 'true' || v === '1') isTask = true;
    else if (v === 'false' || v === '0') isTask = false;
    else throw invalidParameter(`invalid filter 'is-task=${v}'`);
  }
  // newest first; each creation time turned into its sort key once, not at every comparison
  const keyed = all.map((c) => ({ c, created: timeKey(c.record.Created) }));
  keyed.sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : 0));
  const createdOf = (idOrName: string): string => {
    const id = helpers.resolve(idOrName);
    const found = all.find((c) => c.record.ID === id);
    return found ? timeKey(found.record.Created) : '';
  };
  const sinceValues = [...(f.get('since') ?? []), ...(q.since ? [q.since] : [])];
  const beforeValues = [...(f.get('before') ?? []), ...(q.before ? [q.before] : [])];
  if (sinceValues.length || beforeValues.length) showAll = true;
  const since = sinceValues.map(createdOf);
  const before = beforeValues.map(createdOf);
  const ancestors = (f.get('ancestor') ?? []).map((a) => ({ ref: a, ids: helpers.ancestorIds(a) }));

  const out: Listed[] = [];
  for (const { c, created } of keyed) {
    const r = c.record;
    const s = r.State;
    if (!showAll && !s.Running) continue;
    if (since.some((t) => created <= t)) continue;
    if (before.some((t) => created >= t)) continue;
    const ids = f.get('id');
    if (ids && !ids.some((v) => regexMatch(v, r.ID))) continue;
    const names = f.get('name');
    if (names && !names.some((v) => regexMatch(v, r.Name))) continue;
    const labels = f.get('label');
    if (labels && !matchLabels(labels, r.Config.Labels ?? {})) continue;
    if (exited.length && !(!s.Running && r.HasBeenStartedBefore && exited.includes(s.ExitCode))) continue;
    const statuses = f.get('status');
    if (statuses && !statuses.includes(s.Status)) continue;
    if (ancestors.length) {
      const ok = ancestors.some(
        ({ ref, ids: imageIds }) => r.Config.Image === ref || imageIds.includes(r.Image),
      );
      if (!ok) continue;
    }
    const vols = f.get('volume');
    if (vols) {
      const mounts = mountsView(c.hostConfig, c.record.MountPoints);
      const ok = vols.some((v) => mounts.some((m) => m.Source === v || m.Destination === v || m.Name === v));
      if (!ok) continue;
    }
    const nets = f.get('network');
    if (nets) {
      // dockerd: the name of one of its networks, or a prefix of its ID
      const names = c.record.Config.NetworkDisabled ? [] : attachedNetworkNames(c.hostConfig, c.record);
      const match = names.some((name) => {
        const id = helpers.networkId?.(name) ?? '';
        return nets.some((v) => v === name || (id !== '' && v !== '' && id.startsWith(v)));
      });
      if (!match) continue;
    }
    const publish = f.get('publish');
    if (publish && !portMatches(publish, s.Running ? Object.keys(c.hostConfig.PortBindings ?? {}) : []))
      continue;
    const expose = f.get('expose');
    if (expose && !portMatches(expose, Object.keys(r.Config.ExposedPorts ?? {}))) continue;
    const health = f.get('health');
    if (health && !health.includes(s.Health?.Status ?? 'none')) continue;
    const iso = f.get('isolation');
    if (iso && !iso.includes(c.hostConfig.Isolation || 'default')) continue;
    // a swarm task's container carries the label, empty (moby's executor; its `Managed` flag)
    const task = r.Config.Labels?.['com.docker.swarm.task'] !== undefined;
    if (isTask === true && !task) continue;
    if (isTask === false && task) continue;
    out.push(c);
  }
  return q.limit > 0 ? out.slice(0, q.limit) : out;
}
