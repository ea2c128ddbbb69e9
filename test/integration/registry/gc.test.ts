import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startRegistry } from '../../../src/registry/index.js';
import {
  ALL_MANIFEST_TYPES,
  buildOciLayout,
  http,
  OCI_MANIFEST,
  pushBlob,
  pushImage,
  pushManifest,
  sha256,
  skopeo,
} from '../../helpers/registry.js';

type Running = Awaited<ReturnType<typeof startRegistry>>;
const repoRoot = resolve(import.meta.dirname, '../../..');

/** `berth registry gc ...` in its own process (the exported runGc), as an operator runs it. */
function gc(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const script = `const m = await import(${JSON.stringify(join(repoRoot, 'src/cli/registry-gc.command.ts'))}); process.exitCode = await m.runGc(process.argv.slice(1));`;
  return new Promise((resolvePromise, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script, '--', ...args],
      {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? -1, stdout, stderr });
    });
  });
}

function blobFiles(root: string): string[] {
  const out: string[] = [];
  const base = join(root, 'docker/registry/v2/blobs/sha256');
  for (const prefix of safeList(base)) {
    for (const hex of safeList(join(base, prefix))) {
      if (safeList(join(base, prefix, hex)).includes('data')) out.push(`sha256:${hex}`);
    }
  }
  return out.sort();
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Make every file of the storage look two hours old. */
function age(root: string): void {
  const past = new Date(Date.now() - 2 * 3600_000);
  const walk = (dir: string) => {
    for (const name of safeList(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      utimesSync(p, past, past);
    }
  };
  walk(root);
}

/** Pull an image completely over HTTP, checking every digest; returns the blobs it holds. */
async function pullAll(base: string, name: string, reference: string): Promise<string[]> {
  const res = await http('GET', `${base}/v2/${name}/manifests/${reference}`, {
    headers: { Accept: ALL_MANIFEST_TYPES },
  });
  assert.equal(res.status, 200, `${name}:${reference}: manifest ${res.status} ${res.text()}`);
  const doc = res.json() as {
    config?: { digest: string };
    layers?: Array<{ digest: string }>;
    manifests?: Array<{ digest: string }>;
  };
  const blobs: string[] = [];
  for (const child of doc.manifests ?? []) blobs.push(...(await pullAll(base, name, child.digest)));
  for (const d of [doc.config?.digest, ...(doc.layers ?? []).map((l) => l.digest)]) {
    if (!d) continue;
    const blob = await http('GET', `${base}/v2/${name}/blobs/${d}`);
    assert.equal(blob.status, 200, `${name}:${reference}: blob ${d} answered ${blob.status}`);
    assert.equal(sha256(blob.body), d, `${name}:${reference}: blob ${d} content`);
    blobs.push(d);
  }
  return blobs;
}

async function pushChunked(base: string, name: string, data: Buffer, chunk: number): Promise<string> {
  const start = await http('POST', `${base}/v2/${name}/blobs/uploads/`);
  assert.equal(start.status, 202);
  let location = new URL(start.headers.get('location') ?? '', base).toString();
  for (let off = 0; off < data.length; off += chunk) {
    const part = data.subarray(off, Math.min(data.length, off + chunk));
    const res = await http('PATCH', location, {
      body: part,
      headers: {
        'Content-Type': 'application/octet-stream',
        'Content-Range': `${off}-${off + part.length - 1}`,
      },
    });
    assert.equal(res.status, 202, res.text());
    location = new URL(res.headers.get('location') ?? '', base).toString();
    // Give a concurrent collector time to look while the upload is half done.
    await new Promise((r) => setTimeout(r, 5));
  }
  const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
  const url = new URL(location);
  url.searchParams.set('digest', digest);
  const done = await http('PUT', url.toString());
  assert.equal(done.status, 201, done.text());
  return digest;
}

describe('registry gc', () => {
  let dir: string;
  let root: string;
  let reg: Running;
  let host: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-gc-it-'));
    root = join(dir, 'storage');
    reg = await startRegistry({
      log: { level: 'error', accesslog: { disabled: true } },
      storage: { filesystem: { rootdirectory: root }, delete: { enabled: true } },
      http: { addr: '127.0.0.1:0' },
    });
    host = new URL(reg.url).host;
  });
  after(async () => {
    await reg.close();
    rmSync(dir, { recursive: true, force: true });
  });

  let keep: Awaited<ReturnType<typeof pushImage>>;
  let gone: Awaited<ReturnType<typeof pushImage>>;
  let orphan: string;
  let untagged: Awaited<ReturnType<typeof pushImage>>;

  it('setup: images, a deleted manifest, an orphan blob, an untagged manifest, a multi-arch index', async () => {
    keep = await pushImage(reg.url, 'gc/keep', 'v1');
    gone = await pushImage(reg.url, 'gc/gone', 'v1');
    const del = await http('DELETE', `${reg.url}/v2/gc/gone/manifests/${gone.digest}`);
    assert.equal(del.status, 202);
    orphan = await pushBlob(reg.url, 'gc/keep', `orphan ${Math.random()}`);
    untagged = await pushImage(reg.url, 'gc/untagged', 'tmp');
    // Move the tag to another image: the first one stays as an untagged revision.
    await pushImage(reg.url, 'gc/untagged', 'tmp');
    const layout = join(dir, 'multi');
    await buildOciLayout(layout, {
      refName: 'v1',
      platforms: [
        { os: 'linux', architecture: 'amd64' },
        { os: 'linux', architecture: 'arm64' },
      ],
      marker: 'gc',
    });
    await skopeo([
      'copy',
      '--all',
      '--dest-tls-verify=false',
      `oci:${layout}:v1`,
      `docker://${host}/gc/multi:v1`,
    ]);
    age(root);
  });

  it('a dry run lists the unreferenced blobs without deleting anything', async () => {
    const before = blobFiles(root);
    const r = await gc(['--root', root, '--dry-run', '--grace-period', '1m']);
    assert.equal(r.code, 0, r.stderr);
    for (const d of [orphan, gone.digest, gone.layer])
      assert.ok(r.stdout.includes(`blob eligible for deletion: ${d}`), d);
    assert.ok(!r.stdout.includes(`blob eligible for deletion: ${keep.layer}`));
    assert.match(r.stdout, /3 blobs and 0 manifests eligible for deletion/);
    assert.deepEqual(blobFiles(root), before);
  });

  it('a real run deletes exactly the unreferenced blobs; the rest still pulls', async () => {
    const before = blobFiles(root);
    const r = await gc(['--root', root, '--grace-period', '1m']);
    assert.equal(r.code, 0, r.stderr);
    const deleted = before.filter((d) => !blobFiles(root).includes(d));
    // gone's config is shared with every other image of the helper (same bytes): it stays.
    assert.deepEqual(deleted, [orphan, gone.digest, gone.layer].sort());
    assert.equal((await http('HEAD', `${reg.url}/v2/gc/gone/blobs/${gone.layer}`)).status, 404);
    await pullAll(reg.url, 'gc/keep', 'v1');
    await pullAll(reg.url, 'gc/multi', 'v1');
    await pullAll(reg.url, 'gc/untagged', untagged.digest);
    const out = join(dir, 'pulled');
    await skopeo([
      'copy',
      '--all',
      '--src-tls-verify=false',
      `docker://${host}/gc/multi:v1`,
      `oci:${out}:v1`,
    ]);
  });

  it('--delete-untagged deletes manifests no tag reaches, and their blobs', async () => {
    const r = await gc(['--root', root, '--delete-untagged', '--grace-period', '1m']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`gc/untagged: manifest eligible for deletion: ${untagged.digest}`));
    const res = await http('GET', `${reg.url}/v2/gc/untagged/manifests/${untagged.digest}`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(res.status, 404);
    assert.ok(!blobFiles(root).includes(untagged.layer));
    await pullAll(reg.url, 'gc/untagged', 'tmp');
    await pullAll(reg.url, 'gc/multi', 'v1');
    await pullAll(reg.url, 'gc/keep', 'v1');
  });

  it('under concurrent pushes no pushed image loses a blob', { timeout: 120_000 }, async (t) => {
    // Fresh garbage for the collector to find while pushes run.
    const garbage = [];
    for (let i = 0; i < 5; i++) garbage.push(await pushBlob(reg.url, 'gc/busy', randomBytes(2048)));
    age(root);

    const pushed: Array<{ name: string; tag: string }> = [];
    const failures: string[] = [];
    let stop = false;
    const pusher = async (n: number) => {
      for (let i = 0; !stop && i < 200; i++) {
        const name = `gc/busy/p${n}`;
        const tag = `t${i}`;
        try {
          if (i % 3 === 0) {
            // A chunked layer, then a manifest by digest first and the tag last (as multi-arch pushes do).
            const layer = await pushChunked(reg.url, name, randomBytes(96 * 1024), 16 * 1024);
            const config = await pushBlob(reg.url, name, JSON.stringify({ os: 'linux', n, i }));
            const manifest = JSON.stringify({
              schemaVersion: 2,
              mediaType: OCI_MANIFEST,
              config: {
                mediaType: 'application/vnd.oci.image.config.v1+json',
                digest: config,
                size: JSON.stringify({ os: 'linux', n, i }).length,
              },
              layers: [
                { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: layer, size: 96 * 1024 },
              ],
            });
            const byDigest = await pushManifest(reg.url, name, sha256(manifest), manifest, OCI_MANIFEST);
            assert.equal(byDigest.status, 201, byDigest.text());
            await new Promise((r) => setTimeout(r, 20));
            const byTag = await pushManifest(reg.url, name, tag, manifest, OCI_MANIFEST);
            assert.equal(byTag.status, 201, byTag.text());
          } else {
            await pushImage(reg.url, name, tag, { layer: randomBytes(64 * 1024) });
          }
          pushed.push({ name, tag });
        } catch (err) {
          failures.push(`${name}:${tag}: ${(err as Error).message}`);
        }
      }
    };
    const pushers = [0, 1, 2, 3].map(pusher);
    const runs: Array<{ code: number; stdout: string; stderr: string }> = [];
    const deadline = Date.now() + 6_000;
    while (Date.now() < deadline) {
      runs.push(await gc(['--root', root, '--delete-untagged', '--grace-period', '10s', '--quiet']));
    }
    stop = true;
    await Promise.all(pushers);
    for (const r of runs) assert.equal(r.code, 0, r.stderr);
    t.diagnostic(`${runs.length} collections ran during ${pushed.length} image pushes`);
    assert.ok(runs.length >= 2, `expected several collections during the pushes, got ${runs.length}`);
    assert.deepEqual(failures, []);
    assert.ok(pushed.length >= 20, `only ${pushed.length} images pushed`);
    for (const d of garbage) assert.ok(!blobFiles(root).includes(d), `garbage ${d} was not collected`);
    // One more collection after the pushes, with no grace at all: still nothing referenced goes.
    const last = await gc(['--root', root, '--delete-untagged', '--grace-period', '0s', '--quiet']);
    assert.equal(last.code, 0, last.stderr);
    for (const { name, tag } of pushed) await pullAll(reg.url, name, tag);
    const sample = pushed[pushed.length - 1]!;
    await skopeo([
      'copy',
      '--src-tls-verify=false',
      `docker://${host}/${sample.name}:${sample.tag}`,
      `oci:${join(dir, 'sample')}:x`,
    ]);
  });
});
