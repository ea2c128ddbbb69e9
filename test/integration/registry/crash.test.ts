/**
 * kill -9 of the registry process during concurrent pushes (monolithic blobs, chunked uploads,
 * manifests with tags), then a restart on the same storage: every acknowledged blob and
 * manifest is readable with its digest, every upload acknowledged up to some offset resumes
 * from there and completes, no tag is listed that does not resolve, and skopeo pushes into it.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { type FSWatcher, watch } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  buildOciLayout,
  OCI_MANIFEST,
  ociManifestJson,
  requireTool,
  skopeo,
  tempDir,
} from '../../helpers/registry.js';
import { type RegistryProcess, startRegistryOnRoot } from '../../helpers/registry-process.js';

const ACCEPT = OCI_MANIFEST;

function digestOf(data: Uint8Array | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

interface AckedBlob {
  repo: string;
  digest: string;
}
interface AckedManifest {
  repo: string;
  tag: string;
  digest: string;
}
interface Upload {
  repo: string;
  /** Path of the upload (from the last Location), without the host. */
  path: string;
  data: Buffer;
  /** Bytes the registry acknowledged (202 to the POST, then each PATCH's Range). */
  acked: number;
  /** The completing PUT was sent (its answer may have been lost in the kill). */
  completing: boolean;
  done: boolean;
}

/** The pushes in flight and what the registry acknowledged. */
class Load {
  readonly blobs: AckedBlob[] = [];
  readonly manifests: AckedManifest[] = [];
  readonly uploads: Upload[] = [];
  private readonly abort = new AbortController();
  private readonly workers: Promise<void>[] = [];
  /** Called as each manifest PUT is sent (the test kills the registry from here). */
  onManifestPut?: () => void;

  constructor(private readonly base: string) {}

  private async req(
    method: string,
    path: string,
    body?: Buffer | string,
    headers: Record<string, string> = {},
  ) {
    const res = await fetch(`${this.base}${path}`, {
      method,
      body,
      headers,
      signal: this.abort.signal,
      redirect: 'manual',
    });
    await res.arrayBuffer();
    return res;
  }

  private async monolithic(repo: string, data: Buffer | string): Promise<string | undefined> {
    const digest = digestOf(data);
    const res = await this.req('POST', `/v2/${repo}/blobs/uploads/?digest=${digest}`, data, {
      'Content-Type': 'application/octet-stream',
    });
    return res.status === 201 ? digest : undefined;
  }

  private async blobWorker(n: number): Promise<void> {
    for (let i = 0; ; i++) {
      const data = randomBytes(16_384 + ((n * 7919 + i * 104_729) % 131_072));
      const digest = await this.monolithic('crash/blobs', data);
      if (digest) this.blobs.push({ repo: 'crash/blobs', digest });
    }
  }

  private async chunkWorker(): Promise<void> {
    for (;;) {
      const data = randomBytes(6 * 65_536);
      const start = await this.req('POST', '/v2/crash/chunks/blobs/uploads/');
      if (start.status !== 202) throw new Error(`POST ${start.status}`);
      const upload: Upload = {
        repo: 'crash/chunks',
        path: new URL(start.headers.get('location') ?? '', this.base).pathname,
        data,
        acked: 0,
        completing: false,
        done: false,
      };
      this.uploads.push(upload);
      for (let off = 0; off < data.length; off += 65_536) {
        const chunk = data.subarray(off, off + 65_536);
        const res = await this.req('PATCH', upload.path, chunk, {
          'Content-Range': `${off}-${off + chunk.length - 1}`,
          'Content-Type': 'application/octet-stream',
        });
        if (res.status !== 202) throw new Error(`PATCH ${res.status}`);
        upload.path = new URL(res.headers.get('location') ?? '', this.base).pathname;
        upload.acked = Number((res.headers.get('range') ?? '').split('-')[1]) + 1;
        // A client between chunks (reading its source): most uploads are half-way at any time.
        await new Promise((r) => setTimeout(r, 5));
      }
      upload.completing = true;
      const done = await this.req('PUT', `${upload.path}?digest=${digestOf(data)}`);
      if (done.status !== 201) throw new Error(`PUT ${done.status}`);
      upload.done = true;
      this.blobs.push({ repo: 'crash/chunks', digest: digestOf(data) });
    }
  }

