import type { StorageDriver } from './driver.js';
import { REPOSITORIES } from './paths.js';
import type { RegistryStore } from './store.js';

/**
 * What a killed registry leaves behind, and its sweep. Every write is atomic (a temporary file,
 * then a rename), so a process killed in the middle leaves temporary files (`link.<rand>.tmp`,
 * blob `data.<rand>.tmp`), which are never listed or served, and at worst a tag whose
 * `current/link` was never written, which is never listed (tags/list shows only tags that
 * resolve). The sweep deletes the temporary files older than a cutoff (younger ones may be
 * another registry's writes in progress over the same storage), the directories that leaves
 * empty, and the tags those files belonged to when they do not resolve.
 */
export interface LeftoverReport {
  /** Storage paths of the temporary files deleted (or, dry run, that would be). */
  temporary: string[];
  /** Tags removed because a killed write left them without a manifest. */
  deadTags: Array<{ repository: string; tag: string }>;
}

/** A temporary file is the write of a live process for a few milliseconds; older is a leftover. */
export const LEFTOVER_AGE_MS = 60_000;

const TAG_PATH = /^(.+)\/_manifests\/tags\/([^/]+)\//;

export async function sweepLeftovers(
  driver: StorageDriver,
  store: RegistryStore,
  before: number,
  dryRun = false,
  signal?: AbortSignal,
): Promise<LeftoverReport> {
  const report: LeftoverReport = { temporary: [], deadTags: [] };
  if (!driver.sweepTemporary) return report;
  report.temporary = await driver.sweepTemporary(before, dryRun, signal);
  const tags = new Map<string, { repository: string; tag: string }>();
  for (const path of report.temporary) {
    if (!path.startsWith(`${REPOSITORIES}/`)) continue;
    const m = TAG_PATH.exec(path.slice(REPOSITORIES.length + 1));
    if (m?.[1] && m[2]) tags.set(`${m[1]}:${m[2]}`, { repository: m[1], tag: m[2] });
  }
  for (const t of tags.values()) {
    if (signal?.aborted) break;
    if (await store.tagTarget(t.repository, t.tag)) continue;
    report.deadTags.push(t);
    if (!dryRun) await store.untag(t.repository, t.tag);
  }
  return report;
}
