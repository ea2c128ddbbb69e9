import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** Real dockerd responses the shape tests compare with (test/fixtures/dockerd/README.md says whence). */
export const referenceDir = resolve(import.meta.dirname, '../fixtures/dockerd');

export function referenceJson<T = unknown>(name: string): T {
  return JSON.parse(readFileSync(join(referenceDir, name), 'utf8')) as T;
}
