import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { registryBundle } from '../../../src/cli/registry-bundle.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-bundle-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A dist/ with tsc's registry.command.js and, when asked, a bundle; mtimes in seconds. */
async function dist(
  name: string,
  compiledAt: number | undefined,
  bundledAt: number | undefined,
): Promise<URL> {
  const root = join(dir, name);
  await mkdir(join(root, 'cli'), { recursive: true });
  await mkdir(join(root, 'registry-bundle'), { recursive: true });
  const tree = join(root, 'cli/registry.command.js');
  const bundle = join(root, 'registry-bundle/registry.command.js');
  if (compiledAt !== undefined) {
    await writeFile(tree, '');
    await utimes(tree, compiledAt, compiledAt);
  }
  if (bundledAt !== undefined) {
    await writeFile(bundle, '');
    await utimes(bundle, bundledAt, bundledAt);
  }
  return pathToFileURL(`${join(root, 'cli')}/`);
}

describe('registryBundle: which registry command berth registry loads', () => {
  it('the bundle when the build made it after the compile (or in the same second)', async () => {
    const cli = await dist('fresh', 1000, 1001);
    assert.equal(registryBundle(cli)?.href, new URL('../registry-bundle/registry.command.js', cli).href);
    assert.ok(registryBundle(await dist('same', 1000, 1000)));
  });

  it('the module tree when a later compile made the bundle stale', async () => {
    assert.equal(registryBundle(await dist('stale', 1002, 1001)), undefined);
  });

  it('the module tree when there is no bundle, or no compiled tree (run from src)', async () => {
    assert.equal(registryBundle(await dist('unbundled', 1000, undefined)), undefined);
    assert.equal(registryBundle(await dist('src', undefined, 1000)), undefined);
  });
});