  private async manifestWorker(n: number): Promise<void> {
    const repo = `crash/images-${n}`;
    for (let i = 0; ; i++) {
      const layer = randomBytes(8_192);
      const config = JSON.stringify({ architecture: 'amd64', os: 'linux', n, i, rootfs: { type: 'layers' } });
      const [layerDigest, configDigest] = await Promise.all([
        this.monolithic(repo, layer),
        this.monolithic(repo, config),
      ]);
      if (!layerDigest || !configDigest) throw new Error('blob push refused');
      const manifest = ociManifestJson(
        { digest: configDigest, size: config.length },
        { digest: layerDigest, size: layer.length },
      );
      const tag = `t${i}`;
      const put = this.req('PUT', `/v2/${repo}/manifests/${tag}`, manifest, {
        'Content-Type': OCI_MANIFEST,
      });
      this.onManifestPut?.();
      const res = await put;
      if (res.status !== 201) throw new Error(`PUT manifest ${res.status}`);
      this.manifests.push({ repo, tag, digest: digestOf(manifest) });
    }
  }

  start(): void {
    const run = (p: Promise<void>) => this.workers.push(p.catch(() => {}));
    for (let n = 0; n < 2; n++) run(this.blobWorker(n));
    for (let n = 0; n < 3; n++) run(this.chunkWorker());
    for (let n = 0; n < 8; n++) run(this.manifestWorker(n));
  }

  /** Enough acknowledged of every kind, with uploads half-way. */
  ready(): boolean {
    const halfway = this.uploads.filter((u) => !u.completing && u.acked > 0).length;
    return this.blobs.length >= 4 && this.manifests.length >= 6 && halfway >= 2;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.workers);
  }
}

async function get(base: string, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, { headers, redirect: 'manual' });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

