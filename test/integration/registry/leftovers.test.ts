/**
 * What a registry killed in the middle of a write leaves behind (temporary files of atomic
 * writes, a tag directory without its current link) is never listed or served, and is swept.
 */
import assert from 'node:assert/strict';
import { mkdir, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { collectGarbage } from '../../../src/registry/gc/gc.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import {
  ALL_MANIFEST_TYPES,
  http,
  pushImage,
  sha256,
  startTestRegistry,
  type TestRegistry,
  tempDir,
} from '../../helpers/registry.js';

const V2 = 'docker/registry/v2';
const tagDir = (root: string, repo: string, tag: string) =>
  join(root, V2, 'repositories', repo, '_manifests/tags', tag);

async function put(path: string, content: string, ageMs = 0): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
  if (ageMs > 0) {
    const t = new Date(Date.now() - ageMs);
    await utimes(path, t, t);
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function tags(
  base: string,
  repo: string,
  query = '',
): Promise<{ tags: string[]; link: string | null }> {
  const res = await http('GET', `${base}/v2/${repo}/tags/list${query}`);
  assert.equal(res.status, 200, res.text());
  return { tags: (res.json() as { tags: string[] }).tags, link: res.headers.get('link') };
}

/**
 * Leftovers of writes killed at each step of a manifest PUT and a blob copy, `ageMs` old:
 * a tag with only `current/link.<rand>.tmp`, a tag with only its index link, a tag whose current
 * link names a manifest that is not there, a revision link's temporary file, a blob directory
 * holding only `data.<rand>.tmp`.
 */
async function leaveLeftovers(root: string, repo: string, digest: string, ageMs: number, prefix: string) {
  const hex = digest.slice(7);
  const missing = sha256(`no such manifest ${prefix}`);
  await put(join(tagDir(root, repo, `${prefix}-halfway`), 'current/link.0123456789ab.tmp'), digest, ageMs);
  await put(join(tagDir(root, repo, `${prefix}-indexonly`), `index/sha256/${hex}/link`), digest, ageMs);
  await put(join(tagDir(root, repo, `${prefix}-dangling`), 'current/link'), missing, ageMs);
  const orphanHex = sha256(`orphan revision ${prefix}`).slice(7);
  await put(
    join(root, V2, 'repositories', repo, `_manifests/revisions/sha256/${orphanHex}/link.0123456789ab.tmp`),
    `sha256:${orphanHex}`,
    ageMs,
  );
  const blobHex = sha256(`half-copied blob ${prefix}`).slice(7);
  await put(
    join(root, V2, 'blobs/sha256', blobHex.slice(0, 2), blobHex, 'data.0123456789ab.tmp'),
    'half a blob',
    ageMs,
  );
  return { orphanHex, blobHex, missing };
}

let reg: TestRegistry;
before(async () => {
  reg = await startTestRegistry();
});
after(async () => {
  await reg.stop();
});

describe('a tag is listed only when it resolves', () => {
  it('tags left by killed PUTs are neither listed nor served; pagination counts only live tags', async () => {
    const image = await pushImage(reg.url, 'left/over', 'good');
    const { blobHex } = await leaveLeftovers(reg.root, 'left/over', image.digest, 0, 'x');
    assert.deepEqual((await tags(reg.url, 'left/over')).tags, ['good']);
    for (const tag of ['x-halfway', 'x-indexonly', 'x-dangling']) {
      for (const method of ['GET', 'HEAD']) {
        const res = await http(method, `${reg.url}/v2/left/over/manifests/${tag}`, {
          headers: { Accept: ALL_MANIFEST_TYPES },
        });
        assert.equal(res.status, 404, `${method} ${tag}`);
      }
    }
    const blob = await http('HEAD', `${reg.url}/v2/left/over/blobs/sha256:${blobHex}`);
    assert.equal(blob.status, 404);

    // Dead tags sort between live ones: pages still hold n live tags, Link only when more remain.
    await pushImage(reg.url, 'left/over', 'zz');
    await pushImage(reg.url, 'left/over', 'a');
    assert.deepEqual((await tags(reg.url, 'left/over')).tags, ['a', 'good', 'zz']);
    const first = await tags(reg.url, 'left/over', '?n=2');
    assert.deepEqual(first.tags, ['a', 'good']);
    assert.match(first.link ?? '', /last=good&n=2/);
    const second = await tags(reg.url, 'left/over', '?n=2&last=good');
    assert.deepEqual(second.tags, ['zz']);
    assert.equal(second.link, null);
    const afterLast = await tags(reg.url, 'left/over', '?n=1&last=good');
    assert.deepEqual(afterLast.tags, ['zz']);
    assert.equal(afterLast.link, null);
  });

  it('a repository whose only tag is dead lists no tags', async () => {
    const image = await pushImage(reg.url, 'left/only', 'keep');
    await leaveLeftovers(reg.root, 'left/only', image.digest, 0, 'y');
    await rm(tagDir(reg.root, 'left/only', 'keep'), { recursive: true });
    assert.deepEqual((await tags(reg.url, 'left/only')).tags, []);
  });
});

describe('leftovers are swept', () => {
  it('at start: those older than a minute go with the directories they leave empty; younger ones stay', async () => {
    const root = await tempDir('berth-leftovers-');
    const first = await startTestRegistry({}, {}, root);
    const image = await pushImage(first.url, 'swept/repo', 'good');
    await first.stop(true);
    const HOUR = 3_600_000;
    const old = await leaveLeftovers(root, 'swept/repo', image.digest, HOUR, 'old');
    const young = await leaveLeftovers(root, 'swept/repo', image.digest, 0, 'young');
    const reg2 = await startTestRegistry({}, {}, root);
    try {
      const report = await reg2.leftovers;
      assert.equal(report.temporary.length, 3, JSON.stringify(report));
      assert.deepEqual(report.deadTags, [{ repository: 'swept/repo', tag: 'old-halfway' }]);
      const repoDir = join(root, V2, 'repositories/swept/repo');
      assert.equal(await exists(tagDir(root, 'swept/repo', 'old-halfway')), false, 'dead tag');
      assert.equal(await exists(join(repoDir, `_manifests/revisions/sha256/${old.orphanHex}`)), false);
      assert.equal(await exists(join(root, V2, 'blobs/sha256', old.blobHex.slice(0, 2), old.blobHex)), false);
      // The fan-out directories and the collections stay.
      assert.equal(await exists(join(root, V2, 'blobs/sha256', old.blobHex.slice(0, 2))), true);
      assert.equal(await exists(join(repoDir, '_manifests/revisions/sha256')), true);
      // Young ones may be another registry's writes in progress: kept, and still not listed.
      assert.equal(
        await exists(join(tagDir(root, 'swept/repo', 'young-halfway'), 'current/link.0123456789ab.tmp')),
        true,
      );
      assert.equal(
        await exists(join(root, V2, 'blobs/sha256', young.blobHex.slice(0, 2), young.blobHex)),
        true,
      );
      assert.deepEqual((await tags(reg2.url, 'swept/repo')).tags, ['good']);
      const got = await http('GET', `${reg2.url}/v2/swept/repo/manifests/good`, {
        headers: { Accept: ALL_MANIFEST_TYPES },
      });
      assert.equal(got.status, 200);
      assert.equal(got.headers.get('docker-content-digest'), image.digest);
    } finally {
      await reg2.stop();
    }
  });

  it('by garbage collection, with its cutoff; a dry run only lists them', async () => {
    const root = await tempDir('berth-leftovers-gc-');
    try {
      const first = await startTestRegistry({}, {}, root);
      const image = await pushImage(first.url, 'gc/repo', 'good');
      await first.stop(true);
      // a second old: with no grace period, a file written in the very millisecond the collection
      // starts (its mtime has a fraction of a millisecond more) would still count as young
      await leaveLeftovers(root, 'gc/repo', image.digest, 1000, 'gc');
      const driver = new FilesystemDriver(root);
      const dry = await collectGarbage(driver, { dryRun: true, gracePeriodMs: 0 });
      assert.equal(dry.leftovers.temporary.length, 3);
      assert.deepEqual(dry.leftovers.deadTags, [{ repository: 'gc/repo', tag: 'gc-halfway' }]);
      assert.equal(await exists(join(tagDir(root, 'gc/repo', 'gc-halfway'), 'current')), true);
      const report = await collectGarbage(driver, { gracePeriodMs: 0 });
      assert.equal(report.leftovers.temporary.length, 3);
      const left: string[] = [];
      const walk = async (dir: string): Promise<void> => {
        for (const e of await readdir(dir, { withFileTypes: true })) {
          if (e.isDirectory()) await walk(join(dir, e.name));
          else if (e.name.endsWith('.tmp')) left.push(join(dir, e.name));
        }
      };
      await walk(join(root, V2));
      assert.deepEqual(left, []);
      assert.equal(await exists(tagDir(root, 'gc/repo', 'gc-halfway')), false);
      assert.equal(await exists(tagDir(root, 'gc/repo', 'good')), true);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
