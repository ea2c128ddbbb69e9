// Garbage collection inside the serving registry (`berth.gc`): scheduled every second while
// pushes, pulls and deletes go on; afterwards every acknowledged manifest is whole and every
// blob no manifest references is gone. The admin endpoint and the storage lock.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ensureSigningKeyPair } from '../../../src/registry/auth/keys.js';
import { acquireGcLock } from '../../../src/registry/gc/lock.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import { eventually } from '../../helpers/eventually.js';
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
import { startRegistryOnRoot } from '../../helpers/registry-process.js';

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
    // runs while the pushes went on; the schedule goes on after them (on a loaded machine a run
    // over a busy store can take most of its second, so the third may come after the pushes)
    assert.ok((reg.gc?.runs ?? 0) >= 1, 'no scheduled run during the pushes');
    await eventually('three scheduled runs', () => (reg.gc?.runs ?? 0) >= 3, 15_000, 100);

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
    execFileSync('htpasswd', ['-bB', '-C', '4', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
    const reg = await startTestRegistry({
      auth: { htpasswd: { realm: 'gc', path: users } },
      berth: { gc: { graceperiod: '0s', admins: ['admin'] } },
    });
    running.push(reg);
    const anonymous = await http('POST', `${reg.url}/berth/gc`);
    assert.equal(anonymous.status, 401);
    assert.deepEqual(errorCodes(anonymous), ['UNAUTHORIZED']);
    // A valid user who is not among berth.gc.admins may push and pull, not collect.
    const alice = { Authorization: `Basic ${Buffer.from('alice:alice-pw').toString('base64')}` };
    assert.equal((await http('GET', `${reg.url}/v2/`, { headers: alice })).status, 200);
    const notAdmin = await http('POST', `${reg.url}/berth/gc`, { headers: alice });
    assert.equal(notAdmin.status, 403);
    assert.deepEqual(errorCodes(notAdmin), ['DENIED']);
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

  it('POST /berth/gc with token auth: a token that grants registry:gc:* runs it, others are refused', async () => {
    requireTool('htpasswd', 'apt-get install apache2-utils');
    const dir = await tempDir('berth-gc-token-');
    const users = join(dir, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'admin', 'admin-pw'], { stdio: 'ignore' });
    execFileSync('htpasswd', ['-bB', '-C', '4', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
    const keys = await ensureSigningKeyPair(join(dir, 'keys'));
    const reg = await startTestRegistry({
      auth: { htpasswd: { realm: 'gc-token', path: users } },
      berth: {
        gc: { graceperiod: '0s' },
        tokenserver: {
          key: keys.keyPath,
          certificate: keys.certPath,
          service: 'gc-it',
          issuer: 'gc-it-issuer',
          acl: [
            { account: 'admin', type: 'registry', name: 'gc', actions: ['*'] },
            { account: '*', name: '${account}/*', actions: ['*'] },
          ],
        },
      },
    });
    running.push(reg);
    const challenge = await http('POST', `${reg.url}/berth/gc`);
    assert.equal(challenge.status, 401);
    assert.equal(
      challenge.headers.get('www-authenticate'),
      `Bearer realm="${reg.url}/auth/token",service="gc-it",scope="registry:gc:*"`,
    );
    const token = async (user: string, password: string, scope: string) => {
      const res = await http('GET', `${reg.url}/auth/token?service=gc-it&scope=${scope}`, {
        headers: { Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` },
      });
      assert.equal(res.status, 200);
      return { Authorization: `Bearer ${(res.json() as { token: string }).token}` };
    };
    // alice's token for the scope grants nothing of it (her own repositories only).
    const alice = await token('alice', 'alice-pw', 'registry:gc:*');
    const denied = await http('POST', `${reg.url}/berth/gc`, { headers: alice });
    assert.equal(denied.status, 403);
    assert.deepEqual(errorCodes(denied), ['DENIED']);
    // A token for a repository is no admin token either, even the admin's: 401 asking for the
    // gc scope (insufficient_scope), so that a client fetches a token for it.
    const repoToken = await token('admin', 'admin-pw', 'repository:admin/app:pull,push');
    const otherScope = await http('POST', `${reg.url}/berth/gc`, { headers: repoToken });
    assert.equal(otherScope.status, 401);
    assert.match(
      otherScope.headers.get('www-authenticate') ?? '',
      /scope="registry:gc:\*",error="insufficient_scope"/,
    );
    const admin = await token('admin', 'admin-pw', 'registry:gc:*');
    const ok = await gcNow(reg, admin);
    assert.equal(ok.status, 200);
    assert.equal(typeof (ok.json() as { markedBlobs: number }).markedBlobs, 'number');
  });

  it('two registry processes on one storage never collect at once', async () => {
    const root = await tempDir('berth-gc-two-');
    const config = join(await tempDir('berth-gc-two-config-'), 'config.yml');
    await writeFile(
      config,
      JSON.stringify({
        version: '0.1',
        log: { level: 'error', accesslog: { disabled: true } },
        berth: { gc: { graceperiod: '0s', deleteuntagged: true } },
      }),
    );
    const a = await startRegistryOnRoot(root, ['--config', config]);
    const b = await startRegistryOnRoot(root, ['--config', config]).catch(async (err) => {
      await a.proc.stop();
      throw err;
    });
    try {
      // Enough content that one run takes a while: images to keep and orphans to delete.
      await Promise.all(
        Array.from({ length: 4 }, async (_, w) => {
          for (let i = 0; i < 10; i++) {
            await pushImage(w % 2 ? a.url : b.url, `two/w${w}`, `t${i}`, { layer: `keep ${w} ${i}` });
            await pushBlob(w % 2 ? b.url : a.url, `two/orphans${w}`, `orphan ${w} ${i}`);
          }
        }),
      );
      const runs: Array<{ from: string; start: number; end: number }> = [];
      let refused = 0;
      const both = () => new Set(runs.map((r) => r.from)).size === 2;
      for (let round = 0; round < 20 && (refused === 0 || !both()); round++) {
        // Each round one process is asked a moment before the other, taking turns.
        const order = round % 2 ? [b, a] : [a, b];
        const answers = await Promise.all(
          order.map(async (r, k) => {
            if (k > 0) await sleep(5);
            return { from: r.url, res: await http('POST', `${r.url}/berth/gc`) };
          }),
        );
        for (const { from, res } of answers) {
          if (res.status === 503) {
            refused++;
            assert.deepEqual(errorCodes(res), ['UNAVAILABLE']);
            assert.match(res.text(), /already running on this storage/);
            continue;
          }
          assert.equal(res.status, 200, res.text());
          const summary = res.json() as { startedAt: string; finishedAt: string };
          runs.push({ from, start: Date.parse(summary.startedAt), end: Date.parse(summary.finishedAt) });
        }
      }
      // Both processes collected, one of two simultaneous requests found the other's run going
      // on, and no two runs overlapped.
      assert.ok(refused > 0, 'no request found the other process collecting');
      assert.deepEqual(new Set(runs.map((r) => r.from)).size, 2, JSON.stringify(runs));
      runs.sort((x, y) => x.start - y.start);
      for (let i = 1; i < runs.length; i++)
        assert.ok(
          (runs[i] as { start: number }).start >= (runs[i - 1] as { end: number }).end,
          `runs overlap: ${JSON.stringify(runs)}`,
        );
      // The images are whole and the orphans gone.
      for (let w = 0; w < 4; w++) {
        const res = await http('GET', `${a.url}/v2/two/w${w}/manifests/t9`, {
          headers: { Accept: OCI_MANIFEST },
        });
        assert.equal(res.status, 200);
      }
      const stored = await storedBlobs(root);
      assert.equal(stored.has(sha256(Buffer.from('orphan 0 0'))), false);
    } finally {
      await Promise.all([a.proc.stop(), b.proc.stop()]);
    }
  });
});
