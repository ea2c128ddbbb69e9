import type { Ulimit } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import type { ProcessLimit } from './host.js';
import type { OciRlimit } from './spec.types.js';

/** The ulimit names Docker accepts (go-units). */
export const ulimitNames = new Set([
  'as',
  'core',
  'cpu',
  'data',
  'fsize',
  'locks',
  'memlock',
  'msgqueue',
  'nice',
  'nofile',
  'nproc',
  'rss',
  'rtprio',
  'rttime',
  'sigpending',
  'stack',
]);

/** What dockerd's containers get by default (containerd's LimitNOFILE). */
export const defaultNofile = 1048576;

/** An OCI rlimit; `-1` means unlimited (written as RLIM_INFINITY by specToJson). */
export type Rlimit = OciRlimit;

const isUnlimited = (v: number) => v < 0;
const min = (a: number, b: number) => (isUnlimited(a) ? b : isUnlimited(b) ? a : Math.min(a, b));

/**
 * process.rlimits: the default RLIMIT_NOFILE plus HostConfig.Ulimits, each limited to the daemon's own
 * hard limit (a runtime without CAP_SYS_RESOURCE cannot raise it; runc would fail). Limits that had
 * to be lowered are reported in `warnings`.
 */
export function planRlimits(
  ulimits: readonly Ulimit[] | null | undefined,
  limits: Map<string, ProcessLimit>,
  warnings: string[],
): Rlimit[] {
  const wanted = new Map<string, { soft: number; hard: number; explicit: boolean }>();
  wanted.set('nofile', { soft: defaultNofile, hard: defaultNofile, explicit: false });
  for (const u of ulimits ?? []) {
    const name = String(u.Name).toLowerCase();
    if (!ulimitNames.has(name)) throw invalidParameter(`invalid ulimit type: ${u.Name}`);
    const soft = Number(u.Soft);
    const hard = Number(u.Hard);
    if (!isUnlimited(soft) && !isUnlimited(hard) && soft > hard) {
      throw invalidParameter(`ulimit soft limit must be less than or equal to hard limit: ${soft} > ${hard}`);
    }
    wanted.set(name, { soft, hard, explicit: true });
  }
  const out: Rlimit[] = [];
  for (const [name, w] of wanted) {
    const own = limits.get(name);
    let { soft, hard } = w;
    if (own && !isUnlimited(own.hard)) {
      const h = min(hard, own.hard);
      const s = min(soft, h);
      if (w.explicit && (h !== hard || s !== soft)) {
        warnings.push(`ulimit ${name}=${soft}:${hard} lowered to ${s}:${h}, the daemon's own hard limit`);
      }
      soft = s;
      hard = h;
    }
    out.push({ type: `RLIMIT_${name.toUpperCase()}`, soft, hard });
  }
  return out;
}