let dir: string;
let proc: RegistryProcess | undefined;
let watcher: FSWatcher | undefined;
before(async () => {
  dir = await tempDir('berth-crash-');
});
after(async () => {
  watcher?.close();
  await proc?.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

describe('kill -9 during concurrent pushes', () => {
  it('loses nothing acknowledged, resumes uploads, lists only tags that resolve', async () => {
    const root = join(dir, 'root');
    await mkdir(root, { recursive: true });
    const first = await startRegistryOnRoot(root, ['--log-level', 'error']);
    proc = first.proc;
    const load = new Load(first.url);
    const pid = first.proc.child.pid;
    assert.ok(pid);
    // Once enough is acknowledged, the kill comes the moment a tag's new current link is being
    // written (its temporary file appears), in the middle of the other pushes.
    let killed = false;
    const kill = () => {
      if (killed || !load.ready()) return;
      killed = true;
      process.kill(pid, 'SIGKILL');
    };
    watcher = watch(root, { recursive: true }, (_event, name) => {
      if (name && /_manifests\/tags\/[^/]+\/current\/link\.[0-9a-f]{12}\.tmp$/.test(name)) kill();
    });
    // Directories that come and go (uploads) may fail the watcher's scan: only the kill matters.
    watcher.on('error', () => {});
    load.onManifestPut = () => {
      // Without a watcher event in time (a slow machine), a kill soon after a manifest PUT.
      if (load.ready()) setTimeout(kill, 50);
    };
    load.start();
    const deadline = Date.now() + 20_000;
    while (!killed) {
      assert.ok(
        Date.now() < deadline,
        `the pushes did not get going: ${load.blobs.length} blobs, ${load.manifests.length} manifests, ${load.uploads.length} uploads`,
      );
      assert.ok(first.proc.alive(), first.proc.stderr());
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(await first.proc.exit, null);
    watcher.close();
    await load.stop();

    const second = await startRegistryOnRoot(root, ['--log-level', 'error']);
    proc = second.proc;
    const base = second.url;

    // Every acknowledged blob, with its digest.
    for (const b of load.blobs) {
      const res = await get(base, `/v2/${b.repo}/blobs/${b.digest}`);
      assert.equal(res.status, 200, `${b.repo}@${b.digest}`);
      assert.equal(digestOf(res.body), b.digest);
    }
    // Every acknowledged manifest, by tag and by digest.
    for (const m of load.manifests) {
      for (const ref of [m.tag, m.digest]) {
        const res = await get(base, `/v2/${m.repo}/manifests/${ref}`, { Accept: ACCEPT });
        assert.equal(res.status, 200, `${m.repo}:${ref}`);
        assert.equal(res.headers.get('docker-content-digest'), m.digest);
        assert.equal(digestOf(res.body), m.digest);
      }
    }
    // Every tag listed resolves, and every acknowledged tag is listed.
    const catalog = (await get(base, '/v2/_catalog')).body.toString();
    const repos = (JSON.parse(catalog) as { repositories: string[] }).repositories;
    let listed = 0;
    for (const repo of repos) {
      const res = await get(base, `/v2/${repo}/tags/list`);
      if (res.status === 404) continue;
      assert.equal(res.status, 200);
      const tags = (JSON.parse(res.body.toString()) as { tags: string[] }).tags;
      for (const tag of tags) {
        const head = await get(base, `/v2/${repo}/manifests/${tag}`, { Accept: ACCEPT });
        assert.equal(head.status, 200, `${repo}:${tag} is listed but does not resolve`);
        listed++;
      }
      for (const m of load.manifests.filter((x) => x.repo === repo)) assert.ok(tags.includes(m.tag));
    }
    assert.ok(listed >= load.manifests.length);
    // Every unfinished upload resumes from what the registry has (at least what it acknowledged).
    let resumed = 0;
    for (const u of load.uploads.filter((x) => !x.done)) {
      const status = await get(base, u.path);
      if (status.status === 404 && u.completing) {
        // Completed, but the answer was lost in the kill: the blob is there.
        assert.equal((await get(base, `/v2/${u.repo}/blobs/${digestOf(u.data)}`)).status, 200);
        continue;
      }
      assert.equal(status.status, 204, `${u.path}: ${status.body}`);
      // `0-0` is an empty upload (or one of a single byte, which 64 KiB chunks never leave).
      const range = status.headers.get('range') ?? '';
      const have = range === '0-0' ? 0 : Number(range.split('-')[1]) + 1;
      if (!u.completing)
        assert.ok(have >= u.acked, `${u.path}: the registry has ${have} of ${u.acked} acknowledged`);
      assert.ok(have <= u.data.length);
      let path = u.path;
      if (have < u.data.length) {
        const rest = u.data.subarray(have);
        const res = await fetch(`${base}${path}`, {
          method: 'PATCH',
          body: rest,
          headers: {
            'Content-Range': `${have}-${u.data.length - 1}`,
            'Content-Type': 'application/octet-stream',
          },
        });
        await res.arrayBuffer();
        assert.equal(res.status, 202, `resume ${u.path} at ${have}`);
        path = new URL(res.headers.get('location') ?? '', base).pathname;
      }
      const put = await fetch(`${base}${path}?digest=${digestOf(u.data)}`, { method: 'PUT' });
      await put.arrayBuffer();
      assert.equal(put.status, 201, `complete ${u.path}`);
      const blob = await get(base, `/v2/${u.repo}/blobs/${digestOf(u.data)}`);
      assert.equal(digestOf(blob.body), digestOf(u.data));
      resumed++;
    }
    assert.ok(resumed >= 2, `${resumed} uploads resumed`);

    // A real client pushes into the restarted registry.
    requireTool('skopeo', 'apt-get install skopeo');
    const layout = join(dir, 'layout');
    const built = await buildOciLayout(layout, { refName: 'v1', marker: 'after the crash' });
    const host = new URL(base).host;
    await skopeo(['copy', '--dest-tls-verify=false', `oci:${layout}:v1`, `docker://${host}/crash/skopeo:v1`]);
    const inspect = JSON.parse(
      await skopeo(['inspect', '--tls-verify=false', `docker://${host}/crash/skopeo:v1`]),
    );
    assert.equal(inspect.Digest, built.top);
    assert.equal(await second.proc.stop(), 0, second.proc.stderr());
    proc = undefined;
  });
});
