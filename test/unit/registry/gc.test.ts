import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { runGc } from '../../../src/cli/registry-gc.command.js';
import { parseDigest, sha256Digest } from '../../../src/common/digest.js';
import { ConfigError, configFromObject } from '../../../src/registry/config.js';
import { collectGarbage } from '../../../src/registry/gc/gc.js';
import { parseManifest } from '../../../src/registry/manifests/validate.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import { paths } from '../../../src/registry/storage/paths.js';
import { RegistryStore } from '../../../src/registry/storage/store.js';

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';

interface Fixture {
  root: string;
  driver: FilesystemDriver;
  store: RegistryStore;
}

async function blob(
  f: Fixture,
  repo: string,
  content: string,
): Promise<{ digest: string; size: number; mediaType: string }> {
  const digest = sha256Digest(content);
  const d = parseDigest(digest);
  await f.driver.putContent(paths.blobData(d), content);
  await f.store.linkLayer(repo, d);
  return { digest, size: Buffer.byteLength(content), mediaType: 'application/vnd.oci.image.layer.v1.tar' };
}

async function manifest(
  f: Fixture,
  repo: string,
  doc: Record<string, unknown>,
  tag?: string,
): Promise<string> {
  const content = Buffer.from(JSON.stringify(doc));
  const info = parseManifest(String(doc.mediaType), content);
  await f.store.putManifest(repo, info, content);
  if (tag) await f.store.tag(repo, tag, parseDigest(info.digest));
  return info.digest;
}

async function image(
  f: Fixture,
  repo: string,
  name: string,
  tag?: string,
  extra: Record<string, unknown> = {},
) {
  const config = await blob(f, repo, `{"config":"${name}"}`);
  const layer = await blob(f, repo, `layer of ${name}`);
  const digest = await manifest(
    f,
    repo,
    {
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { ...config, mediaType: 'application/vnd.oci.image.config.v1+json' },
      layers: [layer],
      ...extra,
    },
    tag,
  );
  return { digest, config: config.digest, layer: layer.digest, size: Buffer.byteLength(JSON.stringify({})) };
}

async function exists(f: Fixture, digest: string): Promise<boolean> {
  return (await f.store.blobStat(parseDigest(digest))) !== undefined;
}

// Everything written by the fixture is "old" when the collector's clock is a minute ahead.
const later = () => Date.now() + 60_000;

