import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { BuildCacheStore } from '../../../../src/engine/build/build-cache.js';
import type { BuildImagePort } from '../../../../src/engine/build/builder.ports.js';
import { CacheMounts } from '../../../../src/engine/build/cache-mounts.js';
import { cacheItems, pruneCache } from '../../../../src/engine/build/cache-prune.js';
import { LocalSources } from '../../../../src/engine/build/context/local-sources.js';
import type { ImageRecord } from '../../../../src/engine/images/images.types.js';

/** Images by ID (a chain base ← mid ← top, top tagged), and what prune removed. */
function fakeImages(): { port: BuildImagePort; removed: string[] } {
  const record = (id: string, parent: string, size: number, tags: string[] = []): ImageRecord => ({
    id,
    parent,
    size,
    repoTags: tags,
    repoDigests: [],
    chainId: null,
    created: '',
    config: { architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] } },
  });
  const images = new Map<string, ImageRecord>([
    ['base', record('base', '', 100)],
    ['mid', record('mid', 'base', 150)],
    ['top', record('top', 'mid', 160, ['app:1'])],
    ['other', record('other', 'base', 130)],
  ]);
  const removed: string[] = [];
  const port = {
    get: async (id: string) => images.get(id),
    list: async () => [...images.values()],
    remove: async (id: string) => {
      if ([...images.values()].some((i) => i.parent === id)) throw new Error('conflict: has children');
      images.delete(id);
      removed.push(id);
      return [];
    },
  } as unknown as BuildImagePort;
  return { port, removed };
}

describe('build cache prune', () => {
  it('lists records with their own layer size, prunes by filter, keeps tagged ones without all', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-prune-'));
    try {
      const cache = new BuildCacheStore(dir);
      await cache.init();
      const mounts = new CacheMounts(dir);
      await mounts.init();
      const { port, removed } = fakeImages();
      await cache.put('k-mid', 'mid', 'base', '/bin/sh -c make');
      await cache.put('k-top', 'top', 'mid', '/bin/sh -c #(nop)  CMD ["app"]');
      await cache.put('k-other', 'other', 'base', '/bin/sh -c echo other');
      const held = await mounts.acquire('/root/.cache', 'shared', {});
      await held.release();
      const deps = {
        cache,
        cacheMounts: mounts,
        sources: new LocalSources(join(dir, 'sources')),
        images: port,
      };

      const items = await cacheItems(deps);
      assert.deepEqual(
        items.map((i) => [i.Type, i.Size]),
        [
          ['regular', 50],
          ['regular', 10],
          ['regular', 30],
          ['exec.cachemount', 0],
        ],
      );
      // a filter on the description: only that record, its image goes (untagged, no child)
      const one = await pruneCache(deps, {
        all: false,
        filters: new Map([['description', ['echo other']]]),
        reservedSpace: 0,
        maxUsedSpace: 0,
      });
      assert.equal(one.CachesDeleted?.length, 1);
      assert.equal(one.SpaceReclaimed, 30);
      assert.deepEqual(removed, ['other']);
      // without all, the record of a tagged image stays; mid's image has a child and stays too
      const rest = await pruneCache(deps, {
        all: false,
        filters: new Map(),
        reservedSpace: 0,
        maxUsedSpace: 0,
      });
      assert.equal(rest.CachesDeleted?.length, 2);
      assert.deepEqual(removed, ['other']);
      assert.deepEqual(
        cache.list().map((r) => r.imageId),
        ['top'],
      );
      const all = await pruneCache(deps, {
        all: true,
        filters: new Map(),
        reservedSpace: 0,
        maxUsedSpace: 0,
      });
      assert.equal(all.CachesDeleted?.length, 1);
      assert.deepEqual(await cacheItems(deps), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps the most recently used records within reserved-space, and skips what is newer than until', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-prune-'));
    try {
      const cache = new BuildCacheStore(dir);
      await cache.init();
      const mounts = new CacheMounts(dir);
      await mounts.init();
      const { port } = fakeImages();
      const deps = {
        cache,
        cacheMounts: mounts,
        sources: new LocalSources(join(dir, 'sources')),
        images: port,
      };
      await cache.put('k-mid', 'mid', 'base', 'mid');
      await cache.put('k-other', 'other', 'base', 'other');
      const recent = await pruneCache(deps, {
        all: true,
        filters: new Map([['until', ['1h']]]),
        reservedSpace: 0,
        maxUsedSpace: 0,
      });
      assert.equal(recent.CachesDeleted, null);
      const old = cache.get('k-mid');
      if (old) old.lastUsedAt = new Date(Date.now() - 60_000).toISOString();
      const kept = await pruneCache(deps, {
        all: true,
        filters: new Map(),
        reservedSpace: 30,
        maxUsedSpace: 0,
      });
      assert.equal(kept.SpaceReclaimed, 50);
      assert.deepEqual(
        cache.list().map((r) => r.key),
        ['k-other'],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
