import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const repoRoot = resolve(import.meta.dirname, '../..');

/**
 * The folder of real dockerd responses (shared/reference). CI checks the repository out with
 * shared/ beside it; a developer's checkout has it at ../shared as well.
 */
export function referenceDir(): string {
  const beside = join(repoRoot, '..', 'shared', 'reference');
  if (existsSync(beside)) return beside;
  throw new Error(`shared/reference not found beside the repository (looked in ${beside})`);
}

export function referenceJson<T = unknown>(name: string): T {
  return JSON.parse(readFileSync(join(referenceDir(), name), 'utf8')) as T;
}