describe('garbage collection', () => {
  let f: Fixture;
  beforeEach(() => {
    const root = mkdtempSync(join(tmpdir(), 'berth-gc-'));
    const driver = new FilesystemDriver(root);
    f = { root, driver, store: new RegistryStore(driver) };
  });
  afterEach(() => rmSync(f.root, { recursive: true, force: true }));

  it('a dry run lists the unreferenced blobs and deletes nothing', async () => {
    const kept = await image(f, 'app', 'one', 'latest');
    const orphan = await blob(f, 'app', 'orphan layer');
    const lines: string[] = [];
    const report = await collectGarbage(f.driver, {
      dryRun: true,
      gracePeriodMs: 0,
      now: later,
      log: (l) => lines.push(l),
    });
    assert.deepEqual(report.deletedBlobs, [orphan.digest]);
    assert.ok(lines.includes(`blob eligible for deletion: ${orphan.digest}`));
    assert.ok(lines.includes(`app: marking manifest ${kept.digest}`));
    assert.ok(await exists(f, orphan.digest));
    assert.ok((await f.driver.stat(paths.layerLink('app', parseDigest(orphan.digest)))).size > 0);
  });

  it('a real run deletes exactly the unreferenced blobs and their stale layer links', async () => {
    const a = await image(f, 'team/app', 'a', 'v1');
    const b = await image(f, 'other', 'b', 'v1');
    const childA = await image(f, 'multi', 'x');
    const childB = await image(f, 'multi', 'y');
    const index = await manifest(
      f,
      'multi',
      {
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [
          { mediaType: OCI_MANIFEST, digest: childA.digest, size: 10 },
          { mediaType: OCI_MANIFEST, digest: childB.digest, size: 10 },
        ],
      },
      'latest',
    );
    const orphan1 = await blob(f, 'team/app', 'orphan 1');
    const orphan2 = await blob(f, 'other', 'orphan 2');
    // A manifest deleted through the API leaves its blobs behind.
    const deleted = await image(f, 'other', 'gone');
    await f.store.deleteManifest('other', parseDigest(deleted.digest));

    const report = await collectGarbage(f.driver, { gracePeriodMs: 0, now: later });
    const expected = [orphan1.digest, orphan2.digest, deleted.digest, deleted.config, deleted.layer].sort();
    assert.deepEqual([...report.deletedBlobs].sort(), expected);
    for (const d of expected) assert.equal(await exists(f, d), false, d);
    for (const d of [
      a.digest,
      a.config,
      a.layer,
      b.digest,
      b.config,
      b.layer,
      index,
      childA.digest,
      childA.layer,
      childB.config,
    ]) {
      assert.ok(await exists(f, d), d);
    }
    assert.deepEqual(
      report.deletedLayerLinks.map((l) => `${l.repository}@${l.digest}`).sort(),
      [
        `other@${orphan2.digest}`,
        `other@${deleted.config}`,
        `other@${deleted.layer}`,
        `team/app@${orphan1.digest}`,
      ].sort(),
    );
    assert.equal(await f.store.repoHasBlob('team/app', parseDigest(orphan1.digest)), false);
    assert.equal(await f.store.repoHasBlob('team/app', parseDigest(a.layer)), true);
    // A second run finds nothing more.
    const again = await collectGarbage(f.driver, { gracePeriodMs: 0, now: later });
    assert.deepEqual(again.deletedBlobs, []);
  });

  it('keeps blobs younger than the grace period, and those of uploads in flight', async () => {
    const orphan = await blob(f, 'app', 'young orphan');
    let report = await collectGarbage(f.driver, {});
    assert.deepEqual(report.deletedBlobs, []);
    assert.deepEqual(report.keptYoung, [orphan.digest]);
    // An upload that started before the blob was written holds the cutoff back to its start.
    const started = new Date(Date.now() - 3_600_000);
    await f.driver.putContent(paths.uploadStartedAt('app', 'u1'), started.toISOString());
    await f.driver.putContent(paths.uploadData('app', 'u1'), 'partial');
    report = await collectGarbage(f.driver, { gracePeriodMs: 0, now: later });
    assert.deepEqual(report.deletedBlobs, []);
    assert.ok(report.cutoff.getTime() <= started.getTime());
    await f.driver.delete(paths.uploadDir('app', 'u1'));
    report = await collectGarbage(f.driver, { gracePeriodMs: 0, now: later });
    assert.deepEqual(report.deletedBlobs, [orphan.digest]);
  });

  it('--delete-untagged removes unreachable manifests, keeping index children and referrers of tagged images', async () => {
    const tagged = await image(f, 'app', 'tagged', 'latest');
    const untagged = await image(f, 'app', 'untagged');
    const sig = await image(f, 'app', 'signature of tagged', undefined, {
      subject: { mediaType: OCI_MANIFEST, digest: tagged.digest, size: 1 },
    });
    const danglingSig = await image(f, 'app', 'signature of untagged', undefined, {
      subject: { mediaType: OCI_MANIFEST, digest: untagged.digest, size: 1 },
    });
    const child = await image(f, 'app', 'child');
    const index = await manifest(
      f,
      'app',
      {
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [{ mediaType: OCI_MANIFEST, digest: child.digest, size: 1 }],
      },
      'multi',
    );

    const dry = await collectGarbage(f.driver, {
      deleteUntagged: true,
      dryRun: true,
      gracePeriodMs: 0,
      now: later,
    });
    assert.deepEqual(
      dry.deletedManifests.map((m) => m.digest).sort(),
      [untagged.digest, danglingSig.digest].sort(),
    );
    assert.ok(dry.deletedBlobs.includes(untagged.layer));
    assert.ok(await f.store.getManifest('app', parseDigest(untagged.digest)));

    const report = await collectGarbage(f.driver, { deleteUntagged: true, gracePeriodMs: 0, now: later });
    assert.deepEqual(
      report.deletedManifests.map((m) => m.digest).sort(),
      [untagged.digest, danglingSig.digest].sort(),
    );
    assert.equal(await f.store.getManifest('app', parseDigest(untagged.digest)), undefined);
    assert.equal(await f.store.getManifest('app', parseDigest(danglingSig.digest)), undefined);
    for (const d of [
      untagged.digest,
      untagged.layer,
      untagged.config,
      danglingSig.digest,
      danglingSig.layer,
    ]) {
      assert.equal(await exists(f, d), false, d);
    }
    for (const d of [tagged.digest, tagged.layer, sig.digest, sig.layer, index, child.digest, child.layer]) {
      assert.ok(await exists(f, d), d);
    }
    assert.deepEqual(
      (await f.store.referrers('app', parseDigest(tagged.digest))).map((r) => r.digest),
      [sig.digest],
    );
    assert.deepEqual(await f.store.referrers('app', parseDigest(untagged.digest)), []);
  });

  it('runGc: flags, config file, exit codes', async () => {
    await image(f, 'app', 'x', 'latest');
    const orphan = await blob(f, 'app', 'cli orphan');
    const config = join(f.root, 'config.yml');
    await f.driver.putContent(
      '/config.yml',
      `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${f.root}\n`,
    );
    const out: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string) => {
      out.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    try {
      assert.equal(await runGc(['--config', config, '--dry-run', '--grace-period', '0s']), 0);
      assert.ok(out.join('').includes('1 blobs and 0 manifests eligible for deletion'));
      assert.ok(await exists(f, orphan.digest));
      assert.equal(await runGc(['--config', config, '--grace-period', '0s', '--quiet']), 0);
      assert.equal(await exists(f, orphan.digest), false);
      const orphan2 = await blob(f, 'app', 'cli orphan 2');
      // Fresh blobs stay with the default grace period.
      assert.equal(await runGc(['--root', f.root, '--quiet']), 0);
      assert.ok(await exists(f, orphan2.digest));
      out.length = 0;
      assert.equal(await runGc(['--root', f.root, '--json', '--dry-run', '--grace-period', '0s']), 0);
      const report = JSON.parse(out.join('')) as {
        dryRun: boolean;
        deletedBlobs: string[];
        markedBlobs: number;
      };
      assert.equal(report.dryRun, true);
      assert.deepEqual(report.deletedBlobs, [orphan2.digest]);
      assert.equal(report.markedBlobs, 3);
    } finally {
      process.stdout.write = write;
    }
    const err = process.stderr.write.bind(process.stderr);
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      assert.equal(await runGc(['--bogus']), 2);
      assert.equal(await runGc([]), 2);
      assert.equal(await runGc(['--root', f.root, '--grace-period', 'soon']), 2);
    } finally {
      process.stderr.write = err;
    }
  });
});

describe('berth.gc configuration', () => {
  it('reads the schedule, the grace period and the admins (one name or a list)', () => {
    assert.deepEqual(configFromObject({ berth: { gc: { interval: '10s', admins: 'root' } } }).berth.gc, {
      intervalMs: 10_000,
      gracePeriodMs: 3_600_000,
      deleteUntagged: false,
      endpoint: true,
      admins: ['root'],
    });
    assert.deepEqual(configFromObject({ berth: { gc: { admins: ['a', 'b'] } } }).berth.gc?.admins, [
      'a',
      'b',
    ]);
    assert.equal(configFromObject({}).berth.gc, undefined);
    assert.throws(() => configFromObject({ berth: { gc: { admins: [{ name: 'x' }] } } }), ConfigError);
  });
});
