// Garbage collection inside the serving registry (`berth.gc`): scheduled every second while
// pushes, pulls and deletes go on; afterwards every acknowledged manifest is whole and every
// blob no manifest references is gone. The admin endpoint and the storage lock.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { acquireGcLock } from '../../../src/registry/gc/lock.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import {
  errorCodes,
  http,
  OCI_MANIFEST,
  pushBlob,
  pushImage,
  requireTool,
  sha256,
  startTestRegistry,
  type TestRegistry,
  tempDir,
} from '../../helpers/registry.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every blob digest with data in the storage. */
async function storedBlobs(root: string): Promise<Set<string>> {
  const out = new Set<string>();
  const base = join(root, 'docker/registry/v2/blobs/sha256');
  for (const prefix of await readdir(base).catch(() => [] as string[])) {
    for (const hex of await readdir(join(base, prefix)).catch(() => [] as string[])) {
      const files = await readdir(join(base, prefix, hex)).catch(() => [] as string[]);
      if (files.includes('data')) out.add(`sha256:${hex}`);
    }
  }
  return out;
}

/** POST /berth/gc until it runs (a scheduled run may be going on: 503), bounded. */
async function gcNow(reg: TestRegistry, headers: Record<string, string> = {}) {
  for (let i = 0; i < 100; i++) {
    const res = await http('POST', `${reg.url}/berth/gc`, { headers });
    if (res.status !== 503) return res;
    await sleep(100);
  }
  throw new Error('garbage collection stayed busy');
}

describe('online garbage collection', () => {
  const running: TestRegistry[] = [];
  after(async () => {
    for (const r of running) await r.stop();
  });

  it('runs every second during concurrent pushes, pulls and deletes without breaking an acknowledged manifest', async () => {
    const reg = await startTestRegistry({ berth: { gc: { interval: '1s', graceperiod: '2s' } } });
    running.push(reg);
    interface Pushed {
      name: string;
      digest: string;
      blobs: string[];
    }
    const live = new Map<string, Pushed>();
    const deleted: Pushed[] = [];
    const orphans: string[] = [];
    const until = Date.now() + 6_000;
    let pushes = 0;
    const worker = async (w: number) => {
      for (let i = 0; Date.now() < until; i++) {
        const name = `gc/w${w}`;
        const img = await pushImage(reg.url, name, `t${i}`, {
          layer: `worker ${w} layer ${i} ${Math.random()}`,
        });
        pushes++;
        live.set(img.digest, { name, digest: img.digest, blobs: [img.digest, img.layer, img.config] });
        const got = await http('GET', `${reg.url}/v2/${name}/manifests/t${i}`, {
          headers: { Accept: OCI_MANIFEST },
        });
        assert.equal(got.status, 200);
        if (i % 3 === 2) {
          // Delete an earlier manifest of this worker (its blobs become garbage, the config is shared).
          const victim = [...live.values()].find((p) => p.name === name && p.digest !== img.digest);
          if (victim) {
            const del = await http('DELETE', `${reg.url}/v2/${name}/manifests/${victim.digest}`);
            assert.equal(del.status, 202);
            live.delete(victim.digest);
            deleted.push(victim);
          }
        }
        if (i % 4 === 0) orphans.push(await pushBlob(reg.url, name, `orphan ${w} ${i} ${Math.random()}`));
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    assert.ok(pushes > 8, `only ${pushes} pushes`);
    assert.ok((reg.gc?.runs ?? 0) >= 3, `only ${reg.gc?.runs} scheduled runs`);

    // Every acknowledged manifest whole right away (the runs during the workload took nothing of it).
    for (const p of live.values()) {
      assert.equal(
        (
          await http('HEAD', `${reg.url}/v2/${p.name}/manifests/${p.digest}`, {
            headers: { Accept: OCI_MANIFEST },
          })
        ).status,
        200,
      );
      for (const b of p.blobs.slice(1)) {
        const blob = await http('GET', `${reg.url}/v2/${p.name}/blobs/${b}`);
        assert.equal(blob.status, 200, `${p.name} ${b}`);
        assert.equal(sha256(blob.body), b);
      }
    }
    // Past the grace period, one more run: what no manifest references is gone.
    await sleep(2_200);
    const res = await gcNow(reg);
    assert.equal(res.status, 200, res.text());
    const referenced = new Set([...live.values()].flatMap((p) => p.blobs));
    const stored = await storedBlobs(reg.root);
    assert.deepEqual(
      [...stored].filter((d) => !referenced.has(d)),
      [],
      'unreferenced blobs left',
    );
    assert.deepEqual(
      [...referenced].filter((d) => !stored.has(d)),
      [],
      'referenced blobs lost',
    );
    assert.ok(deleted.length > 0 && orphans.length > 0);
    for (const d of orphans) assert.equal(stored.has(d), false);
  });

  it('POST /berth/gc needs admin credentials with auth on; a second collector on the storage is refused', async () => {
    requireTool('htpasswd', 'apt-get install apache2-utils');
    const dir = await tempDir('berth-gc-auth-');
    const users = join(dir, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'admin', 'admin-pw'], { stdio: 'ignore' });
    const reg = await startTestRegistry({
      auth: { htpasswd: { realm: 'gc', path: users } },
      berth: { gc: { graceperiod: '0s' } },
    });
    running.push(reg);
    const anonymous = await http('POST', `${reg.url}/berth/gc`);
    assert.equal(anonymous.status, 401);
    assert.deepEqual(errorCodes(anonymous), ['UNAUTHORIZED']);
    const admin = { Authorization: `Basic ${Buffer.from('admin:admin-pw').toString('base64')}` };
    const ok = await gcNow(reg, admin);
    assert.equal(ok.status, 200);
    assert.equal(typeof (ok.json() as { deletedBlobs: number }).deletedBlobs, 'number');
    // Another process holds the storage's lock (as `berth registry gc` would): 503, then it runs.
    const lock = await acquireGcLock(new FilesystemDriver(reg.root));
    const busy = await http('POST', `${reg.url}/berth/gc`, { headers: admin });
    assert.equal(busy.status, 503);
    assert.deepEqual(errorCodes(busy), ['UNAVAILABLE']);
    await lock.release();
    assert.equal((await http('POST', `${reg.url}/berth/gc`, { headers: admin })).status, 200);
    assert.equal((await http('GET', `${reg.url}/berth/gc`, { headers: admin })).status, 405);
  });
});
