import { createHash } from 'node:crypto';
import { PASSWORD, USER } from './process.js';

/**
 * What the registry fuzzer's requests name: two repositories with an image each (a layer, a
 * config, an OCI manifest tagged v1), an open upload session, and upload IDs and digests learned
 * from answers. Put back at fixed request indices when requests deleted them.
 */

export const AUTH = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
export const MAINTAIN_EVERY = 300;
const KEEP_LEARNED = 40;

function sha256(data: string | Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export class RegistryWorld {
  readonly repos = ['fz/one', 'fz/two'];
  readonly tags = ['v1', 'latest'];
  readonly digests: string[] = [];
  readonly uploads: string[] = [];
  readonly learnedUploads: string[] = [];
  readonly learnedDigests: string[] = [];
  manifest = '';

  constructor(private readonly base: string) {}

  private async req(
    method: string,
    path: string,
    body?: string | Buffer,
    headers: Record<string, string> = {},
  ) {
    const res = await fetch(new URL(path, this.base), {
      method,
      body,
      headers: { Authorization: AUTH, ...headers },
      redirect: 'manual',
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text };
  }

  private async blob(repo: string, data: string): Promise<string> {
    const digest = sha256(data);
    const start = await this.req('POST', `/v2/${repo}/blobs/uploads/`);
    if (start.status !== 202) throw new Error(`setup: POST upload ${start.status} ${start.text}`);
    const loc = new URL(start.headers.get('location') ?? '', this.base);
    loc.searchParams.set('digest', digest);
    const put = await this.req('PUT', loc.pathname + loc.search, data, {
      'Content-Type': 'application/octet-stream',
    });
    if (put.status !== 201) throw new Error(`setup: PUT upload ${put.status} ${put.text}`);
    return digest;
  }

  async setup(): Promise<void> {
    await this.ensure();
  }

  private async ensure(): Promise<void> {
    for (const repo of this.repos) {
      const have = await this.req('HEAD', `/v2/${repo}/manifests/v1`);
      if (have.status === 200) continue;
      const layerData = `layer of ${repo}`;
      const configData = JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        rootfs: { type: 'layers', diff_ids: [] },
      });
      const layer = await this.blob(repo, layerData);
      const config = await this.blob(repo, configData);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: {
          mediaType: 'application/vnd.oci.image.config.v1+json',
          digest: config,
          size: configData.length,
        },
        layers: [
          { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: layer, size: layerData.length },
        ],
      });
      const put = await this.req('PUT', `/v2/${repo}/manifests/v1`, manifest, {
        'Content-Type': 'application/vnd.oci.image.manifest.v1+json',
      });
      if (put.status !== 201) throw new Error(`setup: PUT manifest ${put.status} ${put.text}`);
      this.manifest = manifest;
      for (const d of [layer, config, sha256(manifest)]) if (!this.digests.includes(d)) this.digests.push(d);
    }
    const up = await this.req('POST', '/v2/fz/one/blobs/uploads/');
    const id = /\/blobs\/uploads\/([^/?]+)/.exec(up.headers.get('location') ?? '')?.[1];
    if (id) this.uploads.splice(0, this.uploads.length, id);
  }

  async maintain(index: number): Promise<void> {
    if (index === 0 || index % MAINTAIN_EVERY !== 0) return;
    await this.ensure();
    this.learnedUploads.splice(0, Math.max(0, this.learnedUploads.length - KEEP_LEARNED));
    this.learnedDigests.splice(0, Math.max(0, this.learnedDigests.length - KEEP_LEARNED));
  }

  learnUpload(id: string): void {
    this.learnedUploads.push(id);
  }

  learnDigest(d: string): void {
    if (!this.learnedDigests.includes(d)) this.learnedDigests.push(d);
  }
}
