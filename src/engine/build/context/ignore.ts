import { readdir, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { PatternMatcher } from './patterns.js';

/**
 * Remove from a received context what its `.dockerignore` excludes, as the docker CLI leaves it
 * out of the tar it sends: an excluded directory goes whole unless an exception (`!…`) may take
 * something below it back, then only what stays excluded goes (and the directory, when nothing
 * is left in it).
 */
export async function applyIgnore(root: string, matcher: PatternMatcher, rel = ''): Promise<void> {
  const entries = await readdir(join(root, rel), { withFileTypes: true });
  for (const e of entries) {
    const path = rel ? `${rel}/${e.name}` : e.name;
    const excluded = matcher.matches(path);
    if (e.isDirectory()) {
      if (excluded && !matcher.hasExclusions) {
        await rm(join(root, path), { recursive: true, force: true });
        continue;
      }
      await applyIgnore(root, matcher, path);
      if (excluded) await rmdir(join(root, path)).catch(() => undefined);
    } else if (excluded) {
      await rm(join(root, path), { force: true });
    }
  }
}
